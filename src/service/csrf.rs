//! The pages' CSRF tokens: a random nonce and its HMAC-SHA256 under a key every server of one
//! knowledge base shares, so a form served by one server is taken by another, and a value the
//! server did not make (a cookie tossed by a sibling site) is no token.

use crate::kb::codec::hex;

/// A fresh random token.
pub fn new_token() -> String {
    let mut bytes = [0u8; 16];
    // Without randomness the form tokens would be guessable: refuse rather than degrade.
    if getrandom::fill(&mut bytes).is_err() {
        return String::new();
    }
    hex(&bytes)
}

/// The key that signs the pages' CSRF tokens: a token is a random nonce and its HMAC-SHA256, so
/// a cookie value the server did not make (set by a sibling site, say) is refused.
#[derive(Clone)]
pub struct CsrfKey([u8; 32]);

impl std::fmt::Debug for CsrfKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CsrfKey(…)")
    }
}

/// Hex characters of a token's nonce and of its signature.
const NONCE_HEX: usize = 32;

impl CsrfKey {
    /// A key of this process alone (a server whose knowledge base gave none).
    pub fn random() -> Self {
        let mut key = [0u8; 32];
        // Without randomness the key would be guessable: no token then verifies.
        if getrandom::fill(&mut key).is_err() {
            key = [0; 32];
        }
        Self(key)
    }

    /// The key from its hex text (as the knowledge base keeps it).
    pub fn from_hex(text: &str) -> Option<Self> {
        let bytes = text.as_bytes();
        if bytes.len() != 64 {
            return None;
        }
        let mut key = [0u8; 32];
        for (i, pair) in bytes.chunks(2).enumerate() {
            let pair = std::str::from_utf8(pair).ok()?;
            key[i] = u8::from_str_radix(pair, 16).ok()?;
        }
        Some(Self(key))
    }

    fn sign(&self, nonce: &str) -> String {
        use hmac::{KeyInit, Mac};
        let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(&self.0) else {
            return String::new();
        };
        mac.update(nonce.as_bytes());
        let tag = mac.finalize().into_bytes();
        hex(&tag[..NONCE_HEX / 2])
    }

    /// A fresh token: nonce and signature, 64 hex characters.
    pub fn new_token(&self) -> String {
        let nonce = new_token();
        if nonce.is_empty() {
            return String::new();
        }
        let signature = self.sign(&nonce);
        format!("{nonce}{signature}")
    }

    /// Whether `token` is one this key made.
    pub fn made(&self, token: &str) -> bool {
        if token.len() != 2 * NONCE_HEX || !token.is_ascii() {
            return false;
        }
        let (nonce, signature) = token.split_at(NONCE_HEX);
        same_secret(&self.sign(nonce), signature)
    }
}

/// Whether two secrets are equal, compared in constant time.
pub fn same_secret(expected: &str, given: &str) -> bool {
    !expected.is_empty()
        && expected.len() == given.len()
        && expected
            .bytes()
            .zip(given.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_equal_only_when_every_byte_is() {
        assert!(same_secret("abc123", "abc123"));
        assert!(!same_secret("abc123", "abc124"));
        assert!(!same_secret("abc123", ""));
        assert!(!same_secret("", ""));
    }

    #[test]
    fn tokens_are_random_hex() {
        let (a, b) = (new_token(), new_token());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }

    #[test]
    fn only_tokens_the_key_made_are_genuine() {
        let key = CsrfKey::random();
        let token = key.new_token();
        assert_eq!(token.len(), 64);
        assert!(key.made(&token));
        assert!(!CsrfKey::random().made(&token), "another key's token");
        assert!(!key.made(&"0".repeat(64)), "a value of the right length");
        assert!(!key.made(&token[..32]), "an old-style 32-character value");
        let mut forged = token.clone();
        forged.replace_range(63.., if token.ends_with('0') { "1" } else { "0" });
        assert!(!key.made(&forged));
        let hex_key = "11".repeat(32);
        let shared = CsrfKey::from_hex(&hex_key).unwrap_or_else(CsrfKey::random);
        let again = CsrfKey::from_hex(&hex_key).unwrap_or_else(CsrfKey::random);
        assert!(
            again.made(&shared.new_token()),
            "servers that share the key share tokens"
        );
        assert!(CsrfKey::from_hex("zz").is_none());
    }
}
