//! Characters that a copy from a web page, a chat or a word processor puts in place of the ones a
//! program printed: no-break and other fixed-width spaces, curly quotes, and HTML entities
//! (`&lt;`, `&quot;`) of a log copied from a page's source or an API. Patterns are written for
//! what programs print, so these are read back as plain spaces and quotes.

/// The plain character a substituted one stands for.
pub(super) fn plain(c: char) -> Option<char> {
    match c {
        // no-break, figure, thin and narrow no-break spaces
        '\u{a0}' | '\u{2007}' | '\u{2009}' | '\u{202f}' => Some(' '),
        '\u{2018}' | '\u{2019}' => Some('\''),
        '\u{201c}' | '\u{201d}' => Some('"'),
        _ => None,
    }
}

/// The HTML entities read back, and their characters.
const ENTITIES: [(&str, char); 8] = [
    ("&lt;", '<'),
    ("&gt;", '>'),
    ("&amp;", '&'),
    ("&quot;", '"'),
    ("&apos;", '\''),
    ("&#39;", '\''),
    ("&#x27;", '\''),
    ("&#34;", '"'),
];

/// The character and the length of the HTML entity `s` starts with.
pub(super) fn entity(s: &[u8]) -> Option<(char, usize)> {
    ENTITIES
        .iter()
        .find(|(name, _)| s.starts_with(name.as_bytes()))
        .map(|(name, c)| (*c, name.len()))
}

/// Whether `raw` holds any of them (UTF-8 bytes: no-break space `C2 A0`, the others `E2 80 xx`).
pub(super) fn present(raw: &[u8]) -> bool {
    memchr::memchr_iter(0xC2, raw).any(|i| raw.get(i + 1) == Some(&0xA0))
        || memchr::memchr_iter(0xE2, raw).any(|i| {
            raw.get(i + 1) == Some(&0x80)
                && raw
                    .get(i + 2)
                    .is_some_and(|b| matches!(b, 0x87 | 0x89 | 0xAF | 0x98 | 0x99 | 0x9C | 0x9D))
        })
        || memchr::memchr_iter(b'&', raw).any(|i| entity(&raw[i..]).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_substitute_the_byte_test_sees_is_read_back_and_the_other_way_round() {
        for c in [
            '\u{a0}', '\u{2007}', '\u{2009}', '\u{202f}', '\u{2018}', '\u{2019}', '\u{201c}', '\u{201d}',
        ] {
            assert!(plain(c).is_some(), "{c:?}");
            assert!(present(c.to_string().as_bytes()), "{c:?}");
        }
        for (name, c) in ENTITIES {
            assert_eq!(entity(name.as_bytes()), Some((c, name.len())));
            assert!(present(format!("a {name} b").as_bytes()), "{name}");
        }
        assert!(!present("progress █▉ 50% & more, a — dash".as_bytes()));
    }
}
