//! Snapshot storage: tensor snapshot files, content-addressed (the key is the SHA-256 of the file),
//! through the `object_store` crate.
//!
//! By default a folder beside the SQLite file (`<db dir>/snapshots/`); `s3://bucket/prefix` for
//! S3-compatible storage shared by several machines, configured by the usual `AWS_*` environment
//! variables (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
//! `AWS_ALLOW_HTTP`; plain HTTP is allowed by itself for an endpoint on loopback, an emulator).
//! This module moves bytes; it never reads a snapshot nor touches the database.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::body::Bytes;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

/// A storage failure.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// The storage setting is not usable.
    #[error("snapshot storage {setting:?}: {reason}")]
    Config {
        /// The setting.
        setting: String,
        /// Why.
        reason: String,
    },
    /// No file under this key (never stored, or deleted by retention).
    #[error("snapshot {0} is no longer stored")]
    NotFound(String),
    /// A key that is not a SHA-256 hex digest.
    #[error("{0:?} is not a snapshot key")]
    BadKey(String),
    /// This server keeps no snapshot storage.
    #[error("this server has no snapshot storage")]
    Disabled,
    /// The storage failed.
    #[error("snapshot storage: {0}")]
    Store(object_store::Error),
}

impl From<object_store::Error> for ObjectError {
    fn from(e: object_store::Error) -> Self {
        match e {
            object_store::Error::NotFound { path, .. } => Self::NotFound(path),
            other => Self::Store(other),
        }
    }
}

/// A `Result` with [`ObjectError`].
pub type Result<T, E = ObjectError> = std::result::Result<T, E>;

/// Where snapshot files go.
#[derive(Clone)]
pub struct SnapshotStore {
    inner: Option<Arc<dyn ObjectStore>>,
    prefix: Option<ObjectPath>,
    location: String,
}

impl std::fmt::Debug for SnapshotStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotStore")
            .field("location", &self.location)
            .finish()
    }
}

impl SnapshotStore {
    /// The storage a setting names: empty for the default folder beside the SQLite database
    /// `database_url`, `s3://bucket/prefix`, or a folder path (`file:///srv/snapshots` too).
    pub fn open(setting: &str, database_url: &str) -> Result<Self> {
        let setting = setting.trim();
        if setting.is_empty() {
            return Self::local(&default_folder(database_url));
        }
        if setting.starts_with("s3://") {
            return Self::s3(setting, &[]);
        }
        if let Some((scheme, _)) = setting.split_once("://")
            && scheme != "file"
        {
            return Err(ObjectError::Config {
                setting: setting.to_owned(),
                reason: "use a folder path, file:///path or s3://bucket/prefix".into(),
            });
        }
        Self::local(Path::new(setting.trim_start_matches("file://")))
    }

    /// Files in a local folder (created when missing).
    pub fn local(dir: &Path) -> Result<Self> {
        let config = |reason: String| ObjectError::Config {
            setting: dir.display().to_string(),
            reason,
        };
        std::fs::create_dir_all(dir).map_err(|e| config(format!("cannot create the folder: {e}")))?;
        let store = LocalFileSystem::new_with_prefix(dir).map_err(|e| config(e.to_string()))?;
        Ok(Self {
            inner: Some(Arc::new(store)),
            prefix: None,
            location: dir.display().to_string(),
        })
    }

    /// S3-compatible storage at `s3://bucket/prefix`, configured from the `AWS_*` environment,
    /// then `overrides` (`("aws_endpoint", "http://127.0.0.1:5000")`, `("aws_access_key_id", …)`).
    pub fn s3(url: &str, overrides: &[(&str, &str)]) -> Result<Self> {
        let config = |reason: String| ObjectError::Config {
            setting: url.to_owned(),
            reason,
        };
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| config("not an s3:// URL".into()))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(config("no bucket name".into()));
        }
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
        for (key, value) in overrides {
            let key: AmazonS3ConfigKey = key
                .parse()
                .map_err(|e: object_store::Error| config(e.to_string()))?;
            builder = builder.with_config(key, *value);
        }
        let endpoint = builder
            .get_config_value(&AmazonS3ConfigKey::Endpoint)
            .unwrap_or_default();
        if is_loopback_http(&endpoint) {
            builder = builder.with_allow_http(true);
        }
        // TLS through rustls with ring, the provider sqlx already builds (no aws-lc-rs); an error
        // only says that one is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let store = builder.build().map_err(|e| config(e.to_string()))?;
        let prefix = prefix.trim_matches('/');
        Ok(Self {
            inner: Some(Arc::new(store)),
            prefix: (!prefix.is_empty()).then(|| ObjectPath::from(prefix)),
            location: url.to_owned(),
        })
    }

    /// No storage: every write fails with [`ObjectError::Disabled`].
    pub fn disabled() -> Self {
        Self {
            inner: None,
            prefix: None,
            location: "none".into(),
        }
    }

    /// Where the files go, in words (a folder or an `s3://` URL).
    pub fn location(&self) -> &str {
        &self.location
    }

    fn path(&self, key: &str) -> Result<ObjectPath> {
        if key.len() != 64
            || !key
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(ObjectError::BadKey(key.to_owned()));
        }
        let name = format!("{}/{key}", &key[..2]);
        Ok(match &self.prefix {
            Some(prefix) => ObjectPath::from(format!("{prefix}/{name}")),
            None => ObjectPath::from(name),
        })
    }

    fn store(&self) -> Result<&Arc<dyn ObjectStore>> {
        self.inner.as_ref().ok_or(ObjectError::Disabled)
    }

    /// Writes `data` under `key` (its SHA-256 hex, see [`crate::kb::codec::sha256_hex`]); the
    /// same file twice is the same object. Returns once the store has it.
    pub async fn put(&self, key: &str, data: Bytes) -> Result<()> {
        let path = self.path(key)?;
        self.store()?.put(&path, PutPayload::from(data)).await?;
        Ok(())
    }

    /// The file under `key`.
    pub async fn get(&self, key: &str) -> Result<Bytes> {
        let path = self.path(key)?;
        let found = self.store()?.get(&path).await?;
        Ok(found.bytes().await?)
    }

    /// Deletes the file under `key`; a file already gone is not an error.
    pub async fn delete(&self, key: &str) -> Result<()> {
        let path = self.path(key)?;
        match self.store()?.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// `<folder of the SQLite file>/snapshots`; for an in-memory SQLite database a folder in the
/// temporary directory, and for PostgreSQL `snapshots` in the working directory (use `s3://` when
/// workers run on other machines).
pub fn default_folder(database_url: &str) -> PathBuf {
    let Some(rest) = database_url.strip_prefix("sqlite:") else {
        return PathBuf::from("snapshots");
    };
    let file = rest.trim_start_matches("//");
    let file = file.split('?').next().unwrap_or(file);
    if file.is_empty() || file.contains(":memory:") {
        return std::env::temp_dir().join(format!("faultline-snapshots-{}", std::process::id()));
    }
    match Path::new(file).parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.join("snapshots"),
        _ => PathBuf::from("snapshots"),
    }
}

fn is_loopback_http(endpoint: &str) -> bool {
    let Some(rest) = endpoint.strip_prefix("http://") else {
        return false;
    };
    let host = rest.split('/').next().unwrap_or(rest);
    let host = host.rsplit_once(':').map_or(host, |(h, _)| h);
    matches!(host, "127.0.0.1" | "localhost" | "[::1]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_folder_is_beside_the_sqlite_file() {
        assert_eq!(
            default_folder("sqlite:///var/lib/faultline/kb.db?mode=rwc"),
            PathBuf::from("/var/lib/faultline/snapshots")
        );
        assert_eq!(
            default_folder("sqlite://faultline.db"),
            PathBuf::from("snapshots")
        );
        assert_eq!(default_folder("postgres://u@h/db"), PathBuf::from("snapshots"));
    }

    #[test]
    fn only_sha256_keys_are_paths() {
        let store = SnapshotStore::disabled();
        assert!(matches!(
            store.path("../../etc/passwd"),
            Err(ObjectError::BadKey(_))
        ));
        let key = crate::kb::codec::sha256_hex(b"x");
        assert_eq!(
            store.path(&key).map(|p| p.to_string()).ok(),
            Some(format!("{}/{key}", &key[..2]))
        );
    }

    #[test]
    fn plain_http_is_allowed_on_loopback_only() {
        assert!(is_loopback_http("http://127.0.0.1:5000"));
        assert!(is_loopback_http("http://localhost:9000/"));
        assert!(!is_loopback_http("http://minio.internal:9000"));
        assert!(!is_loopback_http("https://127.0.0.1"));
    }

    #[test]
    fn settings_that_are_neither_folders_nor_s3_are_refused() {
        assert!(matches!(
            SnapshotStore::open("gs://bucket", "sqlite://x.db"),
            Err(ObjectError::Config { .. })
        ));
    }

    #[tokio::test]
    async fn a_local_folder_keeps_files_by_their_hash() {
        let dir = std::env::temp_dir().join(format!("faultline-objects-{}", std::process::id()));
        let store = SnapshotStore::local(&dir).unwrap_or_else(|e| panic!("{e}"));
        let data = Bytes::from_static(b"tensors");
        let key = crate::kb::codec::sha256_hex(&data);
        store
            .put(&key, data.clone())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(dir.join(&key[..2]).join(&key).is_file());
        assert_eq!(store.get(&key).await.ok(), Some(data));
        store.delete(&key).await.unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(store.get(&key).await, Err(ObjectError::NotFound(_))));
        assert!(store.delete(&key).await.is_ok(), "deleting twice is fine");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
