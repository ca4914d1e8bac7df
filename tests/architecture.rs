//! The code map of ARCHITECTURE.md, enforced: a module that uses what the map forbids fails here,
//! naming the file, the line and the rule.

use std::path::{Path, PathBuf};

/// The edges of the crate: IO, the service and its faces.
const EDGES: &[&str] = &[
    "kb", "objects", "service", "http", "api", "web", "app", "server", "worker", "cli", "config", "metrics",
];

/// Crates the pure core never uses.
const IO_CRATES: &[&str] = &[
    "axum",
    "sqlx",
    "tokio",
    "tower",
    "tower_http",
    "hyper",
    "hyper_util",
    "object_store",
    "ureq",
    "reqwest",
];

/// (module, crate modules it may not use, external crates it may not use).
fn map() -> Vec<(&'static str, Vec<&'static str>, Vec<&'static str>)> {
    let mut map = Vec::new();
    let core = [
        "model",
        "scan",
        "normalize",
        "parse",
        "rules",
        "diagnose",
        "rulecheck",
        "replay",
        "eval",
        "output",
        "bundle",
    ];
    for module in core {
        let mut forbidden = EDGES.to_vec();
        match module {
            "model" => forbidden.extend(core.iter().filter(|m| **m != "model")),
            "rules" => forbidden.extend(["diagnose", "rulecheck"]),
            _ => {}
        }
        map.push((module, forbidden, IO_CRATES.to_vec()));
    }
    let faces_and_app = vec!["service", "http", "api", "web", "app"];
    map.push(("kb", faces_and_app.clone(), vec![]));
    map.push(("objects", faces_and_app, vec![]));
    map.push((
        "service",
        vec!["http", "api", "web", "app", "server", "cli"],
        vec!["axum", "tower", "tower_http", "hyper"],
    ));
    map.push(("http", vec!["api", "web", "app"], vec![]));
    map.push(("api", vec!["web", "app"], vec![]));
    map.push(("web", vec!["api", "app"], vec![]));
    map.push(("app", vec!["cli"], vec![]));
    map.push(("server", vec!["cli"], vec![]));
    map.push(("worker", vec!["api", "web", "app"], vec![]));
    map.push(("config", vec!["api", "web", "app"], vec![]));
    map.push(("metrics", vec!["api", "web", "app"], vec![]));
    map
}

fn rust_files(module: &str) -> Vec<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let folder = src.join(module);
    if !folder.is_dir() {
        let file = src.join(format!("{module}.rs"));
        assert!(
            file.is_file(),
            "the map names {module}, which is neither src/{module}/ nor src/{module}.rs"
        );
        return vec![file];
    }
    let mut files = Vec::new();
    let mut stack = vec![folder];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files
}

/// Whether `line` (code, not a comment) uses `crate::module`.
fn uses_module(line: &str, module: &str) -> bool {
    let needle = format!("crate::{module}");
    line.match_indices(&needle).any(|(i, _)| {
        let after = line[i + needle.len()..].chars().next();
        !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// Whether `line` uses the external crate `name` (`name::…` not preceded by a path).
fn uses_crate(line: &str, name: &str) -> bool {
    let needle = format!("{name}::");
    line.match_indices(&needle).any(|(i, _)| {
        let before = line[..i].chars().next_back();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
    })
}

#[test]
fn no_module_uses_what_the_architecture_map_forbids() {
    let mut broken = Vec::new();
    for (module, modules, crates) in map() {
        for file in rust_files(module) {
            let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            for (n, line) in text.lines().enumerate() {
                let code = line.trim_start();
                if code.starts_with("//") {
                    continue;
                }
                for m in modules.iter().filter(|m| uses_module(code, m)) {
                    broken.push(format!("{}:{}: {module} uses crate::{m}", file.display(), n + 1));
                }
                for c in crates.iter().filter(|c| uses_crate(code, c)) {
                    broken.push(format!(
                        "{}:{}: {module} uses the crate {c}",
                        file.display(),
                        n + 1
                    ));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "ARCHITECTURE.md's code map is broken:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_checker_sees_paths_and_not_their_lookalikes() {
    assert!(uses_module("use crate::api::ApiError;", "api"));
    assert!(uses_module("crate::web::WebError(e)", "web"));
    assert!(!uses_module("use crate::apis::X;", "api"));
    assert!(uses_crate("use axum::Router;", "axum"));
    assert!(uses_crate("let x = tokio::spawn(f);", "tokio"));
    assert!(!uses_crate("use my_axum::Router;", "axum"));
    assert!(!uses_crate("crate::tokio::x", "tokio"));
}

#[test]
fn every_module_of_the_crate_is_on_the_map() {
    let listed: Vec<&str> = map().iter().map(|(m, _, _)| *m).chain(["cli"]).collect();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs");
    let lib = std::fs::read_to_string(&src).unwrap_or_else(|e| panic!("{e}"));
    for line in lib.lines() {
        if let Some(name) = line.strip_prefix("pub mod ").and_then(|r| r.strip_suffix(';')) {
            assert!(
                listed.contains(&name),
                "src/{name} is not on ARCHITECTURE.md's code map (tests/architecture.rs)"
            );
        }
    }
}
