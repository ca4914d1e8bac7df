//! Text of a diagnosis that is most often the rule base's own words (titles, causes, fixes):
//! shared with the rule base instead of copied into every diagnosis, and escaped to JSON once,
//! when the rule base is compiled, instead of in every document.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

/// A string of the diagnosis: the rule base's words, shared, or words made for one log (a
/// template filled with its values, a document read back). It reads, compares and serializes
/// as the string it holds.
#[derive(Clone)]
pub struct Text(Repr);

#[derive(Clone)]
enum Repr {
    /// Made for one diagnosis.
    Own(String),
    /// The rule base's words, with their JSON string literal.
    Shared(Arc<Shared>),
}

struct Shared {
    text: Box<str>,
    /// `text` as a JSON string literal (quotes included), written as it stands by serde_json.
    json: Box<RawValue>,
}

impl Text {
    /// Words shared by every diagnosis that shows them, escaped to JSON now.
    pub fn shared(text: &str) -> Self {
        let json = serde_json::to_string(text).and_then(RawValue::from_string);
        match json {
            Ok(json) => Self(Repr::Shared(Arc::new(Shared {
                text: text.into(),
                json,
            }))),
            // Not met (a string always serializes to a valid literal); the text stays right,
            // only escaped per document.
            Err(_) => Self(Repr::Own(text.to_owned())),
        }
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Own(s) => s,
            Repr::Shared(s) => &s.text,
        }
    }
}

impl Deref for Text {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl From<String> for Text {
    fn from(text: String) -> Self {
        Self(Repr::Own(text))
    }
}

impl From<&str> for Text {
    fn from(text: &str) -> Self {
        Self(Repr::Own(text.to_owned()))
    }
}

impl From<Text> for String {
    fn from(text: Text) -> Self {
        match text.0 {
            Repr::Own(s) => s,
            Repr::Shared(s) => s.text.to_string(),
        }
    }
}

impl Default for Text {
    fn default() -> Self {
        Self(Repr::Own(String::new()))
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Text {}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Text {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Serialized as a string. Shared words are written from their JSON literal by serde_json (its
/// raw value, the same bytes it would escape); any other serializer gets the string itself.
impl Serialize for Text {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Repr::Shared(s) if serializer_is_json::<S>() => s.json.serialize(serializer),
            _ => serializer.serialize_str(self.as_str()),
        }
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self::from)
    }
}

/// Whether `S` is serde_json's writer, the serializer that writes a raw value as it stands (any
/// other writes it as a one-field struct). The type's name is all a generic `Serialize` can see
/// of it; were that name ever written differently, shared words would only be escaped again.
fn serializer_is_json<S: Serializer>() -> bool {
    std::any::type_name::<S>().starts_with("&mut serde_json::ser::Serializer<")
}

#[cfg(test)]
mod tests {
    use super::*;

    const AWKWARD: &str = "a \"quoted\" path C:\\x, a tab\t, a line\nand a bell \u{7} — non-ASCII";

    #[derive(Serialize)]
    struct Doc {
        words: Vec<Text>,
    }

    fn doc() -> Doc {
        Doc {
            words: vec![Text::shared(AWKWARD), Text::from(AWKWARD), Text::shared("")],
        }
    }

    #[test]
    fn serde_json_writers_are_told_apart() {
        assert!(serializer_is_json::<&mut serde_json::Serializer<Vec<u8>>>());
        assert!(serializer_is_json::<
            &mut serde_json::Serializer<&mut Vec<u8>, serde_json::ser::PrettyFormatter<'_>>,
        >());
        assert!(!serializer_is_json::<serde_json::value::Serializer>());
    }

    #[test]
    fn shared_words_serialize_to_the_json_of_the_string() {
        let strings = serde_json::json!({ "words": [AWKWARD, AWKWARD, ""] });
        let expect = |s: serde_json::Result<String>| s.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            expect(serde_json::to_string(&doc())),
            expect(serde_json::to_string(&strings))
        );
        assert_eq!(
            expect(serde_json::to_string_pretty(&doc())),
            expect(serde_json::to_string_pretty(&strings))
        );
    }

    #[test]
    fn other_serializers_get_the_string_itself() {
        let value = serde_json::to_value(doc()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(value["words"][0], AWKWARD);
        let toml = toml::to_string(&doc()).unwrap_or_else(|e| panic!("{e}"));
        let back: toml::Table = toml::from_str(&toml).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back["words"][0].as_str(), Some(AWKWARD));
    }

    #[test]
    fn text_reads_and_compares_as_its_string() {
        let shared = Text::shared("cause");
        assert_eq!(shared, Text::from("cause"));
        assert_eq!(shared, "cause");
        assert_eq!(shared.len(), 5);
        assert_eq!(format!("{shared} / {shared:?}"), "cause / \"cause\"");
        let back: Text = serde_json::from_str("\"cause\"").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, shared);
    }
}
