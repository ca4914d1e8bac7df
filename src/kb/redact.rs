//! Secrets out of what users hand the knowledge base, before anything stores it: a log (redacted
//! before it is analysed, too), an incident's metadata, group notes and feedback comments.
//!
//! A secret is found by its prefix (faultline's own `fl_` tokens, Hugging Face, GitHub, AWS access
//! keys, OpenAI and Anthropic `sk-` keys, Slack tokens, JWTs), by its frame (PEM private keys), by
//! the name it is assigned to (`PASSWORD=`, `api_key: `, `"SecretAccessKey": "…"`, `x-api-key:`),
//! as a header's credentials (`Authorization: Basic …`, bearer tokens), as a URL's password, or as
//! an e-mail address; glued to the text before it, URL-encoded or after a JSON escape (`\n`) too.
//!
//! Invariants: line structure is kept (nothing spans or adds a newline: each line of a PEM key's
//! body becomes a marker of its own), so line numbers stay valid; a replacement says what kind of
//! secret was there; text without a secret comes back borrowed, unchanged; redacting the output
//! again changes nothing.

use std::borrow::Cow;
use std::sync::LazyLock;

use memchr::memmem;
use regex::Regex;
use regex_automata::{Anchored, Input, meta};

/// What replaces a secret.
#[derive(Debug, Clone, Copy)]
enum Replacement {
    /// A marker that names the secret's kind.
    Marker(&'static str),
    /// What the pattern's groups matched is kept (the name, header or scheme that says what kind
    /// of secret follows, and an opening quote), the rest replaced by `<redacted>`.
    AfterGroups,
}

/// A kind of secret.
struct Secret {
    /// Every pattern starts with a literal and none with a word boundary, so that a secret glued
    /// to a word (`xxhf_…`), after a JSON escape (`\nhf_…`) or URL-encoded (`token%3Dhf_…`) is
    /// found too. Groups only where the replacement keeps them.
    pattern: &'static str,
    replacement: Replacement,
}

/// What stands between a name and its value: an optional closing quote (escaped in a JSON string
/// or not), then `=` or `:`, plain or URL-encoded, with blanks around.
macro_rules! assigned {
    () => {
        r#"\\?["']?(?:[ \t]|%20)*(?:[:=]|%3[AaDd])(?:[ \t]|%20)*"#
    };
}

/// Searched together (one regex of many patterns), so that one scan finds all their literal
/// prefixes. Where two matches overlap the one starting first wins (`api_key=hf_…` is an
/// assignment), and where two start at the same place the one listed first.
const SECRETS: &[Secret] = &[
    // Credentials after the scheme, which is kept: `Authorization: Basic …`, `… token …`.
    Secret {
        pattern: concat!(
            r#"((?:[Aa]uthorization|AUTHORIZATION)"#,
            assigned!(),
            r#"\\?["']?(?:[A-Za-z]+(?:[ \t]|%20)+)?)[^\s"'&\\]+"#
        ),
        replacement: Replacement::AfterGroups,
    },
    // A value assigned to a secret's name: `WANDB_API_KEY=…`, `password: …`, `x-api-key: …`,
    // `"SecretAccessKey": "…"`, `client_secret=…&`. The match starts at the name's literal part, so
    // the words before it (`WANDB_`, `x-`) stay. Quoted values end at their quote, others at a
    // blank, a quote, `&` or a backslash. Not `token` alone: `pad_token = [PAD]` is no secret.
    Secret {
        pattern: concat!(
            r"((?:[Pp]assw(?:or)?d|PASSW(?:OR)?D|[Ss]ecret|SECRET|[Aa]pi[_-]?[Kk]ey|API[_-]?K(?:EY|ey)",
            r"|[Aa]ccess_?[Tt]oken|ACCESS_TOKEN|AUTH_TOKEN|[Ss]ession_?[Tt]oken|SESSION_TOKEN)",
            r"(?:[_-]?(?:[Aa]ccess[_-]?|ACCESS_)?(?:[Kk]ey|KEY))?",
            assigned!(),
            r#")(?:(\\?["'])[^"'\\\r\n]+|[^\s"'&\\]+)"#
        ),
        replacement: Replacement::AfterGroups,
    },
    // Any length: `Bearer abc` is a credential too. URL-encoded, its `+/=` become `%2B%2F%3D`.
    Secret {
        pattern: r"((?:[Bb]earer|BEARER)(?:[ \t]|%20)+)[A-Za-z0-9._~+/=%-]+",
        replacement: Replacement::AfterGroups,
    },
    Secret {
        pattern: r"fl_[0-9a-f]{48}",
        replacement: Replacement::Marker("fl_<redacted>"),
    },
    Secret {
        pattern: r"hf_[A-Za-z0-9]{30,}",
        replacement: Replacement::Marker("hf_<redacted>"),
    },
    Secret {
        pattern: r"gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}",
        replacement: Replacement::Marker("<github-token>"),
    },
    Secret {
        pattern: r"(?:AKIA|ASIA)[0-9A-Z]{16}(?-u:\b)",
        replacement: Replacement::Marker("<aws-access-key>"),
    },
    // Before the other `sk-` keys, whose pattern it matches too.
    Secret {
        pattern: r"sk-ant-[A-Za-z0-9_-]{20,}",
        replacement: Replacement::Marker("sk-ant-<redacted>"),
    },
    // A bare `sk-` key is one long run of letters and digits: `mask-rcnn_R_50_FPN` is not one.
    Secret {
        pattern: r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}|sk-[A-Za-z0-9]{32,}",
        replacement: Replacement::Marker("sk-<redacted>"),
    },
    Secret {
        pattern: r"xox[abposr]-[A-Za-z0-9-]{10,}",
        replacement: Replacement::Marker("<slack-token>"),
    },
    // Header and payload are base64url JSON objects, so both start with `eyJ` (`{"`).
    Secret {
        pattern: r"eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*",
        replacement: Replacement::Marker("<jwt>"),
    },
];

/// Secrets found by their shape, each searched alone and after [`SECRETS`] (whose markers they
/// keep): their patterns start with a class, and the regex engine first searches the literal
/// they hold (`://`, `@`). Replacements are templates (`${1}`). Word boundaries are ASCII
/// (`(?-u:\b)`): a Unicode `\b` sends the automata to a slow engine on any text with non-ASCII
/// characters (tqdm's bars, CJK output): 8 MB of such text took 2.5 s.
const SHAPED: &[(&str, &str)] = &[
    // A URL's password, with or without a user.
    (
        r"([a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]*:)[^@\s/]+@",
        "${1}<redacted>@",
    ),
    (
        r"(?-u:\b)[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?-u:\b)",
        "<email>",
    ),
];

/// What every PEM private key's BEGIN and END lines hold (`-----BEGIN RSA PRIVATE KEY-----`).
const PRIVATE_KEY: &str = "PRIVATE KEY-----";
/// Lines a key's body may take before its END line: an 8192-bit RSA key takes about 100.
const MAX_KEY_LINES: usize = 200;
/// Without an END line, the lines after BEGIN that are key material: a run of base64 this long.
const MIN_KEY_RUN: usize = 16;

/// The patterns, compiled.
struct Compiled {
    /// Whether the text may hold a PEM key at all.
    private_key: memmem::Finder<'static>,
    /// A key on one line, its line ends written as `\n` (a service account's JSON).
    private_key_on_one_line: Regex,
    /// [`SECRETS`] together: a match says which one it is, without the cost of captures.
    secrets: meta::Regex,
    /// Each of [`SECRETS`] alone, for the groups of the few matches that keep them.
    each_secret: Vec<meta::Regex>,
    /// [`SHAPED`], with their replacements.
    shaped: Vec<(Regex, &'static str)>,
}

/// Compiled once. A set of patterns (`RegexSet`) searched the log as slowly as its slowest member;
/// patterns that all start with literals, searched together, are one fast scan for those literals.
static COMPILED: LazyLock<Compiled> = LazyLock::new(|| {
    #[allow(clippy::expect_used)]
    let compile = |pattern: &str| Regex::new(pattern).expect("secret patterns compile");
    let patterns: Vec<&str> = SECRETS.iter().map(|secret| secret.pattern).collect();
    #[allow(clippy::expect_used)]
    let secrets = meta::Regex::new_many(&patterns).expect("secret patterns compile");
    #[allow(clippy::expect_used)]
    let alone = |pattern: &str| meta::Regex::new(pattern).expect("secret patterns compile");
    Compiled {
        private_key: memmem::Finder::new(PRIVATE_KEY.as_bytes()),
        private_key_on_one_line: compile(concat!(
            r"(-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----)",
            r#"(?:[^"'\r\n]*?(-----END [A-Z0-9 ]*PRIVATE KEY-----)|[^"'\r\n]+)"#
        )),
        secrets,
        each_secret: patterns.into_iter().map(alone).collect(),
        shaped: SHAPED
            .iter()
            .map(|&(pattern, replacement)| (compile(pattern), replacement))
            .collect(),
    }
});

/// The text with its secrets replaced; borrowed unchanged when it holds none.
pub fn redact(text: &str) -> Cow<'_, str> {
    let compiled = &*COMPILED;
    let mut redacted = Cow::Borrowed(text);
    if compiled.private_key.find(text.as_bytes()).is_some() {
        redacted = replaced(redacted, |text| {
            compiled
                .private_key_on_one_line
                .replace_all(text, "${1}<private-key>${2}")
        });
        if let Some(keys) = private_key_bodies(&redacted) {
            redacted = Cow::Owned(keys);
        }
    }
    if let Some(replaced) = compiled.without_secrets(&redacted) {
        redacted = Cow::Owned(replaced);
    }
    for (pattern, replacement) in &compiled.shaped {
        redacted = replaced(redacted, |text| pattern.replace_all(text, *replacement));
    }
    redacted
}

impl Compiled {
    /// The text with each match of [`SECRETS`] replaced; `None` when there is none.
    fn without_secrets(&self, text: &str) -> Option<String> {
        let mut found_any = false;
        let mut out = String::new();
        let mut copied = 0;
        for found in self.secrets.find_iter(text) {
            found_any = true;
            out.push_str(&text[copied..found.start()]);
            copied = found.end();
            let index = found.pattern().as_usize();
            match SECRETS.get(index).map(|secret| secret.replacement) {
                Some(Replacement::Marker(marker)) => out.push_str(marker),
                Some(Replacement::AfterGroups) | None => {
                    // The same pattern alone matches there, its groups with it: searched anchored
                    // to the match, so that only the engine that resolves groups runs.
                    let span = Input::new(text).span(found.range()).anchored(Anchored::Yes);
                    let kept = self.each_secret.get(index).and_then(|alone| {
                        let mut groups = alone.create_captures();
                        alone.search_captures(&span, &mut groups);
                        (1..groups.group_len())
                            .filter_map(|group| groups.get_group(group))
                            .map(|group| group.end)
                            .max()
                    });
                    out.push_str(&text[found.start()..kept.unwrap_or(found.start())]);
                    out.push_str("<redacted>");
                }
            }
        }
        if !found_any {
            return None;
        }
        out.push_str(&text[copied..]);
        Some(out)
    }
}

/// `text` redacted, without a copy when it holds no secret: for the fields a request brings.
pub fn redacted(text: String) -> String {
    match redact(&text) {
        Cow::Borrowed(_) => text,
        Cow::Owned(replaced) => replaced,
    }
}

/// A JSON document redacted in place, and still JSON (a flight-recorder dump kept as JSON): each
/// string, keys too, as a line of text is; and each `"key": value` pair as the line of JSON it
/// is, its value replaced by `"<redacted>"` where that line holds a secret (`"password": 1234`,
/// `"SecretAccessKey": "…"`), which neither its key nor its value shows alone.
pub fn redact_json(value: &mut serde_json::Value) {
    use serde_json::Value as J;
    match value {
        J::String(text) => {
            if let Cow::Owned(replaced) = redact(text) {
                *text = replaced;
            }
        }
        J::Array(items) => items.iter_mut().for_each(redact_json),
        J::Object(map) => {
            for (key, mut item) in std::mem::take(map) {
                redact_json(&mut item);
                let key = redacted(key);
                if !(item.is_array() || item.is_object()) {
                    let pair = format!("{}: {item}", J::String(key.clone()));
                    if *redact(&pair) != *pair {
                        item = J::String("<redacted>".to_owned());
                    }
                }
                map.insert(key, item);
            }
        }
        J::Null | J::Bool(_) | J::Number(_) => {}
    }
}

/// `text` after `replace`, which answers borrowed when it replaces nothing.
fn replaced<'a>(text: Cow<'a, str>, replace: impl for<'t> Fn(&'t str) -> Cow<'t, str>) -> Cow<'a, str> {
    match replace(&text) {
        Cow::Borrowed(_) => text,
        Cow::Owned(replaced) => Cow::Owned(replaced),
    }
}

/// The text with the body of each key spread over lines (`-----BEGIN … PRIVATE KEY-----` ending
/// its line) replaced line by line, up to the END line; `None` when there is none. Without an END
/// line within [`MAX_KEY_LINES`], the key's lines are those that end in a long run of base64.
fn private_key_bodies(text: &str) -> Option<String> {
    // The lines from the first key's on: the text before stays as it is.
    let first = memmem::find(text.as_bytes(), PRIVATE_KEY.as_bytes())?;
    let (before, text) = text.split_at(text[..first].rfind('\n').map_or(0, |at| at + 1));
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut out: Vec<Cow<'_, str>> = lines.iter().map(|line| Cow::Borrowed(*line)).collect();
    let mut at = 0;
    while at < lines.len() {
        let line = lines[at];
        at += 1;
        if !(line.contains("-----BEGIN") && line.contains(PRIVATE_KEY) && !line.contains("-----END")) {
            continue;
        }
        let window = &lines[at..lines.len().min(at + MAX_KEY_LINES)];
        let end = window.iter().position(|line| line.contains("-----END"));
        let body = end.unwrap_or_else(|| {
            window
                .iter()
                .take_while(|line| {
                    let content = line.trim_end_matches(BLANK_OR_LINE_END);
                    content.len() - base64_run_start(content) >= MIN_KEY_RUN
                })
                .count()
        });
        for index in at..at + body {
            out[index] = without_key_material(lines[index]);
        }
        // Material glued to `-----END` on its line.
        if let Some(end) = end.map(|end| at + end)
            && let Some(marker) = lines[end].find("-----END")
        {
            let (before, after) = lines[end].split_at(marker);
            let start = base64_run_start(before);
            if start < before.len() {
                out[end] = Cow::Owned(format!("{}<private-key>{after}", &before[..start]));
            }
        }
        at += body;
    }
    out.iter()
        .any(|line| matches!(line, Cow::Owned(_)))
        .then(|| format!("{before}{}", out.concat()))
}

/// What may follow a key's base64 on its line.
const BLANK_OR_LINE_END: [char; 4] = ['\n', '\r', ' ', '\t'];

/// Where the run of base64 that ends `content` starts (`content.len()` when there is none).
fn base64_run_start(content: &str) -> usize {
    content
        .trim_end_matches(|c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '='))
        .len()
}

/// A line of a key's body with its base64 (what follows any log prefix) replaced by a marker.
fn without_key_material(line: &str) -> Cow<'_, str> {
    let content = line.trim_end_matches(BLANK_OR_LINE_END);
    let start = base64_run_start(content);
    if start == content.len() {
        return Cow::Borrowed(line);
    }
    Cow::Owned(format!(
        "{}<private-key>{}",
        &line[..start],
        &line[content.len()..]
    ))
}

#[cfg(test)]
mod tests {
    use regex_automata::PatternID;

    use super::*;

    #[test]
    fn a_json_document_is_redacted_string_by_string_and_pair_by_pair_and_stays_json() {
        let mut dump = serde_json::json!({
            "version": "2.10",
            "entries": [{"frames": [{"filename": "/home/x/train.py", "name": "step hf_abcdefghijklmnopqrstuvwxyzABCDEF1234"}]}],
            "env": {"WANDB_API_KEY": 123456789, "api_key": "abc123", "note": "mail ops@example.com", "ok": 4},
            "user@example.com": true
        });
        redact_json(&mut dump);
        let text = dump.to_string();
        for secret in [
            "hf_abcdefghij",
            "123456789",
            "abc123",
            "ops@example.com",
            "user@example.com",
        ] {
            assert!(!text.contains(secret), "{secret} survived: {text}");
        }
        assert_eq!(dump["env"]["WANDB_API_KEY"], "<redacted>");
        assert_eq!(dump["env"]["api_key"], "<redacted>");
        assert_eq!(dump["env"]["ok"], 4, "a value no secret's name is given stays");
        assert_eq!(dump["entries"][0]["frames"][0]["filename"], "/home/x/train.py");
        assert_eq!(dump["<email>"], true);
        let mut again = dump.clone();
        redact_json(&mut again);
        assert_eq!(again, dump, "redacting it again changes nothing");
    }

    /// Redacts `log` and checks that none of `secrets` survived and the line count was kept.
    fn redacted_without(log: &str, secrets: &[&str]) -> String {
        let out = redact(log).into_owned();
        for secret in secrets {
            assert!(!out.contains(secret), "{secret} survived:\n{out}");
        }
        assert_eq!(out.lines().count(), log.lines().count(), "{out}");
        out
    }

    #[test]
    fn tokens_keys_and_passwords_are_replaced() {
        let log = "\
huggingface_hub.login(token=hf_abcdefghijklmnopqrstuvwxyzABCDEF1234)
git clone https://ghp_abcdefghijklmnopqrstuvwxyzABCDEF123456@github.com/x/y
AWS_ACCESS_KEY_ID=AKIAABCDEFGHIJKLMNOP
aws_secret_access_key = abcdefghijABCDEFGHIJ0123456789abcdefghij
Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig
DATABASE_URL=postgres://admin:hunter2@db:5432/prod
WANDB_API_KEY=0123456789abcdef
mail alice.smith@example.com
";
        let out = redacted_without(
            log,
            &[
                "hf_abcdefghij",
                "ghp_abc",
                "AKIAABCDEF",
                "abcdefghijABCDEFGHIJ01",
                "eyJhbGci",
                "hunter2",
                "0123456789abcdef",
                "alice.smith",
            ],
        );
        assert!(out.contains("postgres://admin:<redacted>@db:5432/prod"), "{out}");
    }

    #[test]
    fn secrets_beside_non_ascii_text_are_replaced_too() {
        let log = "训练 100%|██████████| 10/10 hf_abcdefghijklmnopqrstuvwxyzABCDEF1234\n\
                   │ é:alice.smith@example.com │ AKIAABCDEFGHIJKLMNOP│\n";
        let out = redacted_without(log, &["hf_abcdefghij", "alice.smith", "AKIAABCDEF"]);
        assert!(
            out.starts_with("训练 100%|██████████| 10/10 hf_<redacted>"),
            "{out}"
        );
    }

    #[test]
    fn faultline_api_tokens_are_replaced() {
        let token = format!("fl_{}", "0123456789abcdef".repeat(3));
        let out = redacted_without(&format!("curl -H 'x-token: {token}' …\n"), &[&token[3..]]);
        assert!(out.contains("fl_<redacted>"), "{out}");
    }

    #[test]
    fn an_aws_secret_access_key_inside_json_is_replaced_whatever_its_spelling() {
        let log = r#"{"AccessKeyId": "ASIAABCDEFGHIJKLMNOP", "SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}
{"aws_secret_access_key":"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}
AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY
"#;
        let out = redacted_without(log, &["wJalrXUtnFEMI", "ASIAABCDEF"]);
        assert!(out.contains(r#""SecretAccessKey": "<redacted>"}"#), "{out}");
    }

    #[test]
    fn bare_and_lower_case_passwords_api_keys_and_secrets_are_replaced() {
        let log = "PASSWORD=hunter2\nAPI_KEY=k3y-value\npassword=hunter3\napi_key: k3y-value2\n\
                   secret=s3cr3t\nclient_secret='s3 cr3t'\n";
        let out = redacted_without(log, &["hunter", "k3y", "s3cr3t", "s3 cr3t"]);
        assert_eq!(
            out,
            "PASSWORD=<redacted>\nAPI_KEY=<redacted>\npassword=<redacted>\napi_key: <redacted>\n\
             secret=<redacted>\nclient_secret='<redacted>'\n"
        );
    }

    #[test]
    fn basic_and_token_authorization_headers_keep_their_scheme_only() {
        let log = "Authorization: Basic dXNlcjpwYXNzd29yZA==\nauthorization: token 0123456789abcdef\n\
                   {'Authorization': 'Bearer abc'}\n";
        let out = redacted_without(log, &["dXNlcjpw", "0123456789", "abc'"]);
        assert_eq!(
            out,
            "Authorization: Basic <redacted>\nauthorization: token <redacted>\n\
             {'Authorization': 'Bearer <redacted>'}\n"
        );
    }

    #[test]
    fn an_x_api_key_header_is_replaced() {
        let out = redacted_without("x-api-key: 9f8e7d6c5b4a\nX-API-Key: 9f8e7d6c5b4b\n", &["9f8e7d"]);
        assert_eq!(out, "x-api-key: <redacted>\nX-API-Key: <redacted>\n");
    }

    #[test]
    fn openai_and_anthropic_sk_keys_are_replaced_and_mask_rcnn_is_not_one() {
        let log = format!(
            "OPENAI_KEY is sk-{} or sk-proj-{}\nclient = Anthropic(sk-ant-api03-{})\n\
             model mask-rcnn_R_50_FPN_3x_coco_20200205\n",
            "A1b2C3d4".repeat(6),
            "Ab_9-".repeat(30),
            "xY_z-0".repeat(16)
        );
        let out = redacted_without(&log, &["A1b2C3d4", "Ab_9-", "xY_z-0"]);
        assert!(out.contains("is sk-<redacted> or sk-<redacted>\n"), "{out}");
        assert!(out.contains("Anthropic(sk-ant-<redacted>)"), "{out}");
        assert!(out.contains("mask-rcnn_R_50_FPN_3x_coco_20200205"), "{out}");
    }

    #[test]
    fn slack_tokens_are_replaced() {
        let out = redacted_without(
            "SLACK=xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx notify\n",
            &["123456789012", "AbCdEf"],
        );
        assert_eq!(out, "SLACK=<slack-token> notify\n");
    }

    #[test]
    fn a_pem_private_key_spread_over_lines_becomes_one_marker_per_body_line() {
        let log = "\
loading key
2024-05-01T10:00:00Z -----BEGIN RSA PRIVATE KEY-----
2024-05-01T10:00:00Z MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun
2024-05-01T10:00:00Z VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK
2024-05-01T10:00:00Z LxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo9z+4
2024-05-01T10:00:00Z Qw==
2024-05-01T10:00:00Z -----END RSA PRIVATE KEY-----
RuntimeError: CUDA error: out of memory
";
        let out = redacted_without(log, &["MIIEow", "VTLw7o", "LxoS2t", "Qw=="]);
        assert_eq!(
            out,
            "\
loading key
2024-05-01T10:00:00Z -----BEGIN RSA PRIVATE KEY-----
2024-05-01T10:00:00Z <private-key>
2024-05-01T10:00:00Z <private-key>
2024-05-01T10:00:00Z <private-key>
2024-05-01T10:00:00Z <private-key>
2024-05-01T10:00:00Z -----END RSA PRIVATE KEY-----
RuntimeError: CUDA error: out of memory
"
        );
    }

    #[test]
    fn a_pem_private_key_cut_before_its_end_loses_its_base64_lines_only() {
        let log = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nMIIEvQIBADANBgkq\n\
                   Traceback (most recent call last):\n";
        let out = redacted_without(log, &["MIIEvQ"]);
        assert_eq!(
            out,
            "-----BEGIN PRIVATE KEY-----\n<private-key>\n<private-key>\nTraceback (most recent call last):\n"
        );
    }

    #[test]
    fn a_pem_private_key_inside_a_json_string_is_replaced_on_its_line() {
        let log = r#"{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\nkqhkiG9w0BAQEF\n-----END PRIVATE KEY-----\n", "client_id": "1"}"#;
        let out = redacted_without(log, &["MIIEvQ", "kqhkiG"]);
        assert_eq!(
            out,
            r#"{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----<private-key>-----END PRIVATE KEY-----\n", "client_id": "1"}"#
        );
    }

    #[test]
    fn jwts_are_replaced_and_a_lone_base64_json_is_not_one() {
        let log = "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U\n\
                   deepspeed.launcher.launch --world_info=eyJsb2NhbGhvc3QiOiBbMF19\n";
        let out = redacted_without(log, &["eyJzdWIi", "dozjgN"]);
        assert_eq!(
            out,
            "token <jwt>\ndeepspeed.launcher.launch --world_info=eyJsb2NhbGhvc3QiOiBbMF19\n"
        );
    }

    #[test]
    fn a_secret_glued_to_a_word_url_encoded_or_after_a_json_escape_is_replaced() {
        let hf = "hf_abcdefghijklmnopqrstuvwxyzABCDEF1234";
        let log = format!(
            "xx{hf}\nGET /login?next=%2F&token%3D{hf}\n{{\"msg\": \"login\\n{hf}\"}}\npassword%3Dhunter2\n"
        );
        let out = redacted_without(&log, &["abcdefghij", "hunter2"]);
        assert_eq!(
            out,
            "xxhf_<redacted>\nGET /login?next=%2F&token%3Dhf_<redacted>\n\
             {\"msg\": \"login\\nhf_<redacted>\"}\npassword%3D<redacted>\n"
        );
    }

    #[test]
    fn bearer_tokens_of_any_length_are_replaced() {
        let out = redacted_without(
            "curl -H 'Authorization: Bearer abc'\nheaders: bearer x7\n",
            &["abc", "x7"],
        );
        assert_eq!(
            out,
            "curl -H 'Authorization: Bearer <redacted>'\nheaders: bearer <redacted>\n"
        );
    }

    #[test]
    fn a_url_password_is_replaced_with_or_without_a_user() {
        let out = redacted_without(
            "https://user:pa55w0rd@ci.example.com/job/1 redis://:s3cret@cache:6379\n",
            &["pa55w0rd", "s3cret"],
        );
        assert_eq!(
            out,
            "https://user:<redacted>@ci.example.com/job/1 redis://:<redacted>@cache:6379\n"
        );
    }

    #[test]
    fn redacting_twice_changes_nothing_more() {
        let log = "Authorization: Bearer abc\npassword: \"a b\"\nkey sk-ant-api03-0123456789abcdefghij\n\
                   https://u:p@h/ alice@example.com\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkq\n\
                   -----END PRIVATE KEY-----\n";
        let once = redact(log).into_owned();
        assert_ne!(once, log);
        assert_eq!(redact(&once), once);
    }

    #[test]
    fn names_that_only_look_like_secrets_are_kept() {
        let log = "RuntimeError: CUDA error: device-side assert triggered\npad_token = [PAD]\n\
                   use_auth_token=False\nPASSWORD_FILE=/run/secrets/db\nsecrets: inherit\n\
                   File \"/app/api_key.py\", line 3\nValueError: Invalid API key: check it\n";
        assert!(matches!(redact(log), Cow::Borrowed(_)), "{}", redact(log));
    }

    #[test]
    fn every_secret_is_searched_together_and_alone() {
        assert_eq!(COMPILED.secrets.pattern_len(), SECRETS.len());
        assert_eq!(COMPILED.each_secret.len(), SECRETS.len());
    }

    #[test]
    fn a_marker_secret_keeps_no_groups_and_an_after_groups_one_has_some() {
        for (secret, alone) in SECRETS.iter().zip(&COMPILED.each_secret) {
            let groups = alone.group_info().group_len(PatternID::ZERO) - 1;
            match secret.replacement {
                Replacement::Marker(_) => assert_eq!(groups, 0, "{}", secret.pattern),
                Replacement::AfterGroups => assert!(groups > 0, "{}", secret.pattern),
            }
        }
    }

    #[test]
    fn a_field_without_a_secret_is_handed_back_as_it_came() {
        assert_eq!(redacted("vision".to_owned()), "vision");
        assert_eq!(
            redacted("https://u:pw@ci.example.com/1".to_owned()),
            "https://u:<redacted>@ci.example.com/1"
        );
    }
}
