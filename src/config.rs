//! Server configuration: defaults < `faultline.toml` < `FAULTLINE_*` / `DATABASE_URL` environment
//! variables < command-line flags. Secrets never appear in `Debug` output.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::service::{Access, Policy};

/// Name of the optional configuration file read from the working directory.
pub const CONFIG_FILE: &str = "faultline.toml";

/// Everything `faultline serve` can be told.
#[derive(Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address to listen on.
    pub bind: SocketAddr,
    /// Database URL: `sqlite://faultline.db` (created on first start) or `postgres://…`.
    pub database: String,
    /// Rules directory replacing the embedded rule base.
    pub rules: Option<PathBuf>,
    /// Who may read and write, on the API and the pages alike (see [`Access`]): `auto` (open
    /// to this machine when bound to loopback, tokens for everything otherwise), `open`,
    /// `token-for-writes` or `private`.
    pub access: Access,
    /// Deprecated: `access = "private"` (kept so that older configuration files still load).
    pub require_token_for_reads: bool,
    /// Deprecated: `access = "private"` (kept so that older configuration files still load).
    pub web_requires_token: bool,
    /// Largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// A request taking longer than this is answered 503.
    pub request_timeout_secs: u64,
    /// A client that has not sent a whole request head this many seconds after connecting (or,
    /// on a kept-alive HTTP/1 connection, after its last response) is disconnected.
    pub header_read_timeout_secs: u64,
    /// Most client connections open at once; a connection over it is closed as soon as it is
    /// accepted. Default (and most): half the process's open-file limit, leaving the other half to
    /// the database and files.
    pub max_client_connections: Option<usize>,
    /// Most connections open at once from one IP address; 0 turns the cap off. Behind a reverse
    /// proxy every client has the proxy's address: raise it or turn it off there.
    pub max_connections_per_ip: usize,
    /// Requests per minute per client (token, or IP address without one); 0 turns the limit off.
    pub rate_limit_per_minute: u32,
    /// Burst of requests a client may make at once.
    pub rate_limit_burst: u32,
    /// Most incidents written in one database transaction.
    pub write_batch: usize,
    /// SQLite `synchronous` mode: `full` (survives power loss) or `normal` (survives a crash of the
    /// process, faster).
    pub sqlite_synchronous: String,
    /// Database connections.
    pub max_connections: u32,
    /// Where tensor snapshots are kept: empty for a `snapshots` folder beside the SQLite file,
    /// a folder path, or `s3://bucket/prefix` (endpoint and credentials from the `AWS_*` variables).
    pub snapshot_store: String,
    /// Keep only what a snapshot holds (names, dtypes, shapes, parameters) and the check results:
    /// the file is deleted once its replay job has finished.
    pub snapshot_summary_only: bool,
    /// Snapshot files older than this many days are deleted (summaries and results stay); 0 keeps them.
    pub snapshot_retention_days: u32,
    /// Largest snapshot upload accepted, in bytes (this route only).
    pub snapshot_max_bytes: usize,
    /// Most bytes an uploaded `.npz`'s members may inflate to, all together (uploads and the jobs
    /// of this server's workers; `faultline replay` and `faultline analyze` offline allow 2 GiB).
    pub snapshot_max_inflated_bytes: usize,
    /// Memory shared by the snapshot uploads in flight (the bytes each buffers) and the embedded
    /// worker (the file and inflated tensors of its job): an upload that finds it spent is answered
    /// 503 with `Retry-After`, the worker waits for its share.
    pub snapshot_memory_budget_bytes: usize,
    /// `faultline serve` runs a replay worker in the process.
    pub embedded_worker: bool,
    /// Where the embedded worker runs checks: `auto` (the GPU when one opens), `cpu` or `gpu`.
    pub replay_backend: crate::replay::BackendChoice,
    /// A worker's lease on a job, renewed while it runs; a job whose worker died is leased again
    /// after this.
    pub replay_lease_secs: u64,
    /// Leases of a job before it is failed.
    pub replay_max_attempts: u32,
    /// A GPU or host that was the first fault of this many jobs' incidents is flagged on the
    /// repeat-offender list.
    pub offender_threshold: u32,
    /// Most bytes the `.zip` / `.tar.gz` files of one request may inflate to, all together: a
    /// bigger archive (a zip bomb) is refused.
    pub bundle_max_inflated_bytes: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            bind: SocketAddr::from(([127, 0, 0, 1], 8080)),
            database: "sqlite://faultline.db".to_owned(),
            rules: None,
            access: Access::Auto,
            require_token_for_reads: false,
            web_requires_token: false,
            max_body_bytes: 16 << 20,
            request_timeout_secs: 30,
            header_read_timeout_secs: 10,
            max_client_connections: None,
            max_connections_per_ip: 256,
            rate_limit_per_minute: 600,
            rate_limit_burst: 120,
            write_batch: 512,
            sqlite_synchronous: "full".to_owned(),
            max_connections: 8,
            snapshot_store: String::new(),
            snapshot_summary_only: false,
            snapshot_retention_days: 30,
            snapshot_max_bytes: 512 << 20,
            snapshot_max_inflated_bytes: 256 << 20,
            snapshot_memory_budget_bytes: 1 << 30,
            embedded_worker: true,
            replay_backend: crate::replay::BackendChoice::Auto,
            replay_lease_secs: 60,
            replay_max_attempts: 3,
            offender_threshold: 3,
            bundle_max_inflated_bytes: 256 << 20,
        }
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("bind", &self.bind)
            .field("database", &redact_url(&self.database))
            .field("rules", &self.rules)
            .field("access", &self.access)
            .field("require_token_for_reads", &self.require_token_for_reads)
            .field("web_requires_token", &self.web_requires_token)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("request_timeout_secs", &self.request_timeout_secs)
            .field("header_read_timeout_secs", &self.header_read_timeout_secs)
            .field("max_client_connections", &self.max_client_connections)
            .field("max_connections_per_ip", &self.max_connections_per_ip)
            .field("rate_limit_per_minute", &self.rate_limit_per_minute)
            .field("rate_limit_burst", &self.rate_limit_burst)
            .field("write_batch", &self.write_batch)
            .field("sqlite_synchronous", &self.sqlite_synchronous)
            .field("max_connections", &self.max_connections)
            .field("snapshot_store", &redact_url(&self.snapshot_store))
            .field("snapshot_summary_only", &self.snapshot_summary_only)
            .field("snapshot_retention_days", &self.snapshot_retention_days)
            .field("snapshot_max_bytes", &self.snapshot_max_bytes)
            .field("snapshot_max_inflated_bytes", &self.snapshot_max_inflated_bytes)
            .field("snapshot_memory_budget_bytes", &self.snapshot_memory_budget_bytes)
            .field("embedded_worker", &self.embedded_worker)
            .field("replay_backend", &self.replay_backend)
            .field("replay_lease_secs", &self.replay_lease_secs)
            .field("replay_max_attempts", &self.replay_max_attempts)
            .field("offender_threshold", &self.offender_threshold)
            .field("bundle_max_inflated_bytes", &self.bundle_max_inflated_bytes)
            .finish()
    }
}

impl Config {
    /// The access mode in force: `access`, or `private` where a deprecated flag asks for it.
    pub fn access(&self) -> Access {
        if self.require_token_for_reads || self.web_requires_token {
            Access::Private
        } else {
            self.access
        }
    }

    /// The snapshot bounds of the server (its uploads and the jobs of its workers): its upload size
    /// and its inflated size (`snapshot_max_bytes`, `snapshot_max_inflated_bytes`), the rest as
    /// offline.
    pub fn snapshot_limits(&self) -> crate::replay::Limits {
        crate::replay::Limits {
            max_bytes: self.snapshot_max_bytes as u64,
            max_inflated: self.snapshot_max_inflated_bytes as u64,
            ..crate::replay::Limits::default()
        }
    }

    /// The authorization policy of a server with this configuration.
    pub fn policy(&self) -> Policy {
        Policy::new(self.access(), self.bind)
    }
}

/// `postgres://user:secret@host/db` → `postgres://user:***@host/db`.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// A configuration problem.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// An environment variable is not valid.
    #[error("environment variable {name}: {message}")]
    Env {
        /// The variable.
        name: String,
        /// Why.
        message: String,
    },
}

impl Config {
    /// Reads `path` if given, else `faultline.toml` in the working directory when it exists, and
    /// applies the environment (`get` reads a variable; tests pass their own).
    pub fn load(path: Option<&Path>, get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let mut config = match path {
            Some(p) => Self::from_file(p)?,
            None if Path::new(CONFIG_FILE).is_file() => Self::from_file(Path::new(CONFIG_FILE))?,
            None => Self::default(),
        };
        config.apply_env(get)?;
        Ok(config)
    }

    fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| ConfigError::Invalid {
            path: path.display().to_string(),
            message: e.to_string(),
        })
    }

    fn apply_env(&mut self, get: impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        fn parse<T: std::str::FromStr>(name: &str, value: String) -> Result<T, ConfigError>
        where
            T::Err: std::fmt::Display,
        {
            value.parse().map_err(|e: T::Err| ConfigError::Env {
                name: name.to_owned(),
                message: e.to_string(),
            })
        }
        if let Some(v) = get("DATABASE_URL") {
            self.database = v;
        }
        if let Some(v) = get("FAULTLINE_DATABASE") {
            self.database = v;
        }
        if let Some(v) = get("FAULTLINE_BIND") {
            self.bind = parse("FAULTLINE_BIND", v)?;
        }
        if let Some(v) = get("FAULTLINE_RULES") {
            self.rules = Some(PathBuf::from(v));
        }
        if let Some(v) = get("FAULTLINE_ACCESS") {
            self.access = parse("FAULTLINE_ACCESS", v)?;
        }
        if let Some(v) = get("FAULTLINE_REQUIRE_TOKEN_FOR_READS") {
            self.require_token_for_reads = parse("FAULTLINE_REQUIRE_TOKEN_FOR_READS", v)?;
        }
        if let Some(v) = get("FAULTLINE_WEB_REQUIRES_TOKEN") {
            self.web_requires_token = parse("FAULTLINE_WEB_REQUIRES_TOKEN", v)?;
        }
        if let Some(v) = get("FAULTLINE_MAX_BODY_BYTES") {
            self.max_body_bytes = parse("FAULTLINE_MAX_BODY_BYTES", v)?;
        }
        if let Some(v) = get("FAULTLINE_REQUEST_TIMEOUT_SECS") {
            self.request_timeout_secs = parse("FAULTLINE_REQUEST_TIMEOUT_SECS", v)?;
        }
        if let Some(v) = get("FAULTLINE_HEADER_READ_TIMEOUT_SECS") {
            self.header_read_timeout_secs = parse("FAULTLINE_HEADER_READ_TIMEOUT_SECS", v)?;
        }
        if let Some(v) = get("FAULTLINE_MAX_CLIENT_CONNECTIONS") {
            self.max_client_connections = Some(parse("FAULTLINE_MAX_CLIENT_CONNECTIONS", v)?);
        }
        if let Some(v) = get("FAULTLINE_MAX_CONNECTIONS_PER_IP") {
            self.max_connections_per_ip = parse("FAULTLINE_MAX_CONNECTIONS_PER_IP", v)?;
        }
        if let Some(v) = get("FAULTLINE_RATE_LIMIT_PER_MINUTE") {
            self.rate_limit_per_minute = parse("FAULTLINE_RATE_LIMIT_PER_MINUTE", v)?;
        }
        if let Some(v) = get("FAULTLINE_SQLITE_SYNCHRONOUS") {
            self.sqlite_synchronous = v;
        }
        if let Some(v) = get("FAULTLINE_SNAPSHOT_STORE") {
            self.snapshot_store = v;
        }
        if let Some(v) = get("FAULTLINE_SNAPSHOT_SUMMARY_ONLY") {
            self.snapshot_summary_only = parse("FAULTLINE_SNAPSHOT_SUMMARY_ONLY", v)?;
        }
        if let Some(v) = get("FAULTLINE_SNAPSHOT_RETENTION_DAYS") {
            self.snapshot_retention_days = parse("FAULTLINE_SNAPSHOT_RETENTION_DAYS", v)?;
        }
        if let Some(v) = get("FAULTLINE_SNAPSHOT_MAX_BYTES") {
            self.snapshot_max_bytes = parse("FAULTLINE_SNAPSHOT_MAX_BYTES", v)?;
        }
        if let Some(v) = get("FAULTLINE_SNAPSHOT_MAX_INFLATED_BYTES") {
            self.snapshot_max_inflated_bytes = parse("FAULTLINE_SNAPSHOT_MAX_INFLATED_BYTES", v)?;
        }
        if let Some(v) = get("FAULTLINE_SNAPSHOT_MEMORY_BUDGET_BYTES") {
            self.snapshot_memory_budget_bytes = parse("FAULTLINE_SNAPSHOT_MEMORY_BUDGET_BYTES", v)?;
        }
        if let Some(v) = get("FAULTLINE_EMBEDDED_WORKER") {
            self.embedded_worker = parse("FAULTLINE_EMBEDDED_WORKER", v)?;
        }
        if let Some(v) = get("FAULTLINE_REPLAY_BACKEND") {
            self.replay_backend = parse("FAULTLINE_REPLAY_BACKEND", v)?;
        }
        if let Some(v) = get("FAULTLINE_OFFENDER_THRESHOLD") {
            self.offender_threshold = parse("FAULTLINE_OFFENDER_THRESHOLD", v)?;
        }
        if let Some(v) = get("FAULTLINE_BUNDLE_MAX_INFLATED_BYTES") {
            self.bundle_max_inflated_bytes = parse("FAULTLINE_BUNDLE_MAX_INFLATED_BYTES", v)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_embedded_sqlite_file_on_loopback() {
        let c = Config::default();
        assert_eq!(c.bind.to_string(), "127.0.0.1:8080");
        assert_eq!(c.database, "sqlite://faultline.db");
        assert_eq!(c.max_body_bytes, 16 << 20);
    }

    #[test]
    fn the_environment_overrides_the_file() {
        let dir = std::env::temp_dir().join(format!("faultline-config-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let file = dir.join("faultline.toml");
        std::fs::write(&file, "bind = \"0.0.0.0:9000\"\nrate_limit_per_minute = 5\n").unwrap_or_default();
        let c = Config::load(Some(&file), |name| match name {
            "DATABASE_URL" => Some("postgres://u:pw@db/fl".into()),
            "FAULTLINE_RATE_LIMIT_PER_MINUTE" => Some("7".into()),
            _ => None,
        })
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.bind.to_string(), "0.0.0.0:9000");
        assert_eq!(c.database, "postgres://u:pw@db/fl");
        assert_eq!(c.rate_limit_per_minute, 7);
        assert!(!format!("{c:?}").contains("pw"), "secrets stay out of Debug");
    }

    #[test]
    fn the_connection_limits_come_from_the_environment() {
        let c = Config::load(None, |name| match name {
            "FAULTLINE_HEADER_READ_TIMEOUT_SECS" => Some("3".into()),
            "FAULTLINE_MAX_CLIENT_CONNECTIONS" => Some("900".into()),
            "FAULTLINE_MAX_CONNECTIONS_PER_IP" => Some("0".into()),
            _ => None,
        })
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (
                c.header_read_timeout_secs,
                c.max_client_connections,
                c.max_connections_per_ip
            ),
            (3, Some(900), 0)
        );
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors() {
        let dir = std::env::temp_dir().join(format!("faultline-config-bad-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let file = dir.join("faultline.toml");
        std::fs::write(&file, "bnd = \"x\"\n").unwrap_or_default();
        assert!(Config::load(Some(&file), |_| None).is_err());
        let err = Config::load(None, |n| (n == "FAULTLINE_BIND").then(|| "nowhere".into())).err();
        assert!(err.is_some_and(|e| e.to_string().contains("FAULTLINE_BIND")));
    }

    #[test]
    fn the_access_mode_comes_from_the_environment_and_deprecated_flags_mean_private() {
        let c = Config::load(None, |n| {
            (n == "FAULTLINE_ACCESS").then(|| "token-for-writes".into())
        })
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.access(), Access::TokenForWrites);
        let bad = Config::load(None, |n| (n == "FAULTLINE_ACCESS").then(|| "public".into())).err();
        assert!(bad.is_some_and(|e| e.to_string().contains("FAULTLINE_ACCESS")));
        let old = Config {
            require_token_for_reads: true,
            ..Config::default()
        };
        assert_eq!(old.access(), Access::Private);
        assert_eq!(Config::default().access(), Access::Auto);
    }

    #[test]
    fn url_passwords_are_redacted() {
        assert_eq!(
            redact_url("postgres://u:pw@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(redact_url("sqlite://faultline.db"), "sqlite://faultline.db");
    }
}
