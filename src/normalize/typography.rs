//! Characters that a copy from a web page, a chat or a word processor puts in place of the ones a
//! program printed: no-break and other fixed-width spaces, curly quotes, HTML entities (`&lt;`,
//! `&quot;`) of a log copied from a page's source or an API, and Markdown's bold markers that a
//! reporter put around part of a pasted line (`scalar type **Double** but got`). Patterns are
//! written for what programs print, so these are read back as plain spaces and quotes, and the
//! markers are dropped.

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

/// Where Markdown's bold markers (`**`) around a span of `line` start, in pairs: an opening `**`
/// not glued to a word before it and followed by a non-space, and the next `**` that follows a
/// non-space and is not glued to a word after it. `f(*args, **kwargs)` and `x**2 + y**2` have
/// none.
pub(super) fn bold_markers(line: &[u8]) -> Vec<usize> {
    let finder = memchr::memmem::Finder::new(b"**");
    let mut markers = Vec::new();
    let mut from = 0;
    while let Some(open) = finder.find(&line[from..]).map(|k| from + k) {
        let before_is_free = open == 0 || !is_word_or_star(line[open - 1]);
        let starts_text = line
            .get(open + 2)
            .is_some_and(|&c| !c.is_ascii_whitespace() && c != b'*');
        if !(before_is_free && starts_text) {
            from = open + 1;
            continue;
        }
        let mut search = open + 3;
        let close = loop {
            let Some(close) = line
                .get(search..)
                .and_then(|rest| finder.find(rest))
                .map(|k| search + k)
            else {
                break None;
            };
            let ends_text = !line[close - 1].is_ascii_whitespace() && line[close - 1] != b'*';
            let after_is_free = line.get(close + 2).is_none_or(|&c| !is_word_or_star(c));
            if ends_text && after_is_free {
                break Some(close);
            }
            search = close + 1;
        };
        let Some(close) = close else {
            break;
        };
        markers.extend([open, close]);
        from = close + 2;
    }
    markers
}

fn is_word_or_star(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'*'
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

/// Whether `raw` holds Markdown's bold markers around a span ([`bold_markers`]).
pub(super) fn has_bold(raw: &[u8]) -> bool {
    !bold_markers(raw).is_empty()
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

    #[test]
    fn bold_markers_are_found_around_a_span_and_nowhere_else() {
        let line = b"Expected object of scalar type **Double** but got scalar type **Float** for";
        assert_eq!(bold_markers(line), vec![31, 39, 62, 69]);
        assert!(has_bold(line));
        for plain in [
            "    return func(*args, **kwargs)",
            "    y = x**2 + z**2",
            "  ** not bold **",
            "loss ** 2",
            "**kwargs",
        ] {
            assert_eq!(bold_markers(plain.as_bytes()), Vec::<usize>::new(), "{plain}");
            assert!(!has_bold(plain.as_bytes()), "{plain}");
        }
        assert_eq!(bold_markers(b"**Node ID:** 5"), vec![0, 10]);
    }
}
