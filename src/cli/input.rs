//! Opening the log a command reads: a file, or standard input for `-` or no argument.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use anyhow::Context;

/// Opens `path` for reading; `None` or `-` is standard input. The reader can move to another
/// thread (large inputs are scanned on two).
pub fn open_input(path: Option<&Path>) -> anyhow::Result<Box<dyn Read + Send>> {
    match path {
        None => Ok(Box::new(io::stdin())),
        Some(p) if p == Path::new("-") => Ok(Box::new(io::stdin())),
        Some(p) => {
            if p.is_dir() {
                anyhow::bail!("{} is a directory, not a log file", p.display());
            }
            let file = File::open(p).with_context(|| format!("cannot open {}", p.display()))?;
            Ok(Box::new(BufReader::with_capacity(1 << 16, file)))
        }
    }
}
