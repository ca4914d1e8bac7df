//! `faultline analyze` of a distributed job: several files, a folder (read recursively) or a
//! `.zip` / `.tar.gz`, each file read once, one at a time, into one bundle diagnosis.

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::{EXIT_NOTHING, EXIT_OK, RulesOption};
use crate::bundle::binary::is_binary;
use crate::bundle::xid::{CATALOG_FILE, XidCatalog};
use crate::bundle::{ArchiveLimits, BundleAnalyzer, archive_kind, read_archive, render};

/// How a bundle diagnosis is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BundleFormat {
    /// Text for people.
    Human,
    /// The bundle diagnosis document.
    Json,
}

/// Most files a folder may hold.
const MAX_FOLDER_FILES: usize = 100_000;

/// Whether the arguments name a bundle (several files, a folder, an archive) rather than one log.
pub fn is_bundle(files: &[PathBuf]) -> anyhow::Result<bool> {
    match files {
        [] => Ok(false),
        [one] if one == Path::new("-") => Ok(false),
        [one] => {
            if one.is_dir() {
                return Ok(true);
            }
            // An archive is a bundle; so is a binary file (a flight-recorder pickle is read as a
            // one-file bundle, anything else is refused there with the bundle's words).
            let mut head = Vec::with_capacity(8192);
            File::open(one)
                .and_then(|f| f.take(8192).read_to_end(&mut head))
                .with_context(|| format!("cannot open {}", one.display()))?;
            Ok(archive_kind(&head).is_some() || is_binary(&head))
        }
        _ => Ok(true),
    }
}

/// Analyzes the bundle and writes its diagnosis.
pub fn run(
    paths: &[PathBuf],
    rules: &RulesOption,
    format: BundleFormat,
    out: &mut impl Write,
) -> anyhow::Result<u8> {
    if paths.iter().any(|p| p == Path::new("-")) {
        anyhow::bail!("standard input (`-`) can only be read alone, as one log");
    }
    let rule_set = rules.load()?;
    let catalog = match rules
        .dir
        .as_deref()
        .map(|d| d.join(CATALOG_FILE))
        .filter(|p| p.is_file())
    {
        Some(path) => {
            let text =
                std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
            XidCatalog::parse(&text, &path.display().to_string())?
        }
        None => XidCatalog::embedded()?,
    };
    let mut analyzer = BundleAnalyzer::new(&rule_set, catalog);
    for path in paths {
        if path.is_dir() {
            for file in folder_files(path)? {
                let name = file.strip_prefix(path).unwrap_or(&file).display().to_string();
                let reader = File::open(&file).with_context(|| format!("cannot open {}", file.display()))?;
                analyzer.add_reader(&name, BufReader::with_capacity(1 << 16, reader))?;
            }
            continue;
        }
        let mut file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let mut head = [0u8; 4];
        let n = file
            .read(&mut head)
            .with_context(|| format!("cannot read {}", path.display()))?;
        drop(file);
        let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        if archive_kind(&head[..n]).is_some() {
            let prefix = path.display().to_string();
            read_archive(BufReader::new(file), ArchiveLimits::default(), |name, reader| {
                analyzer
                    .add_reader(&format!("{prefix}/{name}"), reader)
                    .map_err(|e| e.to_string())
            })
            .with_context(|| format!("{}", path.display()))?;
        } else {
            analyzer.add_reader(
                &path.display().to_string(),
                BufReader::with_capacity(1 << 16, file),
            )?;
        }
    }
    if let Some(why) = analyzer.nothing_read() {
        anyhow::bail!(why);
    }
    let diagnosis = analyzer.finish();
    let source = paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" ");
    match format {
        BundleFormat::Human => out.write_all(render::human(&diagnosis, &source).as_bytes())?,
        BundleFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, &diagnosis)?;
            out.write_all(b"\n")?;
        }
    }
    Ok(if diagnosis.is_diagnosed() {
        EXIT_OK
    } else {
        EXIT_NOTHING
    })
}

/// The regular files under `dir`, sorted, hidden ones left out.
fn folder_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).with_context(|| format!("cannot list {}", d.display()))? {
            let entry = entry.with_context(|| format!("cannot list {}", d.display()))?;
            let path = entry.path();
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let kind = entry
                .file_type()
                .with_context(|| format!("cannot read {}", path.display()))?;
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() {
                files.push(path);
                if files.len() > MAX_FOLDER_FILES {
                    anyhow::bail!("{} holds more than {MAX_FOLDER_FILES} files", dir.display());
                }
            }
        }
    }
    if files.is_empty() {
        anyhow::bail!("{} holds no file", dir.display());
    }
    files.sort();
    Ok(files)
}
