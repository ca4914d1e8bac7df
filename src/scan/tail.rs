//! A reader that remembers the last bytes it passed on: what a streamed log keeps of itself for
//! a second look at its end (the class detectors' pass over a log no specific rule explains).

use std::collections::VecDeque;
use std::io::{self, Read};

/// Passes `inner`'s bytes on and keeps the last `keep` of them.
#[derive(Debug)]
pub struct Tail<R> {
    inner: R,
    kept: VecDeque<u8>,
    keep: usize,
    total: u64,
}

impl<R> Tail<R> {
    /// A reader over `inner` that keeps its last `keep` bytes (their memory is taken at once:
    /// growing by doubling would end with up to twice as much).
    pub fn new(inner: R, keep: usize) -> Self {
        Self {
            inner,
            kept: VecDeque::with_capacity(keep),
            keep,
            total: 0,
        }
    }

    /// The last bytes read (at most `keep`), and how many bytes were read in all.
    pub fn into_kept(self) -> (Vec<u8>, u64) {
        (Vec::from(self.kept), self.total)
    }

    fn remember(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let bytes = &bytes[bytes.len().saturating_sub(self.keep)..];
        let excess = (self.kept.len() + bytes.len()).saturating_sub(self.keep);
        self.kept.drain(..excess);
        self.kept.extend(bytes);
    }
}

impl<R: Read> Read for Tail<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let read = self.inner.read(buf)?;
        self.remember(&buf[..read]);
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_keeps_the_last_bytes_read_and_counts_them_all() {
        let input: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        let mut tail = Tail::new(&input[..], 300);
        let mut passed = Vec::new();
        let mut chunk = [0u8; 77];
        loop {
            let n = tail.read(&mut chunk).unwrap_or_else(|e| panic!("{e}"));
            if n == 0 {
                break;
            }
            passed.extend_from_slice(&chunk[..n]);
        }
        assert_eq!(passed, input);
        let (kept, total) = tail.into_kept();
        assert_eq!(total, 10_000);
        assert_eq!(kept, &input[10_000 - 300..]);
    }

    #[test]
    fn a_short_input_is_kept_whole() {
        let mut tail = Tail::new(&b"one\ntwo\n"[..], 300);
        std::io::copy(&mut tail, &mut std::io::sink()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(tail.into_kept(), (b"one\ntwo\n".to_vec(), 8));
    }
}
