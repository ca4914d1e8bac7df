//! Snapshot storage: tensor snapshot files through the `object_store` crate, each upload under its
//! own key (see [`new_key`]).
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
    /// A key that [`new_key`] did not make (nor a SHA-256 hex digest: the keys of files stored
    /// before uploads had keys of their own).
    #[error("{0:?} is not a snapshot key")]
    BadKey(String),
    /// The system gave no random bytes for a key.
    #[error("no randomness for a snapshot key: {0}")]
    NoRandomness(String),
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

    /// Files in a local folder (created when missing, readable by its owner only).
    pub fn local(dir: &Path) -> Result<Self> {
        let config = |reason: String| ObjectError::Config {
            setting: dir.display().to_string(),
            reason,
        };
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        // Snapshots hold users' tensors: the folder is its owner's alone.
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder
            .create(dir)
            .map_err(|e| config(format!("cannot create the folder: {e}")))?;
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
        if !is_key(key) {
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

    /// Writes `data` under `key` (from [`new_key`]). Returns once the store has it.
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

/// A key for a new upload of the file whose SHA-256 hex is `sha256`: `<sha256>.<16 random hex
/// digits>`. The same bytes uploaded twice get two keys, so that deleting the file of one upload
/// (retention) never takes the file of another; the hash in front keeps the files findable.
pub fn new_key(sha256: &str) -> Result<String> {
    let mut token = [0u8; 8];
    getrandom::fill(&mut token).map_err(|e| ObjectError::NoRandomness(e.to_string()))?;
    let key = format!("{sha256}.{}", crate::kb::codec::hex(&token));
    if is_key(&key) {
        Ok(key)
    } else {
        Err(ObjectError::BadKey(key))
    }
}

/// `<64 lower-case hex>` (a file stored before uploads had keys of their own) or
/// `<64 lower-case hex>.<16 lower-case hex>`: nothing that could climb out of the store's folder.
fn is_key(key: &str) -> bool {
    let is_hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    match key.split_once('.') {
        Some((hash, token)) => is_hex(hash, 64) && is_hex(token, 16),
        None => is_hex(key, 64),
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
    fn only_upload_keys_and_bare_hashes_are_paths() {
        let store = SnapshotStore::disabled();
        let hash = crate::kb::codec::sha256_hex(b"x");
        for bad in [
            "../../etc/passwd".to_owned(),
            format!("{hash}."),
            format!("{hash}./../x"),
            format!("{hash}.ABCDEF0123456789"),
            hash[..63].to_owned(),
        ] {
            assert!(matches!(store.path(&bad), Err(ObjectError::BadKey(_))), "{bad}");
        }
        let key = new_key(&hash).unwrap_or_else(|e| panic!("{e}"));
        for key in [&hash, &key] {
            assert_eq!(
                store.path(key).map(|p| p.to_string()).ok(),
                Some(format!("{}/{key}", &hash[..2]))
            );
        }
    }

    #[test]
    fn the_same_bytes_uploaded_twice_get_two_keys_that_start_with_their_hash() {
        let hash = crate::kb::codec::sha256_hex(b"tensors");
        let (a, b) = (new_key(&hash), new_key(&hash));
        let (Ok(a), Ok(b)) = (a, b) else {
            panic!("keys");
        };
        assert_ne!(a, b);
        assert!(a.starts_with(&format!("{hash}.")) && b.starts_with(&format!("{hash}.")));
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
    async fn a_local_folder_keeps_files_by_their_key() {
        let dir = std::env::temp_dir().join(format!("faultline-objects-{}", std::process::id()));
        let store = SnapshotStore::local(&dir).unwrap_or_else(|e| panic!("{e}"));
        let data = Bytes::from_static(b"tensors");
        let key = new_key(&crate::kb::codec::sha256_hex(&data)).unwrap_or_else(|e| panic!("{e}"));
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
