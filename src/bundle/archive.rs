//! A bundle packed in a `.zip` or a `.tar.gz`: each regular file is handed on as a reader, within
//! limits on the number of entries and the bytes they inflate to. A zip bomb is refused when its
//! declared sizes exceed the limits, and stopped at the limit when it lies about them.

use std::io::{self, Read, Seek};

use flate2::read::MultiGzDecoder;

/// How much an archive may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchiveLimits {
    /// Most entries.
    pub max_entries: usize,
    /// Most bytes all entries inflate to.
    pub max_inflated: u64,
}

impl Default for ArchiveLimits {
    fn default() -> Self {
        Self {
            max_entries: 20_000,
            max_inflated: 16 << 30,
        }
    }
}

/// Why an archive was refused.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// Not a zip or a gzip'd tar.
    #[error("not a .zip or a .tar.gz archive")]
    NotAnArchive,
    /// Too many entries.
    #[error("the archive holds more than {0} files: refused")]
    TooManyEntries(usize),
    /// Too many bytes once inflated.
    #[error("the archive inflates to more than {0} bytes: refused (a zip bomb, or raise the limit)")]
    TooLarge(u64),
    /// A malformed archive.
    #[error("malformed archive: {0}")]
    Malformed(String),
    /// Reading failed.
    #[error("cannot read the archive: {0}")]
    Io(#[from] io::Error),
    /// The handler of an entry failed.
    #[error("{0}")]
    Entry(String),
}

/// What kind of archive `head` starts.
pub fn archive_kind(head: &[u8]) -> Option<ArchiveKind> {
    if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        Some(ArchiveKind::Zip)
    } else if head.starts_with(&[0x1f, 0x8b]) {
        Some(ArchiveKind::TarGz)
    } else {
        None
    }
}

/// The archive formats read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveKind {
    /// `.zip`.
    Zip,
    /// `.tar.gz` / `.tgz`.
    TarGz,
}

/// A reader that fails once more than `budget` bytes came through it.
struct Budget<'a, R> {
    inner: R,
    left: &'a mut u64,
    limit: u64,
}

impl<R: Read> Read for Budget<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n as u64 > *self.left {
            return Err(io::Error::other(ArchiveError::TooLarge(self.limit).to_string()));
        }
        *self.left -= n as u64;
        Ok(n)
    }
}

/// Hands each regular file of the archive to `entry` (its name and a reader), in archive order.
pub fn read_archive<R, F>(mut reader: R, limits: ArchiveLimits, mut entry: F) -> Result<usize, ArchiveError>
where
    R: Read + Seek + Send,
    F: FnMut(&str, &mut (dyn Read + Send)) -> Result<(), String>,
{
    let mut head = [0u8; 4];
    let n = reader.read(&mut head)?;
    reader.rewind()?;
    match archive_kind(&head[..n]) {
        Some(ArchiveKind::Zip) => read_zip(reader, limits, &mut entry),
        Some(ArchiveKind::TarGz) => read_tar(MultiGzDecoder::new(reader), limits, &mut entry),
        None => Err(ArchiveError::NotAnArchive),
    }
}

fn read_zip<R, F>(reader: R, limits: ArchiveLimits, entry: &mut F) -> Result<usize, ArchiveError>
where
    R: Read + Seek + Send,
    F: FnMut(&str, &mut (dyn Read + Send)) -> Result<(), String>,
{
    let mut zip = zip::ZipArchive::new(reader).map_err(|e| ArchiveError::Malformed(e.to_string()))?;
    if zip.len() > limits.max_entries {
        return Err(ArchiveError::TooManyEntries(limits.max_entries));
    }
    let mut declared = 0u64;
    for i in 0..zip.len() {
        let file = zip
            .by_index(i)
            .map_err(|e| ArchiveError::Malformed(e.to_string()))?;
        declared = declared.saturating_add(file.size());
    }
    if declared > limits.max_inflated {
        return Err(ArchiveError::TooLarge(limits.max_inflated));
    }
    let mut left = limits.max_inflated;
    let mut count = 0;
    for i in 0..zip.len() {
        let file = zip
            .by_index(i)
            .map_err(|e| ArchiveError::Malformed(e.to_string()))?;
        if !file.is_file() {
            continue;
        }
        let name = file
            .name()
            .map_err(|e| ArchiveError::Malformed(e.to_string()))?
            .into_owned();
        let mut budget = Budget {
            inner: file,
            left: &mut left,
            limit: limits.max_inflated,
        };
        entry(&name, &mut budget).map_err(ArchiveError::Entry)?;
        count += 1;
    }
    Ok(count)
}

/// A ustar / GNU tar stream: 512-byte headers, data padded to 512 bytes.
fn read_tar<R, F>(mut reader: R, limits: ArchiveLimits, entry: &mut F) -> Result<usize, ArchiveError>
where
    R: Read + Send,
    F: FnMut(&str, &mut (dyn Read + Send)) -> Result<(), String>,
{
    let mut left = limits.max_inflated;
    let mut count = 0;
    let mut headers = 0;
    let mut long_name: Option<String> = None;
    loop {
        let mut header = [0u8; 512];
        if !read_block(&mut reader, &mut header)? || header.iter().all(|b| *b == 0) {
            return Ok(count);
        }
        headers += 1;
        if headers > limits.max_entries * 2 + 2 {
            return Err(ArchiveError::TooManyEntries(limits.max_entries));
        }
        let size = octal(&header[124..136])
            .ok_or_else(|| ArchiveError::Malformed("a tar header with a bad size".into()))?;
        if size > left {
            return Err(ArchiveError::TooLarge(limits.max_inflated));
        }
        let padded = size.div_ceil(512) * 512;
        let kind = header[156];
        let mut name = text(&header[0..100]);
        if &header[257..262] == b"ustar" {
            let prefix = text(&header[345..500]);
            if !prefix.is_empty() {
                name = format!("{prefix}/{name}");
            }
        }
        if let Some(long) = long_name.take() {
            name = long;
        }
        let mut data = (&mut reader).take(size);
        match kind {
            b'L' if size <= 64 << 10 => {
                let mut bytes = Vec::new();
                data.read_to_end(&mut bytes)?;
                long_name = Some(text(&bytes));
            }
            b'0' | 0 => {
                count += 1;
                if count > limits.max_entries {
                    return Err(ArchiveError::TooManyEntries(limits.max_entries));
                }
                let mut budget = Budget {
                    inner: data,
                    left: &mut left,
                    limit: limits.max_inflated,
                };
                entry(&name, &mut budget).map_err(ArchiveError::Entry)?;
                io::copy(&mut budget, &mut io::sink())?;
            }
            _ => {
                io::copy(&mut data, &mut io::sink())?;
            }
        }
        io::copy(&mut (&mut reader).take(padded - size), &mut io::sink())?;
    }
}

/// Fills a block; false at a clean end of the stream.
fn read_block(reader: &mut impl Read, block: &mut [u8; 512]) -> Result<bool, ArchiveError> {
    let mut filled = 0;
    while filled < block.len() {
        let n = reader.read(&mut block[filled..])?;
        if n == 0 {
            return if filled == 0 {
                Ok(false)
            } else {
                Err(ArchiveError::Malformed(
                    "the tar stream ends inside a header".into(),
                ))
            };
        }
        filled += n;
    }
    Ok(true)
}

fn octal(field: &[u8]) -> Option<u64> {
    let s = text(field);
    let s = s.trim();
    if s.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(s, 8).ok()
}

fn text(field: &[u8]) -> String {
    let end = field.iter().position(|b| *b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Cursor, Write};

    fn tar_entry(name: &str, data: &[u8]) -> Vec<u8> {
        let mut header = [0u8; 512];
        header[..name.len()].copy_from_slice(name.as_bytes());
        let size = format!("{:011o}\0", data.len());
        header[124..136].copy_from_slice(size.as_bytes());
        header[156] = b'0';
        header[257..263].copy_from_slice(b"ustar\0");
        let mut out = header.to_vec();
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
        out
    }

    fn gz(bytes: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(bytes).unwrap_or_else(|e| panic!("{e}"));
        enc.finish().unwrap_or_else(|e| panic!("{e}"))
    }

    fn names(archive: Vec<u8>, limits: ArchiveLimits) -> Result<Vec<(String, usize)>, ArchiveError> {
        let mut seen = Vec::new();
        read_archive(Cursor::new(archive), limits, |name, r| {
            let mut bytes = Vec::new();
            r.read_to_end(&mut bytes).map_err(|e| e.to_string())?;
            seen.push((name.to_owned(), bytes.len()));
            Ok(())
        })?;
        Ok(seen)
    }

    #[test]
    fn a_tar_gz_hands_on_each_file() {
        let mut tar = tar_entry("logs/rank0.log", b"hello\n");
        tar.extend(tar_entry("logs/rank1.log", &[b'x'; 700]));
        tar.extend([0u8; 1024]);
        let seen = names(gz(&tar), ArchiveLimits::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            seen,
            vec![
                ("logs/rank0.log".to_owned(), 6),
                ("logs/rank1.log".to_owned(), 700)
            ]
        );
    }

    #[test]
    fn a_zip_bomb_is_refused_before_it_is_inflated() {
        let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let options =
            zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        for i in 0..4 {
            zip.start_file(format!("rank{i}.log"), options)
                .unwrap_or_else(|e| panic!("{e}"));
            zip.write_all(&vec![0u8; 4 << 20])
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let bytes = zip.finish().unwrap_or_else(|e| panic!("{e}")).into_inner();
        assert!(
            bytes.len() < 200 << 10,
            "the bomb is small: {} bytes",
            bytes.len()
        );
        let limits = ArchiveLimits {
            max_entries: 100,
            max_inflated: 8 << 20,
        };
        assert!(matches!(names(bytes, limits), Err(ArchiveError::TooLarge(_))));
    }

    #[test]
    fn a_tar_gz_that_inflates_past_the_limit_is_stopped() {
        let tar = tar_entry("big.log", &vec![b'a'; 3 << 20]);
        let limits = ArchiveLimits {
            max_entries: 10,
            max_inflated: 1 << 20,
        };
        assert!(matches!(names(gz(&tar), limits), Err(ArchiveError::TooLarge(_))));
    }

    #[test]
    fn too_many_entries_and_garbage_are_refused() {
        let mut tar = Vec::new();
        for i in 0..5 {
            tar.extend(tar_entry(&format!("f{i}"), b"x"));
        }
        let limits = ArchiveLimits {
            max_entries: 3,
            max_inflated: 1 << 20,
        };
        assert!(matches!(
            names(gz(&tar), limits),
            Err(ArchiveError::TooManyEntries(3))
        ));
        assert!(matches!(
            names(b"plain text".to_vec(), limits),
            Err(ArchiveError::NotAnArchive)
        ));
        assert!(names(gz(b"not a tar header"), limits).is_err());
    }
}
