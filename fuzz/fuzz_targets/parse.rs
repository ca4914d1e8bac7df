//! Fuzzes the whole parsing core: any bytes in, no panic out, and every event inside the log.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let parsed = faultline::parse::parse_bytes(data);
    assert_eq!(parsed.bytes, data.len() as u64, "bytes counted");
    let newlines = data.iter().filter(|&&b| b == b'\n').count() as u64;
    let last_unterminated = u64::from(data.last().is_some_and(|&b| b != b'\n'));
    assert_eq!(parsed.lines, newlines + last_unterminated, "lines counted");
    for event in &parsed.events {
        let (start, end) = (event.lines.start, event.lines.end);
        assert!(
            1 <= start && start <= end && end <= parsed.lines,
            "span {start}-{end} of {} lines: {event:?}",
            parsed.lines
        );
        if let Some(last) = event.last_line {
            assert!(
                start <= last && last <= parsed.lines,
                "last_line {last} of {event:?}"
            );
        }
    }
});
