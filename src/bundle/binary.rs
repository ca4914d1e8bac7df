//! Binary files of a bundle. The one binary format the bundle reads is PyTorch's flight-recorder
//! pickle: it is decoded into its value (what the analysis reads, and what a service keeps of it
//! as JSON, the form torch's own JSON dump takes). Any other binary file (a core dump, an image, a
//! profiler report) is left out, with a warning that says so: it is neither analysed as text nor
//! kept.

use super::MAX_STRUCTURED_BYTES;
use super::detect::{HEAD_BYTES, detect};
use super::pickle::{self, Value};
use super::sources::{Dump, dump_of};
use crate::model::{FileKind, Warning};

/// Bytes at the start of a file looked at for a NUL.
const SNIFF_BYTES: usize = 8192;

/// The code of the warning a left-out file gets.
pub const LEFT_OUT: &str = "binary_left_out";

/// Whether a file is binary, from its first bytes: it starts as a pickle does (`0x80`, which no
/// UTF-8 text starts with) or holds a NUL byte in its first 8 KiB.
pub fn is_binary(head: &[u8]) -> bool {
    head.first() == Some(&0x80) || head[..head.len().min(SNIFF_BYTES)].contains(&0)
}

/// Why a binary file is left out of a bundle.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeftOut {
    /// Not a format the bundle reads.
    #[error("binary, not a format faultline reads")]
    NotAFormat,
    /// A flight-recorder pickle that cannot be read.
    #[error("binary, a flight-recorder pickle faultline cannot read ({0})")]
    UnreadableDump(String),
    /// A flight-recorder pickle, or its JSON, larger than the bundle reads.
    #[error("binary, a flight-recorder pickle larger than {} MiB once read", MAX_STRUCTURED_BYTES >> 20)]
    TooLarge,
}

impl LeftOut {
    /// The warning the bundle diagnosis carries for the file: the same words from the CLI and the
    /// service (`file "core.1234": binary, not a format faultline reads; not analysed and not kept`).
    pub fn warning(&self, name: &str) -> Warning {
        Warning::new(
            LEFT_OUT,
            format!("file {name:?}: {self}; not analysed and not kept"),
            None,
        )
    }
}

/// Files named when every file of a bundle was left out.
const NAMED: usize = 5;

/// Why a bundle whose every file was left out cannot be analysed (`left`: each file's name and
/// why), naming the first few.
pub fn nothing_readable(left: &[(String, LeftOut)]) -> String {
    let mut named: Vec<String> = left
        .iter()
        .take(NAMED)
        .map(|(name, why)| format!("{name:?}: {why}"))
        .collect();
    if left.len() > NAMED {
        named.push(format!("and {} more", left.len() - NAMED));
    }
    format!(
        "no file of the bundle can be read ({}): send the job's logs, error files, kernel logs or flight-recorder dumps; nothing was analysed or kept",
        named.join("; ")
    )
}

/// A flight-recorder pickle, decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedDump {
    /// Its whole content.
    pub value: Value,
    /// What the bundle reads of it.
    pub(super) dump: Dump,
}

impl DecodedDump {
    /// Its content as JSON text, pretty-printed: the keys and nesting of torch's own JSON dump
    /// (`fr_3.json`), the values as the pickle holds them (torch's JSON writer turns the
    /// `pg_status` numbers into strings and times never set into `0`; this keeps `4` and `null`).
    /// [`LeftOut::TooLarge`] past what the bundle reads.
    pub fn json(&self) -> Result<String, LeftOut> {
        json_text(&self.value.to_json())
    }
}

/// A dump's JSON value as the text kept of it, within what the bundle reads.
pub fn json_text(json: &serde_json::Value) -> Result<String, LeftOut> {
    let text = serde_json::to_string_pretty(json).map_err(|e| LeftOut::UnreadableDump(e.to_string()))?;
    if text.len() > MAX_STRUCTURED_BYTES {
        return Err(LeftOut::TooLarge);
    }
    Ok(text)
}

/// Decodes a binary file of the bundle (its name and all its bytes): a flight-recorder pickle, or
/// why it is left out.
pub fn decode(name: &str, bytes: &[u8]) -> Result<DecodedDump, LeftOut> {
    let head = &bytes[..bytes.len().min(HEAD_BYTES)];
    if detect(name, head).kind != FileKind::FlightRecorder {
        return Err(LeftOut::NotAFormat);
    }
    if bytes.len() > MAX_STRUCTURED_BYTES {
        return Err(LeftOut::TooLarge);
    }
    let value = pickle::read(bytes).map_err(|e| LeftOut::UnreadableDump(e.to_string()))?;
    let dump = dump_of(&value).map_err(LeftOut::UnreadableDump)?;
    Ok(DecodedDump { value, dump })
}

/// The name a pickle's JSON is kept under: `fr_3` → `fr_3.json` (the rank still ends its stem).
pub fn json_name(name: &str) -> String {
    if name.ends_with(".json") {
        name.to_owned()
    } else {
        format!("{name}.json")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `pickle.dumps({'version': '2.10', 'pg_config': {}, 'entries': []}, protocol=2)`.
    const DUMP: &[u8] = b"\x80\x02}q\x00(X\x07\x00\x00\x00versionq\x01X\x04\x00\x00\x002.10q\x02X\x09\x00\x00\x00pg_configq\x03}q\x04X\x07\x00\x00\x00entriesq\x05]q\x06u.";

    #[test]
    fn a_file_is_binary_when_it_starts_as_a_pickle_or_holds_a_nul() {
        assert!(is_binary(DUMP));
        assert!(is_binary(b"\x7fELF\x02\x01\x01\x00\x00"));
        assert!(is_binary(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"));
        assert!(!is_binary("[rank0]: step 1 ✓\n".as_bytes()));
        assert!(!is_binary(br#"{"version": "2.10", "pg_config": {}}"#));
        let late_nul = [vec![b'a'; SNIFF_BYTES], vec![0]].concat();
        assert!(!is_binary(&late_nul), "only the first 8 KiB are looked at");
    }

    #[test]
    fn a_flight_recorder_pickle_is_decoded_and_its_json_reads_as_the_same_dump() {
        let decoded = decode("fr_trace/fr_3", DUMP).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(decoded.dump.version, "2.10");
        let json = decoded.json().unwrap_or_else(|e| panic!("{e}"));
        assert!(json.starts_with("{\n"), "pretty-printed: {json}");
        let back: serde_json::Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            back,
            serde_json::json!({"version": "2.10", "pg_config": {}, "entries": []})
        );
        assert_eq!(
            dump_of(&Value::from_json(&back)),
            Ok(decoded.dump),
            "the JSON holds the same dump"
        );
        assert_eq!(json_name("fr_trace/fr_3"), "fr_trace/fr_3.json");
        assert_eq!(json_name("dump.json"), "dump.json");
    }

    #[test]
    fn any_other_binary_file_is_left_out_and_says_why() {
        assert_eq!(
            decode("core.1234", b"\x7fELF\x02\x01\x01\x00"),
            Err(LeftOut::NotAFormat)
        );
        let cut = &DUMP[..DUMP.len() - 4];
        assert!(
            matches!(decode("fr_3", cut), Err(LeftOut::UnreadableDump(why)) if why.contains("cut short"))
        );
        let not_a_dump = b"\x80\x02}q\x00X\x07\x00\x00\x00entriesq\x01]q\x02s.";
        assert!(
            matches!(decode("fr_3", not_a_dump), Err(LeftOut::UnreadableDump(why)) if why.contains("version"))
        );
        assert_eq!(
            LeftOut::NotAFormat.warning("x.bin").message,
            r#"file "x.bin": binary, not a format faultline reads; not analysed and not kept"#
        );
    }

    #[test]
    fn a_bundle_of_only_left_out_files_names_the_first_five_and_counts_the_rest() {
        let left: Vec<(String, LeftOut)> = (0..7)
            .map(|i| (format!("core.{i}"), LeftOut::NotAFormat))
            .collect();
        let why = nothing_readable(&left);
        assert!(why.starts_with("no file of the bundle can be read"), "{why}");
        assert!(
            why.contains(r#""core.4": binary, not a format faultline reads; and 2 more"#),
            "{why}"
        );
        assert!(!why.contains("core.5"), "{why}");
    }
}
