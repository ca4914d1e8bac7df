//! The migrations of each backend, embedded in the binary (`migrations/<backend>/NNNN_name.sql`).

use std::borrow::Cow;

use sqlx::SqlSafeStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};

use super::Backend;

/// (version, description, SQL) for SQLite.
const SQLITE: &[(i64, &str, &str)] = &[
    (
        1,
        "knowledge base",
        include_str!("../../migrations/sqlite/0001_knowledge_base.sql"),
    ),
    (
        2,
        "replay",
        include_str!("../../migrations/sqlite/0002_replay.sql"),
    ),
    (
        3,
        "snapshot object keys",
        include_str!("../../migrations/sqlite/0003_snapshot_object_keys.sql"),
    ),
    (
        4,
        "incidents diagnosed",
        include_str!("../../migrations/sqlite/0004_incidents_diagnosed.sql"),
    ),
    (
        5,
        "server secrets",
        include_str!("../../migrations/sqlite/0005_server_secrets.sql"),
    ),
    (
        6,
        "incident bundles",
        include_str!("../../migrations/sqlite/0006_incident_bundles.sql"),
    ),
    (
        7,
        "kept as",
        include_str!("../../migrations/sqlite/0007_kept_as.sql"),
    ),
];

/// (version, description, SQL) for PostgreSQL: the same versions as SQLite.
const POSTGRES: &[(i64, &str, &str)] = &[
    (
        1,
        "knowledge base",
        include_str!("../../migrations/postgres/0001_knowledge_base.sql"),
    ),
    (
        2,
        "replay",
        include_str!("../../migrations/postgres/0002_replay.sql"),
    ),
    (
        3,
        "snapshot object keys",
        include_str!("../../migrations/postgres/0003_snapshot_object_keys.sql"),
    ),
    (
        4,
        "incidents diagnosed",
        include_str!("../../migrations/postgres/0004_incidents_diagnosed.sql"),
    ),
    (
        5,
        "server secrets",
        include_str!("../../migrations/postgres/0005_server_secrets.sql"),
    ),
    (
        6,
        "incident bundles",
        include_str!("../../migrations/postgres/0006_incident_bundles.sql"),
    ),
    (
        7,
        "kept as",
        include_str!("../../migrations/postgres/0007_kept_as.sql"),
    ),
];

/// The migrator of a backend.
pub fn migrator(backend: Backend) -> Migrator {
    migrator_up_to(backend, i64::MAX)
}

/// The migrator of a backend that stops after version `last`.
fn migrator_up_to(backend: Backend, last: i64) -> Migrator {
    let list = match backend {
        Backend::Sqlite => SQLITE,
        Backend::Postgres => POSTGRES,
    };
    Migrator::with_migrations(
        list.iter()
            .filter(|(version, _, _)| *version <= last)
            .map(|(version, description, sql)| {
                Migration::new(
                    *version,
                    Cow::Borrowed(*description),
                    MigrationType::Simple,
                    sql.into_sql_str(),
                    false,
                )
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_backends_have_the_same_versions_and_every_file_is_embedded() {
        let versions = |l: &[(i64, &str, &str)]| l.iter().map(|m| m.0).collect::<Vec<_>>();
        assert_eq!(versions(SQLITE), versions(POSTGRES));
        for (dir, list) in [("sqlite", SQLITE), ("postgres", POSTGRES)] {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("migrations")
                .join(dir);
            let files = std::fs::read_dir(&path).map(|d| d.count()).unwrap_or(0);
            assert_eq!(
                files,
                list.len(),
                "a migration file in {} is not embedded",
                path.display()
            );
        }
    }

    #[tokio::test]
    async fn incidents_stored_before_the_diagnosed_column_are_marked_by_their_rules() {
        sqlx::any::install_default_drivers();
        let path = std::env::temp_dir().join(format!("faultline-migration-4-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let url = format!("sqlite://{}?mode=rwc", path.display());
        let pool = sqlx::AnyPool::connect(&url)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let before = migrator_up_to(Backend::Sqlite, 3).run(&pool).await;
        assert!(before.is_ok(), "{before:?}");
        let old_rows = sqlx::raw_sql(
            "INSERT INTO logs (hash, bytes, lines, data) VALUES ('h', 1, 1, x'00');
             INSERT INTO incidents (created_at, log_hash, tags, lines, diagnosis)
                  VALUES (1, 'h', '[]', 1, x'00'), (2, 'h', '[]', 1, x'00'), (3, 'h', '[]', 1, x'00');
             INSERT INTO incident_rules (incident_id, rule, role, created_at)
                  VALUES (1, 'oom.generic', 'root', 1), (1, 'cuda.init_warning', 'context', 1),
                         (2, 'cuda.init_warning', 'context', 2);",
        )
        .execute(&pool)
        .await;
        assert!(old_rows.is_ok(), "{old_rows:?}");

        let after = migrator(Backend::Sqlite).run(&pool).await;
        assert!(after.is_ok(), "{after:?}");
        let marked: Vec<(i64, i64)> = sqlx::query_as("SELECT id, diagnosed FROM incidents ORDER BY id")
            .fetch_all(&pool)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            marked,
            vec![(1, 1), (2, 0), (3, 0)],
            "a root cause marks an incident; context alone or nothing does not"
        );
        pool.close().await;
        let _ = std::fs::remove_file(&path);
    }
}
