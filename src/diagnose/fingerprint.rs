//! Fingerprints group incidents of the same failure: the class, the primary evidence line with
//! everything that varies between runs masked (numbers, hex, paths, sizes), and the innermost
//! in-app frames of the traceback around it (file name and function, no line numbers).

use crate::model::{Event, EventKind, Finding, Frame};
use crate::parse::regex;

/// In-app frames that go into a fingerprint.
const FRAMES: usize = 3;

/// `2.00 GiB at /home/a/x.py:12 (0x7f3a)` → `<size> at <path> (<hex>)`.
pub fn mask_message(text: &str) -> String {
    let text = regex!(r"0x[0-9a-fA-F]+").replace_all(text, "<hex>");
    let text = regex!(r#"(?:[A-Za-z]:)?(?:[\\/][^\s\\/:'"`,()\[\]]+){2,}[\\/]?(?::\d+)?"#)
        .replace_all(&text, "<path>");
    let text = regex!(r"\d+(?:\.\d+)? ?(?:[KMGTP]i?B|bytes)\b").replace_all(&text, "<size>");
    let text = regex!(r"\d+").replace_all(&text, "<n>");
    let text = regex!(r"\s+").replace_all(&text, " ");
    text.trim().to_owned()
}

/// The fingerprint of a diagnosis whose primary finding is `primary`.
pub fn fingerprint(primary: &Finding, events: &[Event]) -> String {
    let line = primary.evidence.first().map(|e| e.line);
    let message = primary
        .evidence
        .first()
        .map_or(String::new(), |e| mask_message(&e.text));
    let frames: Vec<String> = line
        .and_then(|l| traceback_near(events, l))
        .map(|frames| {
            frames
                .iter()
                .rev()
                .filter(|f| f.in_app)
                .take(FRAMES)
                .map(|f| format!("{}:{}", base_name(&f.file), f.function))
                .collect()
        })
        .unwrap_or_default();
    let key = format!("v1\n{}\n{}\n{}", primary.class, message, frames.join("\n"));
    format!("{:016x}", fnv1a(key.as_bytes()))
}

/// Frames of the traceback holding `line`, else of the last one before it, else of the first after.
fn traceback_near(events: &[Event], line: u64) -> Option<Vec<&Frame>> {
    let tracebacks = events.iter().filter_map(|e| match &e.kind {
        EventKind::Traceback(t) => Some((e.lines, t)),
        _ => None,
    });
    let mut before = None;
    let mut after = None;
    for (span, t) in tracebacks {
        if span.contains(line) {
            before = Some(t);
            break;
        }
        if span.end < line {
            before = Some(t);
        } else if after.is_none() {
            after = Some(t);
        }
    }
    before
        .or(after)
        .map(|t| t.chain.iter().flat_map(|c| c.frames.iter()).collect())
}

fn base_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// 64-bit FNV-1a: stable across platforms and releases, which a fingerprint must be.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masking_removes_what_varies_between_runs() {
        assert_eq!(
            mask_message("CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity)"),
            "CUDA out of memory. Tried to allocate <size> (GPU <n>; <size> total capacity)"
        );
        assert_eq!(
            mask_message(
                "/opt/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1236: indexSelectSmallIndex: block: [3,0,0]"
            ),
            "<path>: indexSelectSmallIndex: block: [<n>,<n>,<n>]"
        );
        assert_eq!(
            mask_message("frame #0: f + 0x57 (0x7f0a in C:\\x\\y.dll)"),
            "frame #<n>: f + <hex> (<hex> in <path>)"
        );
    }

    #[test]
    fn fnv1a_is_the_reference_function() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
