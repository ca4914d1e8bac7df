//! API tokens: created once and shown once; only their SHA-256 is stored.

use sqlx::Row;

use super::codec::{hex, sha256_hex};
use super::{Result, Store, StoreError, now_ms};

/// Prefix of every token, so that secret scanners and people recognise one.
pub const TOKEN_PREFIX: &str = "fl_";

/// A token's identity once verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenOwner {
    /// Token id.
    pub id: i64,
    /// Token name (`ci`, `alice`).
    pub name: String,
}

impl Store {
    /// Creates a token named `name` and returns it; it cannot be shown again.
    pub async fn create_token(&self, name: &str) -> Result<String> {
        let name = name.trim();
        if name.is_empty()
            || name.len() > 64
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c))
        {
            return Err(StoreError::Invalid(
                "a token name is 1 to 64 characters of letters, digits and - _ . @".into(),
            ));
        }
        let mut secret = [0u8; 24];
        getrandom::fill(&mut secret).map_err(|e| StoreError::Unavailable(format!("no randomness: {e}")))?;
        let token = format!("{TOKEN_PREFIX}{}", hex(&secret));
        let inserted = sqlx::query(
            "INSERT INTO api_tokens (name, hash, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        )
        .bind(name)
        .bind(sha256_hex(token.as_bytes()))
        .bind(now_ms())
        .execute(self.pool())
        .await?;
        if inserted.rows_affected() == 0 {
            return Err(StoreError::Invalid(format!(
                "a token named {name:?} already exists"
            )));
        }
        Ok(token)
    }

    /// The secret named `name` that every server of this knowledge base shares: 32 random bytes
    /// (hex), made by the first server that asks.
    pub async fn server_secret(&self, name: &str) -> Result<String> {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|e| StoreError::Unavailable(format!("no randomness: {e}")))?;
        sqlx::query("INSERT INTO server_secrets (name, value) VALUES ($1, $2) ON CONFLICT DO NOTHING")
            .bind(name)
            .bind(hex(&secret))
            .execute(self.pool())
            .await?;
        let row = sqlx::query("SELECT value FROM server_secrets WHERE name = $1")
            .bind(name)
            .fetch_one(self.pool())
            .await?;
        Ok(row.try_get(0)?)
    }

    /// The owner of `token`, if it is a valid token.
    pub async fn verify_token(&self, token: &str) -> Result<Option<TokenOwner>> {
        if !token.starts_with(TOKEN_PREFIX) {
            return Ok(None);
        }
        let row = sqlx::query("SELECT id, name FROM api_tokens WHERE hash = $1")
            .bind(sha256_hex(token.as_bytes()))
            .fetch_optional(self.pool())
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let owner = TokenOwner {
            id: row.try_get(0)?,
            name: row.try_get(1)?,
        };
        sqlx::query("UPDATE api_tokens SET last_used_at = $1 WHERE id = $2")
            .bind(now_ms())
            .bind(owner.id)
            .execute(self.pool())
            .await?;
        Ok(Some(owner))
    }
}
