//! Removal of terminal escape sequences and control bytes.

/// Copies `s` into `out` without ANSI escape sequences (CSI, OSC, two-byte escapes), orphaned SGR
/// codes whose escape byte was lost in a copy-paste (`[36m`, `[0m`, `[0K`), and control characters
/// other than tab; a copy's substitutes (no-break spaces, curly quotes, HTML entities, Markdown's
/// bold markers: see [`super::typography`]) become the characters the program printed. Returns
/// whether any NUL or other control character (not an escape sequence) was removed.
pub(super) fn clean_into(s: &str, out: &mut String) -> bool {
    let mut removed_control = false;
    let bold = super::typography::bold_markers(s.as_bytes());
    let mut bold = bold.iter().peekable();
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if bold.next_if(|&&at| at == i).is_some() {
            chars.next(); // the marker's second `*`
            continue;
        }
        match c {
            '\x1b' => skip_escape(&mut chars),
            '[' => match orphan_sgr_len(&s.as_bytes()[i..]) {
                Some(len) => {
                    // Skip the rest of the code: `len` bytes, all ASCII, one char each.
                    for _ in 1..len {
                        chars.next();
                    }
                }
                None => out.push(c),
            },
            '&' => match super::typography::entity(&s.as_bytes()[i..]) {
                Some((plain, len)) => {
                    out.push(plain);
                    // Skip the rest of the entity: `len` bytes, all ASCII, one char each.
                    for _ in 1..len {
                        chars.next();
                    }
                }
                None => out.push(c),
            },
            '\t' => out.push(c),
            c if c.is_control() => removed_control = true,
            c => out.push(super::typography::plain(c).unwrap_or(c)),
        }
    }
    removed_control
}

/// Consumes an escape sequence whose ESC was just read.
fn skip_escape(chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>) {
    match chars.next() {
        // CSI: parameters and intermediates, then one final byte in 0x40..=0x7e.
        Some((_, '[')) => {
            for (_, c) in chars.by_ref() {
                if ('\x40'..='\x7e').contains(&c) {
                    break;
                }
            }
        }
        // OSC: up to BEL or ST (ESC \).
        Some((_, ']')) => {
            while let Some((_, c)) = chars.next() {
                if c == '\x07' {
                    break;
                }
                if c == '\x1b' {
                    chars.next_if(|&(_, c)| c == '\\');
                    break;
                }
            }
        }
        // Two-byte escapes (ESC ( B, ESC =, …): the next char is part of the sequence.
        Some((_, '(' | ')')) => {
            chars.next();
        }
        _ => {}
    }
}

/// Length of an orphaned SGR / erase code at the start of `bytes` (`[0m`, `[1;31m`, `[0K`).
fn orphan_sgr_len(bytes: &[u8]) -> Option<usize> {
    if bytes.first() != Some(&b'[') {
        return None;
    }
    let body = bytes[1..]
        .iter()
        .take(12)
        .take_while(|b| b.is_ascii_digit() || **b == b';')
        .count();
    let has_digit = bytes[1..1 + body].iter().any(u8::is_ascii_digit);
    match bytes.get(1 + body) {
        Some(b'm' | b'K') if has_digit => Some(body + 2),
        _ => None,
    }
}

/// Whether the raw bytes hold an orphaned SGR / erase code anywhere.
pub(super) fn has_orphan_sgr(raw: &[u8]) -> bool {
    memchr::memchr_iter(b'[', raw).any(|i| orphan_sgr_len(&raw[i..]).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clean(s: &str) -> String {
        let mut out = String::new();
        clean_into(s, &mut out);
        out
    }

    #[test]
    fn csi_sequences_of_every_shape_are_removed() {
        assert_eq!(clean("\x1b[1;31mred\x1b[0m \x1b[2K\x1b[1Gx"), "red x");
    }

    #[test]
    fn osc_hyperlinks_are_removed_but_their_text_kept() {
        assert_eq!(clean("\x1b]8;;https://x.y\x07link\x1b]8;;\x1b\\ end"), "link end");
    }

    #[test]
    fn brackets_that_are_not_colour_codes_survive() {
        assert_eq!(
            clean("block: [0,0,0] [rank1]: [m] [12]"),
            "block: [0,0,0] [rank1]: [m] [12]"
        );
    }

    #[test]
    fn a_lone_escape_at_the_end_is_dropped() {
        assert_eq!(clean("abc\x1b"), "abc");
    }
}
