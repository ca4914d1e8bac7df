//! Secrets out of a log before anything stores it: Hugging Face, GitHub and AWS tokens, bearer
//! tokens, passwords in URLs, `*_API_KEY=…` assignments and e-mail addresses. Line structure is
//! kept (nothing spans or adds a newline), so line numbers stay valid.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Regex, RegexSet};

/// (pattern, replacement) in the order they are applied. Word boundaries are ASCII (`(?-u:\b)`):
/// every secret is ASCII, and a Unicode `\b` sends the automata to a slow engine on any text
/// with non-ASCII characters (tqdm's bars, CJK output): 8 MB of such text took 2.5 s.
const SECRETS: &[(&str, &str)] = &[
    (r"(?-u:\b)hf_[A-Za-z0-9]{30,}", "hf_<redacted>"),
    (
        r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
        "<github-token>",
    ),
    (r"(?-u:\b)(?:AKIA|ASIA)[0-9A-Z]{16}(?-u:\b)", "<aws-access-key>"),
    (
        r#"(?i)(aws_secret_access_key["']?\s*[:=]\s*["']?)[A-Za-z0-9/+=]{40}"#,
        "${1}<redacted>",
    ),
    (r"(?i)((?-u:\b)bearer\s+)[A-Za-z0-9._~+/=-]{8,}", "${1}<redacted>"),
    (
        r"([a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]+:)[^@\s/]+@",
        "${1}<redacted>@",
    ),
    (
        r#"(?-u:\b)([A-Z][A-Z0-9_]*(?:API_KEY|SECRET|PASSWORD|ACCESS_TOKEN|AUTH_TOKEN)\s*[=:]\s*)["']?[^\s"']+"#,
        "${1}<redacted>",
    ),
    (
        r"(?-u:\b)[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?-u:\b)",
        "<email>",
    ),
];

static COMPILED: LazyLock<(RegexSet, Vec<Regex>)> = LazyLock::new(|| {
    #[allow(clippy::expect_used)]
    let set = RegexSet::new(SECRETS.iter().map(|(p, _)| *p)).expect("secret patterns compile");
    #[allow(clippy::expect_used)]
    let each = SECRETS
        .iter()
        .map(|(p, _)| Regex::new(p).expect("secret pattern compiles"))
        .collect();
    (set, each)
});

/// The log with its secrets replaced; borrowed unchanged when it holds none.
pub fn redact(log: &str) -> Cow<'_, str> {
    let (set, each) = &*COMPILED;
    let found = set.matches(log);
    if !found.matched_any() {
        return Cow::Borrowed(log);
    }
    let mut text = log.to_owned();
    for i in found.iter() {
        if let Cow::Owned(replaced) = each[i].replace_all(&text, SECRETS[i].1) {
            text = replaced;
        }
    }
    Cow::Owned(text)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let out = redact(log);
        for secret in [
            "hf_abcdefghij",
            "ghp_abc",
            "AKIAABCDEF",
            "abcdefghijABCDEFGHIJ01",
            "eyJhbGci",
            "hunter2",
            "0123456789abcdef",
            "alice.smith",
        ] {
            assert!(!out.contains(secret), "{secret} survived:\n{out}");
        }
        assert_eq!(out.lines().count(), log.lines().count());
        assert!(out.contains("postgres://admin:<redacted>@db:5432/prod"), "{out}");
    }

    #[test]
    fn secrets_beside_non_ascii_text_are_replaced_too() {
        let log = "训练 100%|██████████| 10/10 hf_abcdefghijklmnopqrstuvwxyzABCDEF1234\n\
                   │ é:alice.smith@example.com │ AKIAABCDEFGHIJKLMNOP│\n";
        let out = redact(log);
        for secret in ["hf_abcdefghij", "alice.smith", "AKIAABCDEF"] {
            assert!(!out.contains(secret), "{secret} survived:\n{out}");
        }
        assert!(
            out.starts_with("训练 100%|██████████| 10/10 hf_<redacted>"),
            "{out}"
        );
    }

    #[test]
    fn logs_without_secrets_are_untouched_and_not_copied() {
        let log = "RuntimeError: CUDA error: device-side assert triggered\npad_token = [PAD]\n";
        assert!(matches!(redact(log), Cow::Borrowed(_)));
    }
}
