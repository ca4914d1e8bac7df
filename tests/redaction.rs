//! Redaction (`kb::redact`) against every log under tests/fixtures: it changes no diagnosis; a
//! secret of any kind, spliced into any of those logs at any place and in any encoding, never
//! survives it, while the line count and the rest of the log do; and group notes and feedback
//! comments are stored redacted.

mod support;

use std::borrow::Cow;
use std::path::Path;
use std::sync::LazyLock;

use faultline::diagnose::analyze_str;
use faultline::eval::read_cases;
use faultline::kb::queries::FeedbackInput;
use faultline::kb::redact::redact;
use faultline::rules::RuleSet;
use proptest::prelude::*;
use proptest::sample::{Index, select};

/// Every log under tests/fixtures, by name: the whole logs, the device logs and the held-out corpus.
fn fixture_logs() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut logs = Vec::new();
    for dir in ["logs", "device"] {
        let dir = root.join(dir);
        let entries =
            std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
        let mut paths: Vec<_> = entries
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "log" || x == "txt"))
            .collect();
        paths.sort();
        for path in paths {
            let bytes =
                std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            logs.push((
                path.display().to_string(),
                String::from_utf8_lossy(&bytes).into_owned(),
            ));
        }
    }
    let corpus = root.join("corpus/held_out.jsonl");
    let text =
        std::fs::read_to_string(&corpus).unwrap_or_else(|e| panic!("cannot read {}: {e}", corpus.display()));
    let cases = read_cases(&text, "held_out.jsonl").unwrap_or_else(|e| panic!("{e}"));
    logs.extend(cases.into_iter().map(|case| (case.id, case.log)));
    logs
}

/// A line of each kind of secret, and a PEM key over lines, as a job might print them.
const SECRET_LINES: &str = "\
export HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyzABCDEF1234 FAULTLINE_TOKEN=fl_0123456789abcdef0123456789abcdef0123456789abcdef
{\"AccessKeyId\": \"AKIAABCDEFGHIJKLMNOP\", \"SecretAccessKey\": \"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\"}
password=hunter2 api_key: 0123456789 x-api-key: abcdef Authorization: Basic dXNlcjpwYXNz
OPENAI=sk-proj-abcdefghijklmnopqrstuvwxyz0123 xoxb-1234567890-abcdefghijkl
jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlc2lnbmF0dXJl https://ci:pw@ci.example.com/job/1
-----BEGIN RSA PRIVATE KEY-----
MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun
VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK
-----END RSA PRIVATE KEY-----
";

/// A diagnosis without the log's size in bytes, which redaction changes.
fn diagnosis_of(rules: &RuleSet, log: &str) -> serde_json::Value {
    let mut diagnosis = serde_json::to_value(analyze_str(rules, log))
        .unwrap_or_else(|e| panic!("the diagnosis does not serialize: {e}"));
    if let Some(fields) = diagnosis.as_object_mut() {
        fields.remove("bytes");
    }
    diagnosis
}

#[test]
fn redaction_changes_the_diagnosis_of_no_fixture_log_with_or_without_secrets_in_it() {
    let rules = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let logs = fixture_logs();
    assert!(logs.len() >= 1_900, "{} fixture logs", logs.len());
    let mut untouched = 0;
    for (name, log) in &logs {
        // The secrets on lines of their own, halfway through the log.
        let half = log.as_bytes()[..log.len() / 2].iter().rposition(|&b| b == b'\n');
        let (before, after) = log.split_at(half.map_or(0, |at| at + 1));
        let with_secrets = format!("{before}{SECRET_LINES}{after}");
        let redacted = redact(&with_secrets);
        assert!(!redacted.contains("hunter2"), "{name}");
        assert_eq!(
            diagnosis_of(&rules, &redacted),
            diagnosis_of(&rules, &with_secrets),
            "{name}:\n{redacted}"
        );
        // A log redaction hands back borrowed is the same text, with the same diagnosis.
        match redact(log) {
            Cow::Borrowed(_) => untouched += 1,
            Cow::Owned(redacted) => assert_eq!(
                diagnosis_of(&rules, &redacted),
                diagnosis_of(&rules, log),
                "{name}:\n{redacted}"
            ),
        }
    }
    // No fixture log holds a secret, nor anything that looks like one (the corpus's home
    // directories and addresses are anonymised): redaction replaces nothing in any of them.
    assert_eq!(untouched, logs.len());
}

/// A kind of secret as it would be written: the name it is assigned to, if it needs one to be a
/// secret, its value, and the parts of the value that must not survive.
#[derive(Debug, Clone)]
struct Secret {
    name: Option<String>,
    value: String,
    bodies: Vec<String>,
}

impl Secret {
    fn token(prefix: &str, body: String) -> Self {
        Self {
            name: None,
            value: format!("{prefix}{body}"),
            bodies: vec![body],
        }
    }

    fn named(name: &str, value: String, body: String) -> Self {
        Self {
            name: Some(name.to_owned()),
            value,
            bodies: vec![body],
        }
    }

    /// A PEM key spreads over lines: no URL carries one.
    fn is_multi_line(&self) -> bool {
        self.value.contains('\n')
    }
}

/// Secrets of every kind, their bodies random and of realistic lengths.
fn secrets() -> impl Strategy<Value = Secret> {
    prop_oneof![
        "[0-9a-f]{48}".prop_map(|body| Secret::token("fl_", body)),
        "[A-Za-z0-9]{30,40}".prop_map(|body| Secret::token("hf_", body)),
        (select(vec!["ghp_", "gho_", "ghs_"]), "[A-Za-z0-9]{36,40}")
            .prop_map(|(prefix, body)| Secret::token(prefix, body)),
        "[A-Za-z0-9_]{82}".prop_map(|body| Secret::token("github_pat_", body)),
        (select(vec!["AKIA", "ASIA"]), "[A-Z0-9]{16}").prop_map(|(prefix, body)| Secret::token(prefix, body)),
        (
            select(vec![
                "SecretAccessKey",
                "aws_secret_access_key",
                "AWS_SECRET_ACCESS_KEY"
            ]),
            "[A-Za-z0-9+/]{40}"
        )
            .prop_map(|(name, body)| Secret::named(name, body.clone(), body)),
        (
            select(vec![
                "PASSWORD",
                "password",
                "Password",
                "DB_PASSWORD",
                "API_KEY",
                "api_key",
                "apiKey",
                "WANDB_API_KEY",
                "x-api-key",
                "X-API-Key",
                "secret",
                "SECRET",
                "client_secret",
                "access_token",
                "SESSION_TOKEN",
            ]),
            "[A-Za-z0-9!#$%*+,./:;=?@^_~-]{12,40}"
        )
            .prop_map(|(name, body)| Secret::named(name, body.clone(), body)),
        (
            select(vec!["Authorization", "authorization"]),
            prop_oneof![
                "[A-Za-z0-9+/]{16,60}==".prop_map(|body| ("Basic", body)),
                "[0-9a-f]{40}".prop_map(|body| ("token", body)),
            ]
        )
            .prop_map(|(name, (scheme, body))| Secret::named(name, format!("{scheme} {body}"), body)),
        // Short bearer tokens too; an alphabet (consonants, digits from 3) that the text spliced
        // around them never holds, so that a body of one character cannot be found there.
        "[C-DF-HJ-NP-QS-TV-Z][C-DF-HJ-NP-QS-TV-Z3-9._~+/=-]{0,39}".prop_map(|body| Secret {
            name: None,
            value: format!("Bearer {body}"),
            bodies: vec![body],
        }),
        "[A-Za-z0-9]{48}".prop_map(|body| Secret::token("sk-", body)),
        "[A-Za-z0-9_-]{40,160}".prop_map(|body| Secret::token("sk-proj-", body)),
        "[A-Za-z0-9_-]{80,95}".prop_map(|body| Secret::token("sk-ant-api03-", body)),
        (
            select(vec!["xoxb-", "xoxp-", "xoxa-"]),
            "[0-9]{10,13}-[0-9]{10,13}-[A-Za-z0-9]{24}"
        )
            .prop_map(|(prefix, body)| Secret::token(prefix, body)),
        (
            "[A-Za-z0-9_-]{10,40}",
            "[A-Za-z0-9_-]{10,200}",
            "[A-Za-z0-9_-]{20,86}"
        )
            .prop_map(|(header, payload, signature)| Secret {
                name: None,
                value: format!("eyJ{header}.eyJ{payload}.{signature}"),
                bodies: vec![header, payload, signature],
            }),
        (
            select(vec!["", "RSA ", "EC ", "OPENSSH ", "ENCRYPTED "]),
            prop::collection::vec("[A-Za-z0-9+/]{64}", 1..30),
            "[A-Za-z0-9+/]{8,62}=="
        )
            .prop_map(|(kind, mut lines, last)| {
                lines.push(last);
                Secret {
                    name: None,
                    value: format!(
                        "-----BEGIN {kind}PRIVATE KEY-----\n{}\n-----END {kind}PRIVATE KEY-----",
                        lines.join("\n")
                    ),
                    bodies: lines,
                }
            }),
    ]
}

/// How a secret is written into a log.
#[derive(Debug, Clone)]
enum Encoding {
    /// `NAME=value`, `NAME: value`, or the token alone.
    Plain(&'static str),
    /// Right after a letter or a digit.
    Glued(char),
    /// `name%3Dvalue` with the value URL-encoded.
    UrlEncoded,
    /// After `\n` in a JSON string (the two characters), itself JSON-escaped.
    AfterJsonEscape,
    /// `{"name": "value"}`.
    JsonValue,
    /// `https://user:value@host/…`.
    UrlUserinfo,
    /// `https://host/…?name=value&…`.
    UrlQuery,
}

fn encodings() -> impl Strategy<Value = Encoding> {
    prop_oneof![
        select(vec!["=", ": ", ":", " = "]).prop_map(Encoding::Plain),
        "[a-zA-Z0-9]".prop_map(|c| Encoding::Glued(c.chars().next().unwrap_or('x'))),
        Just(Encoding::UrlEncoded),
        Just(Encoding::AfterJsonEscape),
        Just(Encoding::JsonValue),
        Just(Encoding::UrlUserinfo),
        Just(Encoding::UrlQuery),
    ]
}

fn url_encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => char::from(b).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn json_escaped(text: &str) -> String {
    text.replace('\n', "\\n")
}

/// The secret as `encoding` writes it. A PEM key has no URL forms: it is written plain there.
fn written(secret: &Secret, encoding: &Encoding) -> String {
    let plain = |separator: &str| match &secret.name {
        Some(name) => format!("{name}{separator}{}", secret.value),
        None => secret.value.clone(),
    };
    let name = secret.name.as_deref().unwrap_or("token");
    let url_form = matches!(
        encoding,
        Encoding::UrlEncoded | Encoding::UrlUserinfo | Encoding::UrlQuery
    );
    match encoding {
        _ if url_form && secret.is_multi_line() => plain("="),
        Encoding::Plain(separator) => plain(separator),
        Encoding::Glued(letter) => format!("{letter}{}", plain("=")),
        Encoding::UrlEncoded => format!("{name}%3D{}", url_encoded(&secret.value)),
        Encoding::AfterJsonEscape => format!("\"log\": \"step 1\\n{}\"", json_escaped(&plain(": "))),
        Encoding::JsonValue => format!("{{\"{name}\": \"{}\"}}", json_escaped(&secret.value)),
        Encoding::UrlUserinfo => format!("https://ci:{}@ci.example.com/job/7", url_encoded(&secret.value)),
        Encoding::UrlQuery => format!(
            "https://ci.example.com/job/7?{name}={}&page=2",
            url_encoded(&secret.value)
        ),
    }
}

/// Whether `body` is in `text`: anywhere for a long body, as a whole word for a short one (whose
/// characters the replacement's words may hold).
fn holds(text: &str, body: &str) -> bool {
    if body.len() >= 8 {
        return text.contains(body);
    }
    let word = |c: char| c.is_ascii_alphanumeric() || "._~+/=-".contains(c);
    text.match_indices(body).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + body.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

/// The fixture logs, already redacted (the corpus holds e-mail addresses): the text around a
/// spliced secret, which redaction must hand back as it is.
static REDACTED_LOGS: LazyLock<Vec<String>> = LazyLock::new(|| {
    fixture_logs()
        .into_iter()
        .map(|(_, log)| redact(&log).into_owned())
        .collect()
});

/// Where a secret may start: the start of the log, of a line, or of a word.
fn splice_points(log: &str) -> Vec<usize> {
    let mut points = vec![0];
    points.extend(
        log.char_indices()
            .filter(|&(_, c)| matches!(c, ' ' | '\t' | '\n'))
            .map(|(at, c)| at + c.len_utf8()),
    );
    points
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]

    #[test]
    fn a_spliced_secret_never_survives_and_the_log_around_it_and_its_lines_do(
        log in any::<Index>(),
        point in any::<Index>(),
        secret in secrets(),
        encoding in encodings(),
    ) {
        let log = log.get(&REDACTED_LOGS);
        let at = *point.get(&splice_points(log));
        let (before, after) = log.split_at(at);
        let spliced = format!("{before}{} {after}", written(&secret, &encoding));
        let out = redact(&spliced);
        prop_assert!(out.starts_with(before) && out.ends_with(after), "the text around it changed:\n{out}");
        prop_assert_eq!(out.matches('\n').count(), spliced.matches('\n').count());
        let middle = &out[before.len()..out.len() - after.len()];
        for body in &secret.bodies {
            prop_assert!(
                !holds(middle, body) && !holds(middle, &url_encoded(body)),
                "{body} survived in {middle:?}"
            );
        }
    }
}

#[tokio::test]
async fn group_notes_and_feedback_comments_are_stored_redacted() {
    let db = support::TempDb::new("redaction");
    let store = db.store().await;
    let oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB.\n";
    let incident = support::stored_incident(&store, oom).await;
    let group = store
        .incident(incident)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .group
        .map(|g| g.id)
        .unwrap_or_else(|| panic!("an OOM makes a group"));
    let secret = "hf_abcdefghijklmnopqrstuvwxyzABCDEF1234";

    let note = store
        .add_note(group, &format!("rerun with HF_TOKEN={secret}"), Some("ann"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(note.body, "rerun with HF_TOKEN=hf_<redacted>");
    let stored = store.group(group, 30).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        stored.notes.iter().map(|n| n.body.as_str()).collect::<Vec<_>>(),
        ["rerun with HF_TOKEN=hf_<redacted>"]
    );

    let feedback = FeedbackInput {
        comment: Some("fixed; the runner's password=hunter2 was wrong".into()),
        ..FeedbackInput::default()
    };
    let saved = store
        .add_feedback(incident, &feedback, Some("ann"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let expected = "fixed; the runner's password=<redacted> was wrong";
    assert_eq!(saved.comment.as_deref(), Some(expected));
    let stored = store.incident(incident).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        stored
            .feedback
            .iter()
            .map(|f| f.comment.as_deref())
            .collect::<Vec<_>>(),
        [Some(expected)]
    );
}
