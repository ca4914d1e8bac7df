//! A distributed job's failure from all its files: per-rank logs, one interleaved log, torchrun's
//! error files, SLURM output, kernel logs, `nvidia-smi -q`, DCGM diagnostics and flight-recorder
//! dumps in; a [`BundleDiagnosis`] out (the first fault, the cascades folded, the collectives
//! per process group, the Xids).
//!
//! Files are read one at a time ([`BundleAnalyzer::add_reader`]): a log goes through the
//! single-log analysis's streaming scan (its own diagnosis is kept), and the same blocks feed the
//! bundle's pass ([`scan`]), which keeps only bounded per-file facts; the analyzer keeps
//! per-rank summaries, never the text. [`BundleAnalyzer::finish`] elects the first fault.
//! A binary file is read only when it is a flight-recorder pickle; any other is left out with a
//! warning ([`binary`]).

mod archive;
pub mod binary;
mod detect;
mod elect;
mod merge;
mod own;
pub mod pickle;
pub mod render;
mod scan;
mod signals;
mod sources;
pub mod stamp;
pub mod xid;

pub use archive::{ArchiveError, ArchiveKind, ArchiveLimits, archive_kind, read_archive};
pub use detect::{
    HEAD_BYTES, Slot, detect, dump_rank_from_name, host_from_name, rank_from_name, torchrun_slot,
};
pub use merge::UNKNOWN_PG;

use std::io::{self, Read};

use crate::diagnose::analyze_reader;
use crate::model::{BundleDiagnosis, FileKind, Warning};
use crate::rules::RuleSet;
use binary::LeftOut;
use merge::State;
use xid::XidCatalog;

/// Largest structured file read whole (a dump, an error file, a report): bigger ones are refused
/// with a warning.
pub const MAX_STRUCTURED_BYTES: usize = 256 << 20;

/// Most files a bundle may hold.
pub const MAX_FILES: usize = 100_000;

/// Why a file could not be added.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// Reading it failed.
    #[error("{name}: cannot read: {source}")]
    Io {
        /// The file.
        name: String,
        /// Why.
        source: io::Error,
    },
    /// Too many files.
    #[error("a bundle holds at most {MAX_FILES} files")]
    TooManyFiles,
}

/// Builds a [`BundleDiagnosis`] from files added one at a time.
pub struct BundleAnalyzer<'r> {
    rules: &'r RuleSet,
    state: State,
    files: usize,
    left_out: Vec<(String, LeftOut)>,
}

impl<'r> BundleAnalyzer<'r> {
    /// An analyzer with the rule base and the Xid catalog to use.
    pub fn new(rules: &'r RuleSet, catalog: XidCatalog) -> Self {
        Self {
            rules,
            state: State::new(catalog),
            files: 0,
            left_out: Vec::new(),
        }
    }

    /// Leaves a file out of the analysis, with the warning that says why (a caller that decoded
    /// the file already: [`binary::decode`]).
    pub fn leave_out(&mut self, name: &str, why: &LeftOut) {
        self.files += 1;
        self.record_left_out(name, why);
    }

    fn record_left_out(&mut self, name: &str, why: &LeftOut) {
        self.state.warn(why.warning(name));
        self.left_out.push((name.to_owned(), why.clone()));
    }

    /// When every file added so far was left out (none could be read): why, in words.
    pub fn nothing_read(&self) -> Option<String> {
        (self.files > 0 && self.left_out.len() == self.files)
            .then(|| binary::nothing_readable(&self.left_out))
    }

    /// Adds a file held in memory.
    pub fn add_bytes(&mut self, name: &str, bytes: &[u8]) -> Result<(), BundleError> {
        self.add_reader(name, bytes)
    }

    /// Adds a file from a reader, streaming it.
    pub fn add_reader<R: Read + Send>(&mut self, name: &str, mut reader: R) -> Result<(), BundleError> {
        self.files += 1;
        if self.files > MAX_FILES {
            return Err(BundleError::TooManyFiles);
        }
        let io = |source| BundleError::Io {
            name: name.to_owned(),
            source,
        };
        let mut head = Vec::with_capacity(HEAD_BYTES);
        reader
            .by_ref()
            .take(HEAD_BYTES as u64)
            .read_to_end(&mut head)
            .map_err(io)?;
        if archive::archive_kind(&head).is_some() {
            self.state.skipped(
                name,
                FileKind::Unknown,
                head.len() as u64,
                "an archive inside the bundle: not opened (unpack it next to the others)".to_owned(),
            );
            return Ok(());
        }
        let detected = detect(name, &head);
        let kind = detected.kind;
        let binary = binary::is_binary(&head);
        if binary && kind != FileKind::FlightRecorder {
            self.record_left_out(name, &LeftOut::NotAFormat);
            return Ok(());
        }
        match kind {
            FileKind::FlightRecorder | FileKind::ErrorFile | FileKind::NvidiaSmi | FileKind::DcgmDiag => {
                let mut bytes = head;
                reader
                    .take((MAX_STRUCTURED_BYTES + 1 - bytes.len().min(MAX_STRUCTURED_BYTES)) as u64)
                    .read_to_end(&mut bytes)
                    .map_err(io)?;
                if binary {
                    match binary::decode(name, &bytes) {
                        Ok(decoded) => self.state.decoded_dump(name, bytes.len() as u64, decoded.dump),
                        Err(why) => self.record_left_out(name, &why),
                    }
                    return Ok(());
                }
                if bytes.len() > MAX_STRUCTURED_BYTES {
                    self.state.skipped(
                        name,
                        kind,
                        bytes.len() as u64,
                        format!("larger than {} MiB: not read", MAX_STRUCTURED_BYTES >> 20),
                    );
                    return Ok(());
                }
                self.state.structured(self.rules, name, kind, &bytes);
            }
            FileKind::KernelLog => {
                let mut pass = scan::LogScan::new();
                let mut tee = scan::Tee::new(io::Cursor::new(head).chain(reader), &mut pass);
                io::copy(&mut tee, &mut io::sink()).map_err(io)?;
                self.state.kernel_log(name, pass.finish());
            }
            _ => {
                let mut pass = scan::LogScan::new();
                let tee = scan::Tee::new(io::Cursor::new(head).chain(reader), &mut pass);
                let analysis = analyze_reader(self.rules, tee).map_err(io)?;
                self.state
                    .log(self.rules, name, &detected, analysis, pass.finish());
            }
        }
        Ok(())
    }

    /// Elects the first fault and folds the rest.
    pub fn finish(self) -> BundleDiagnosis {
        elect::finish(self.state)
    }
}

/// Analyzes files held in memory (name, bytes) as one bundle.
pub fn analyze_files(rules: &RuleSet, catalog: XidCatalog, files: &[(&str, &[u8])]) -> BundleDiagnosis {
    let mut analyzer = BundleAnalyzer::new(rules, catalog);
    for (name, bytes) in files {
        // Reading from memory cannot fail; a bundle over the file limit keeps what it read.
        if let Err(e) = analyzer.add_bytes(name, bytes) {
            analyzer
                .state
                .warn(Warning::new("file_refused", e.to_string(), None));
        }
    }
    analyzer.finish()
}

#[cfg(test)]
mod tests;
