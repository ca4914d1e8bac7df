//! A small, bounded pickle reader for the plain values a PyTorch flight-recorder dump holds
//! (dicts, lists, tuples, strings, integers, floats, booleans, None).
//!
//! It runs no code: an opcode that would import or call anything (`GLOBAL`, `REDUCE`, …) is an
//! error, as is any input that is cut, nests too deep, builds too many values or too much text
//! (memo copies of one long string count each time). No crate reads pickles without the rest of
//! Python's object model, and the subset needed here is small.

/// A value read from a pickle.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `None`.
    None,
    /// `True` / `False`.
    Bool(bool),
    /// An integer that fits 64 bits.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string.
    Str(String),
    /// Bytes.
    Bytes(Vec<u8>),
    /// A list.
    List(Vec<Value>),
    /// A tuple.
    Tuple(Vec<Value>),
    /// A dict, in insertion order.
    Dict(Vec<(Value, Value)>),
}

impl Value {
    /// The value of `key` in a dict with string keys.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Self::Dict(items) => items
                .iter()
                .find(|(k, _)| matches!(k, Self::Str(s) if s == key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// The string, if it is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The integer, if it is one (a string of digits counts: JSON dumps write some as strings).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Self::Int(i) => Some(*i),
            Self::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    /// The items of a list or a tuple.
    pub fn items(&self) -> &[Value] {
        match self {
            Self::List(v) | Self::Tuple(v) => v,
            _ => &[],
        }
    }

    /// The entries of a dict.
    pub fn entries(&self) -> &[(Value, Value)] {
        match self {
            Self::Dict(v) => v,
            _ => &[],
        }
    }

    /// The same value read from JSON (objects become dicts with string keys).
    pub fn from_json(json: &serde_json::Value) -> Self {
        use serde_json::Value as J;
        match json {
            J::Null => Self::None,
            J::Bool(b) => Self::Bool(*b),
            J::Number(n) => n
                .as_i64()
                .map(Self::Int)
                .or_else(|| n.as_f64().map(Self::Float))
                .unwrap_or(Self::None),
            J::String(s) => Self::Str(s.clone()),
            J::Array(items) => Self::List(items.iter().map(Self::from_json).collect()),
            J::Object(map) => Self::Dict(
                map.iter()
                    .map(|(k, v)| (Self::Str(k.clone()), Self::from_json(v)))
                    .collect(),
            ),
        }
    }

    /// The value as JSON, the form torch's own JSON dump takes: a dict becomes an object (a key
    /// that is not a string is written as its JSON text: `3`, `[0, 1]`), a list or a tuple an
    /// array, bytes an array of their values; a float that JSON cannot hold (NaN, infinite) becomes
    /// `null`, as torch's JSON writer makes it.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            Self::None => J::Null,
            Self::Bool(b) => J::Bool(*b),
            Self::Int(i) => J::from(*i),
            Self::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
            Self::Str(s) => J::String(s.clone()),
            Self::Bytes(b) => J::Array(b.iter().map(|x| J::from(*x)).collect()),
            Self::List(items) | Self::Tuple(items) => J::Array(items.iter().map(Self::to_json).collect()),
            Self::Dict(items) => J::Object(
                items
                    .iter()
                    .map(|(k, v)| {
                        let key = match k {
                            Self::Str(s) => s.clone(),
                            other => other.to_json().to_string(),
                        };
                        (key, v.to_json())
                    })
                    .collect(),
            ),
        }
    }
}

/// Why a pickle could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PickleError {
    /// The input ended inside an opcode or before `STOP`.
    #[error("the pickle is cut short at byte {0}")]
    Truncated(usize),
    /// An opcode outside the plain-value subset.
    #[error(
        "opcode 0x{opcode:02x} at byte {at} is not a plain value (a flight-recorder dump holds only dicts, lists, strings and numbers)"
    )]
    Unsupported {
        /// The opcode.
        opcode: u8,
        /// Where.
        at: usize,
    },
    /// A structural problem (an empty stack, a missing mark, an unknown memo slot).
    #[error("malformed pickle at byte {at}: {what}")]
    Malformed {
        /// Where.
        at: usize,
        /// What.
        what: &'static str,
    },
    /// More values or deeper nesting than any dump needs.
    #[error("the pickle builds more than {0} values; refused")]
    TooLarge(usize),
    /// More bytes of strings than any dump needs.
    #[error("the pickle builds more than {0} bytes of strings; refused")]
    TooMuchText(usize),
}

/// Most values a pickle may build (memo copies included).
pub const MAX_VALUES: usize = 4_000_000;

/// Most bytes of strings and bytes a pickle may build (memo copies included): a dump's text is a
/// few MB, and a long string copied from the memo many times would otherwise take gigabytes.
pub const MAX_TEXT_BYTES: usize = 256 << 20;

enum Slot {
    Mark,
    Val(Value),
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    built: usize,
    text: usize,
    max_text: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], PickleError> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.data.len());
        let end = end.ok_or(PickleError::Truncated(self.data.len()))?;
        let bytes = &self.data[self.pos..end];
        self.pos = end;
        Ok(bytes)
    }

    fn byte(&mut self) -> Result<u8, PickleError> {
        Ok(self.take(1)?[0])
    }

    fn u32_le(&mut self) -> Result<usize, PickleError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }

    fn u64_le(&mut self) -> Result<usize, PickleError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        usize::try_from(u64::from_le_bytes(a)).map_err(|_| PickleError::Truncated(self.data.len()))
    }

    fn count(&mut self, size: Size) -> Result<(), PickleError> {
        self.built = self.built.saturating_add(size.values);
        if self.built > MAX_VALUES {
            return Err(PickleError::TooLarge(MAX_VALUES));
        }
        self.text = self.text.saturating_add(size.text);
        if self.text > self.max_text {
            return Err(PickleError::TooMuchText(self.max_text));
        }
        Ok(())
    }
}

/// What a value costs: the values it holds (itself included) and its bytes of strings.
#[derive(Debug, Clone, Copy, Default)]
struct Size {
    values: usize,
    text: usize,
}

impl Size {
    const ONE: Size = Size { values: 1, text: 0 };

    fn add(self, other: Size) -> Size {
        Size {
            values: self.values.saturating_add(other.values),
            text: self.text.saturating_add(other.text),
        }
    }
}

fn size(v: &Value) -> Size {
    match v {
        Value::Str(s) => Size {
            values: 1,
            text: s.len(),
        },
        Value::Bytes(b) => Size {
            values: 1,
            text: b.len(),
        },
        Value::List(items) | Value::Tuple(items) => items.iter().map(size).fold(Size::ONE, Size::add),
        Value::Dict(items) => items
            .iter()
            .map(|(k, v)| size(k).add(size(v)))
            .fold(Size::ONE, Size::add),
        _ => Size::ONE,
    }
}

/// Reads one pickled value.
pub fn read(data: &[u8]) -> Result<Value, PickleError> {
    read_within(data, MAX_TEXT_BYTES)
}

/// Reads one pickled value that builds at most `max_text` bytes of strings.
fn read_within(data: &[u8], max_text: usize) -> Result<Value, PickleError> {
    let mut r = Reader {
        data,
        pos: 0,
        built: 0,
        text: 0,
        max_text,
    };
    let mut stack: Vec<Slot> = Vec::new();
    let mut memo: Vec<Option<(Value, Size)>> = Vec::new();
    loop {
        let at = r.pos;
        let op = r.byte()?;
        let malformed = |what| PickleError::Malformed { at, what };
        match op {
            0x80 => {
                r.byte()?;
            }
            0x95 => {
                r.take(8)?;
            }
            b'.' => {
                return match stack.pop() {
                    Some(Slot::Val(v)) => Ok(v),
                    _ => Err(malformed("STOP with no value")),
                };
            }
            b'(' => stack.push(Slot::Mark),
            b'}' | b']' | b')' | b'N' | 0x88 | 0x89 => {
                r.count(Size::ONE)?;
                stack.push(Slot::Val(match op {
                    b'}' => Value::Dict(Vec::new()),
                    b']' => Value::List(Vec::new()),
                    b')' => Value::Tuple(Vec::new()),
                    b'N' => Value::None,
                    0x88 => Value::Bool(true),
                    _ => Value::Bool(false),
                }));
            }
            b'J' | b'K' | b'M' | 0x8a | b'G' => {
                r.count(Size::ONE)?;
                let v = match op {
                    b'J' => {
                        let b = r.take(4)?;
                        Value::Int(i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])))
                    }
                    b'K' => Value::Int(i64::from(r.byte()?)),
                    b'M' => {
                        let b = r.take(2)?;
                        Value::Int(i64::from(u16::from_le_bytes([b[0], b[1]])))
                    }
                    0x8a => {
                        let n = usize::from(r.byte()?);
                        let b = r.take(n)?;
                        if n > 8 {
                            return Err(malformed("an integer wider than 64 bits"));
                        }
                        let fill = if b.last().is_some_and(|x| x & 0x80 != 0) {
                            0xff
                        } else {
                            0
                        };
                        let mut a = [fill; 8];
                        a[..n].copy_from_slice(b);
                        Value::Int(i64::from_le_bytes(a))
                    }
                    _ => {
                        let b = r.take(8)?;
                        let mut a = [0u8; 8];
                        a.copy_from_slice(b);
                        Value::Float(f64::from_be_bytes(a))
                    }
                };
                stack.push(Slot::Val(v));
            }
            b'X' | 0x8c | 0x8d | b'B' | b'C' | 0x8e => {
                let n = match op {
                    b'X' | b'B' => r.u32_le()?,
                    0x8c | b'C' => usize::from(r.byte()?),
                    _ => r.u64_le()?,
                };
                let bytes = r.take(n)?;
                r.count(Size { values: 1, text: n })?;
                let v = if matches!(op, b'B' | b'C' | 0x8e) {
                    Value::Bytes(bytes.to_vec())
                } else {
                    Value::Str(String::from_utf8_lossy(bytes).into_owned())
                };
                stack.push(Slot::Val(v));
            }
            b'q' | b'r' | 0x94 => {
                let index = match op {
                    b'q' => usize::from(r.byte()?),
                    b'r' => r.u32_le()?,
                    _ => memo.len(),
                };
                let Some(Slot::Val(top)) = stack.last() else {
                    return Err(malformed("PUT with no value"));
                };
                if index > MAX_VALUES {
                    return Err(PickleError::TooLarge(MAX_VALUES));
                }
                if memo.len() <= index {
                    memo.resize(index + 1, None);
                }
                let n = size(top);
                memo[index] = Some((top.clone(), n));
            }
            b'h' | b'j' => {
                let index = if op == b'h' {
                    usize::from(r.byte()?)
                } else {
                    r.u32_le()?
                };
                let Some(Some((v, n))) = memo.get(index) else {
                    return Err(malformed("GET of an empty memo slot"));
                };
                r.count(*n)?;
                stack.push(Slot::Val(v.clone()));
            }
            b'a' | b's' => {
                let value = pop_value(&mut stack).ok_or_else(|| malformed("APPEND/SETITEM with no value"))?;
                let key = if op == b's' {
                    Some(pop_value(&mut stack).ok_or_else(|| malformed("SETITEM with no key"))?)
                } else {
                    None
                };
                match (stack.last_mut(), key) {
                    (Some(Slot::Val(Value::List(items))), None) => items.push(value),
                    (Some(Slot::Val(Value::Dict(items))), Some(key)) => items.push((key, value)),
                    _ => return Err(malformed("APPEND/SETITEM outside a list or dict")),
                }
            }
            b'e' | b'u' | b'l' | b'd' | b't' => {
                let mark = stack
                    .iter()
                    .rposition(|s| matches!(s, Slot::Mark))
                    .ok_or_else(|| malformed("no MARK"))?;
                let items: Vec<Value> = stack
                    .drain(mark..)
                    .skip(1)
                    .filter_map(|s| match s {
                        Slot::Val(v) => Some(v),
                        Slot::Mark => None,
                    })
                    .collect();
                match op {
                    b'l' | b't' | b'd' => {
                        r.count(Size::ONE)?;
                        let v = match op {
                            b'l' => Value::List(items),
                            b't' => Value::Tuple(items),
                            _ => Value::Dict(
                                pairs(items).ok_or_else(|| malformed("odd number of items in DICT"))?,
                            ),
                        };
                        stack.push(Slot::Val(v));
                    }
                    b'e' => match stack.last_mut() {
                        Some(Slot::Val(Value::List(list))) => list.extend(items),
                        _ => return Err(malformed("APPENDS outside a list")),
                    },
                    _ => {
                        let new = pairs(items).ok_or_else(|| malformed("odd number of items in SETITEMS"))?;
                        match stack.last_mut() {
                            Some(Slot::Val(Value::Dict(dict))) => dict.extend(new),
                            _ => return Err(malformed("SETITEMS outside a dict")),
                        }
                    }
                }
            }
            0x85..=0x87 => {
                let n = usize::from(op - 0x84);
                if stack.len() < n || stack[stack.len() - n..].iter().any(|s| matches!(s, Slot::Mark)) {
                    return Err(malformed("TUPLEn with too few values"));
                }
                let items = stack
                    .drain(stack.len() - n..)
                    .filter_map(|s| match s {
                        Slot::Val(v) => Some(v),
                        Slot::Mark => None,
                    })
                    .collect();
                r.count(Size::ONE)?;
                stack.push(Slot::Val(Value::Tuple(items)));
            }
            _ => return Err(PickleError::Unsupported { opcode: op, at }),
        }
    }
}

fn pop_value(stack: &mut Vec<Slot>) -> Option<Value> {
    match stack.pop()? {
        Slot::Val(v) => Some(v),
        Slot::Mark => None,
    }
}

fn pairs(items: Vec<Value>) -> Option<Vec<(Value, Value)>> {
    if !items.len().is_multiple_of(2) {
        return None;
    }
    let mut out = Vec::with_capacity(items.len() / 2);
    let mut it = items.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.push((k, v));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `pickle.dumps({'version': '2.10', 'pg_status': {'0': {'last_enqueued_collective': 4}},
    /// 'entries': [{'process_group': ('0', 'default_pg'), 'input_sizes': [[4]], 'x': None,
    /// 'ok': True, 'd': 1.5, 'big': 1795757902040255184, 'neg': -1}]}, protocol=2)`, made by
    /// CPython 3.11.
    const SAMPLE: &[u8] = b"\x80\x02}q\x00(X\x07\x00\x00\x00versionq\x01X\x04\x00\x00\x002.10q\x02X\x09\x00\x00\x00pg_statusq\x03}q\x04X\x01\x00\x00\x000q\x05}q\x06X\x18\x00\x00\x00last_enqueued_collectiveq\x07K\x04ssX\x07\x00\x00\x00entriesq\x08]q\x09}q\x0a(X\x0d\x00\x00\x00process_groupq\x0bh\x05X\x0a\x00\x00\x00default_pgq\x0c\x86q\x0dX\x0b\x00\x00\x00input_sizesq\x0e]q\x0f]q\x10K\x04aaX\x01\x00\x00\x00xq\x11NX\x02\x00\x00\x00okq\x12\x88X\x01\x00\x00\x00dq\x13G?\xf8\x00\x00\x00\x00\x00\x00X\x03\x00\x00\x00bigq\x14\x8a\x08\xd0\xca\xb5-L\xd0\xeb\x18X\x03\x00\x00\x00negq\x15J\xff\xff\xff\xffuau.";

    #[test]
    fn a_protocol_2_dump_of_plain_values_is_read() {
        let v = read(SAMPLE).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(v.get("version").and_then(Value::as_str), Some("2.10"));
        let status = v.get("pg_status").and_then(|s| s.get("0"));
        assert_eq!(
            status
                .and_then(|s| s.get("last_enqueued_collective"))
                .and_then(Value::as_i64),
            Some(4)
        );
        let entry = &v.get("entries").map(Value::items).unwrap_or_default()[0];
        let pg = entry.get("process_group").map(Value::items).unwrap_or_default();
        assert_eq!(pg, [Value::Str("0".into()), Value::Str("default_pg".into())]);
        assert_eq!(
            entry.get("input_sizes"),
            Some(&Value::List(vec![Value::List(vec![Value::Int(4)])]))
        );
        assert_eq!(entry.get("x"), Some(&Value::None));
        assert_eq!(entry.get("ok"), Some(&Value::Bool(true)));
        assert_eq!(entry.get("d"), Some(&Value::Float(1.5)));
        assert_eq!(
            entry.get("big").and_then(Value::as_i64),
            Some(1_795_757_902_040_255_184)
        );
        assert_eq!(entry.get("neg").and_then(Value::as_i64), Some(-1));
    }

    #[test]
    fn every_cut_of_a_dump_is_an_error_not_a_panic() {
        for end in 0..SAMPLE.len() {
            assert!(read(&SAMPLE[..end]).is_err(), "cut at {end} was accepted");
        }
    }

    #[test]
    fn code_is_refused() {
        let os_system = b"\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00lsq\x01\x85q\x02Rq\x03.";
        assert_eq!(
            read(os_system),
            Err(PickleError::Unsupported { opcode: b'c', at: 2 })
        );
    }

    #[test]
    fn memo_copies_that_would_explode_are_refused() {
        // A list put in the memo, then a list of 255 copies of it, put and copied again, …
        let mut p = b"\x80\x02]q\x00(".to_vec();
        p.extend(std::iter::repeat_n(b"K\x01".as_slice(), 200).flatten());
        p.extend(b"eq\x00");
        for _ in 0..6 {
            p.extend(b"](");
            p.extend(std::iter::repeat_n(b"h\x00".as_slice(), 250).flatten());
            p.extend(b"eq\x00");
        }
        p.push(b'.');
        assert_eq!(read(&p), Err(PickleError::TooLarge(MAX_VALUES)));
    }

    #[test]
    fn memo_copies_of_a_long_string_count_its_bytes_each_time() {
        // A 64 KiB string put in the memo, then a list of 20 copies of it: 1.3 MB of text.
        let mut p = b"\x80\x02X".to_vec();
        p.extend((64u32 << 10).to_le_bytes());
        p.extend(std::iter::repeat_n(b'a', 64 << 10));
        p.extend(b"q\x00](");
        p.extend(std::iter::repeat_n(b"h\x00".as_slice(), 20).flatten());
        p.extend(b"e.");
        assert_eq!(read_within(&p, 1 << 20), Err(PickleError::TooMuchText(1 << 20)));
        assert!(read_within(&p, 2 << 20).is_ok_and(|v| v.items().len() == 20));
    }

    #[test]
    fn a_value_becomes_the_json_torch_writes_dicts_as_objects_and_tuples_as_arrays() {
        let v = read(SAMPLE).unwrap_or_else(|e| panic!("{e}"));
        let json = v.to_json();
        assert_eq!(json["version"], "2.10");
        assert_eq!(json["pg_status"]["0"]["last_enqueued_collective"], 4);
        let entry = &json["entries"][0];
        assert_eq!(entry["process_group"], serde_json::json!(["0", "default_pg"]));
        assert_eq!(entry["input_sizes"], serde_json::json!([[4]]));
        assert_eq!(
            (&entry["x"], &entry["ok"], &entry["d"], &entry["neg"]),
            (
                &serde_json::Value::Null,
                &serde_json::json!(true),
                &serde_json::json!(1.5),
                &serde_json::json!(-1)
            )
        );
        assert_eq!(entry["big"], 1_795_757_902_040_255_184_i64);
        assert_eq!(
            Value::from_json(&json).to_json(),
            json,
            "read back, it is the same JSON"
        );
        let keys = Value::Dict(vec![
            (Value::Int(3), Value::Float(f64::NAN)),
            (
                Value::Tuple(vec![Value::Int(0), Value::Int(1)]),
                Value::Bytes(vec![0, 255]),
            ),
        ]);
        assert_eq!(keys.to_json(), serde_json::json!({"3": null, "[0,1]": [0, 255]}));
    }
}
