//! How stored blobs are encoded: deflate compression and SHA-256 content addresses.

use std::cell::RefCell;
use std::io::{Read, Write};

use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;
use flate2::{Compress, Compression, FlushCompress, Status};
use sha2::{Digest, Sha256};

thread_local! {
    /// One deflate state per thread, reset between uses: setting a new one up costs ~110 µs,
    /// nine times the compression of a 4 KB log itself.
    static DEFLATE: RefCell<Compress> = RefCell::new(Compress::new(Compression::fast(), false));
}

/// Inputs this large pay for their own deflate state (its set-up is small beside them), so that
/// the blocking threads that analyze large logs do not each keep one.
const REUSE_STATE_BELOW: usize = 256 << 10;

/// Compresses `data` to raw deflate (fast setting: logs compress well even so).
pub fn compress(data: &[u8]) -> Vec<u8> {
    if data.len() >= REUSE_STATE_BELOW {
        return compress_with_new_encoder(data);
    }
    DEFLATE
        .with_borrow_mut(|deflate| compress_with(deflate, data))
        .unwrap_or_else(|| compress_with_new_encoder(data))
}

/// `None` only if the deflate state reports an error (it has no reason to).
fn compress_with(deflate: &mut Compress, data: &[u8]) -> Option<Vec<u8>> {
    deflate.reset();
    let mut out = Vec::with_capacity(data.len() / 4 + 64);
    loop {
        let read = usize::try_from(deflate.total_in()).ok()?;
        match deflate.compress_vec(data.get(read..)?, &mut out, FlushCompress::Finish) {
            Ok(Status::StreamEnd) => return Some(out),
            // The output is full: give it room and go on.
            Ok(Status::Ok | Status::BufError) => out.reserve(out.capacity().max(64)),
            Err(_) => return None,
        }
    }
}

fn compress_with_new_encoder(data: &[u8]) -> Vec<u8> {
    let mut encoder = DeflateEncoder::new(Vec::with_capacity(data.len() / 4 + 16), Compression::fast());
    // Writing into a Vec cannot fail.
    let _ = encoder.write_all(data);
    encoder.finish().unwrap_or_default()
}

/// Decompresses what [`compress`] produced.
pub fn decompress(data: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(data.len() * 4);
    DeflateDecoder::new(data).read_to_end(&mut out)?;
    Ok(out)
}

/// Lower-case hex SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compression_round_trips() {
        let log = "RuntimeError: CUDA error\n".repeat(100);
        let packed = compress(log.as_bytes());
        assert!(packed.len() < log.len() / 10);
        assert_eq!(decompress(&packed).ok(), Some(log.into_bytes()));
    }

    #[test]
    fn a_reused_deflate_state_compresses_as_well_as_a_new_encoder_and_round_trips() {
        let logs = [
            "RuntimeError: CUDA error\n".repeat(100),
            String::new(),
            (0..10_000)
                .map(|i| format!("step {i}: loss={}\n", i % 97))
                .collect(),
            // Compresses to more than the first guess at the output size.
            (0..12_000u64)
                .map(|i| format!("{:016x}", i.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17)))
                .collect(),
        ];
        for log in &logs {
            // Twice, so that the second use runs on a reset state.
            for _ in 0..2 {
                let (reused, fresh) = (
                    compress(log.as_bytes()),
                    compress_with_new_encoder(log.as_bytes()),
                );
                assert!(
                    reused.len() <= fresh.len() + fresh.len() / 20 + 16,
                    "{} vs {}",
                    reused.len(),
                    fresh.len()
                );
                assert!(decompress(&reused).ok().as_deref() == Some(log.as_bytes()));
            }
        }
    }

    #[test]
    fn sha256_is_the_standard_one() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
