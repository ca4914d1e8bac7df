//! The knowledge base: incidents grouped by fingerprint, with their logs, diagnoses, feedback and
//! notes, in SQLite (a file, no set-up) or PostgreSQL (shared by several servers).
//!
//! One code path serves both through sqlx's `Any` driver; the few statements that differ (full-text
//! search) are chosen by [`Backend`]. No SQL lives outside this module. Secrets are redacted from a
//! log before it is analysed or stored ([`redact`]).

pub mod bundles;
pub mod codec;
mod migrations;
pub mod queries;
pub mod redact;
pub mod replay;
pub mod rows;
pub mod tokens;
pub mod writer;

use std::time::Duration;

use sqlx::AnyPool;
use sqlx::any::AnyPoolOptions;
use sqlx::{Executor, Row};

/// Which database is behind the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A SQLite file.
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
}

/// A knowledge-base failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The thing asked for does not exist.
    #[error("{0} not found")]
    NotFound(String),
    /// The request cannot be stored as given.
    #[error("{0}")]
    Invalid(String),
    /// The database URL is not one faultline can use.
    #[error("unsupported database URL {0:?}: use sqlite://FILE or postgres://…")]
    Url(String),
    /// The store is shutting down or its writer stopped.
    #[error("the knowledge base is not accepting writes: {0}")]
    Unavailable(String),
    /// Stored data could not be decoded.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// The database failed.
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    /// A migration failed.
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

/// A `Result` with [`StoreError`].
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// How to open the store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Pool size.
    pub max_connections: u32,
    /// SQLite `synchronous` mode (`full` or `normal`).
    pub sqlite_synchronous: String,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            max_connections: 8,
            sqlite_synchronous: "full".to_owned(),
        }
    }
}

/// The knowledge base.
#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl Store {
    /// Connects (creating a SQLite file on first start) without migrating.
    pub async fn open(url: &str, options: &StoreOptions) -> Result<Self> {
        sqlx::any::install_default_drivers();
        let (backend, url) = connection_url(url)?;
        let synchronous = match options.sqlite_synchronous.as_str() {
            "normal" => "PRAGMA synchronous = NORMAL",
            "full" => "PRAGMA synchronous = FULL",
            other => {
                return Err(StoreError::Invalid(format!(
                    "sqlite_synchronous must be full or normal, not {other:?}"
                )));
            }
        };
        let memory = url.contains(":memory:");
        if backend == Backend::Sqlite && !memory {
            create_private_file(&sqlite_path(&url))?;
        }
        let pool = AnyPoolOptions::new()
            // Each connection to `sqlite::memory:` is its own database.
            .max_connections(if memory { 1 } else { options.max_connections.max(2) })
            .acquire_timeout(Duration::from_secs(10))
            .after_connect(move |conn, _meta| {
                Box::pin(async move {
                    if backend == Backend::Sqlite {
                        conn.execute("PRAGMA journal_mode = WAL").await?;
                        conn.execute(synchronous).await?;
                        conn.execute("PRAGMA busy_timeout = 10000").await?;
                        conn.execute("PRAGMA foreign_keys = ON").await?;
                    }
                    Ok(())
                })
            })
            .connect(&url)
            .await?;
        Ok(Self { pool, backend })
    }

    /// Connects and brings the schema up to date.
    pub async fn open_and_migrate(url: &str, options: &StoreOptions) -> Result<Self> {
        let store = Self::open(url, options).await?;
        store.migrate().await?;
        Ok(store)
    }

    /// Runs the embedded migrations of this backend that have not run yet.
    pub async fn migrate(&self) -> Result<()> {
        migrations::migrator(self.backend).run(&self.pool).await?;
        Ok(())
    }

    /// Whether the database answers.
    pub async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").fetch_one(&self.pool).await?;
        Ok(())
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The pool, for this module's queries.
    pub(crate) fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Closes the pool, waiting for connections in use.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Counts rows of a table (for tests and metrics).
    pub async fn count(&self, table: Table) -> Result<i64> {
        let row = sqlx::query(table.count_sql()).fetch_one(&self.pool).await?;
        Ok(row.try_get::<i64, _>(0)?)
    }
}

/// Tables whose rows can be counted.
#[derive(Debug, Clone, Copy)]
pub enum Table {
    /// Incidents.
    Incidents,
    /// Groups.
    Groups,
    /// Logs.
    Logs,
}

impl Table {
    fn count_sql(self) -> &'static str {
        match self {
            Self::Incidents => "SELECT COUNT(*) FROM incidents",
            Self::Groups => "SELECT COUNT(*) FROM groups",
            Self::Logs => "SELECT COUNT(*) FROM logs",
        }
    }
}

/// The backend of a URL and the URL sqlx should connect to (SQLite files are created if missing).
pub fn connection_url(url: &str) -> Result<(Backend, String)> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok((Backend::Postgres, url.to_owned()));
    }
    let Some(rest) = url.strip_prefix("sqlite:") else {
        return Err(StoreError::Url(crate::config::redact_url(url)));
    };
    if rest.contains(":memory:") || rest.contains("mode=") {
        return Ok((Backend::Sqlite, url.to_owned()));
    }
    let sep = if rest.contains('?') { '&' } else { '?' };
    Ok((Backend::Sqlite, format!("{url}{sep}mode=rwc")))
}

/// The file of a `sqlite://` URL.
fn sqlite_path(url: &str) -> std::path::PathBuf {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .unwrap_or(url);
    std::path::PathBuf::from(rest.split('?').next().unwrap_or(rest))
}

/// Creates the database file readable by its owner only (SQLite gives its `-wal` and `-shm`
/// files the same mode); an existing file is left as it is.
fn create_private_file(path: &std::path::Path) -> Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(StoreError::Unavailable(format!(
            "cannot create the database file {}: {e}",
            path.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_pick_the_backend_and_sqlite_files_are_created() {
        assert_eq!(
            connection_url("sqlite://faultline.db").ok(),
            Some((Backend::Sqlite, "sqlite://faultline.db?mode=rwc".into()))
        );
        assert_eq!(
            connection_url("postgres://u@h/db").ok().map(|(b, _)| b),
            Some(Backend::Postgres)
        );
        assert!(connection_url("mysql://h/db").is_err());
        assert_eq!(
            connection_url("sqlite::memory:").ok().map(|(_, u)| u),
            Some("sqlite::memory:".into())
        );
    }
}
