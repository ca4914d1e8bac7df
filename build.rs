//! Embeds the default rule base (`rules/`) into the binary, so faultline works anywhere.

use std::path::{Path, PathBuf};

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    println!("cargo:rerun-if-changed={}", dir.display());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|e| e == "toml") {
            println!("cargo:rerun-if-changed={}", path.display());
            files.push(path);
        }
    }
}

fn main() {
    let root =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into())).join("rules");
    let mut files = Vec::new();
    collect(&root, &mut files);
    files.sort();
    let mut out =
        String::from("/// Rule files embedded at build time: (path relative to rules/, contents).\n");
    out.push_str("pub const EMBEDDED_RULES: &[(&str, &str)] = &[\n");
    for file in &files {
        let relative = file
            .strip_prefix(&root)
            .unwrap_or(file)
            .to_string_lossy()
            .replace('\\', "/");
        out.push_str(&format!(
            "    ({relative:?}, include_str!({:?})),\n",
            file.display().to_string()
        ));
    }
    out.push_str("];\n");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_else(|_| ".".into()));
    if let Err(e) = std::fs::write(out_dir.join("embedded_rules.rs"), out) {
        panic!("cannot write the embedded rule list: {e}");
    }
}
