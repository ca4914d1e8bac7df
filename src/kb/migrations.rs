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
];

/// The migrator of a backend.
pub fn migrator(backend: Backend) -> Migrator {
    let list = match backend {
        Backend::Sqlite => SQLITE,
        Backend::Postgres => POSTGRES,
    };
    Migrator::with_migrations(
        list.iter()
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
}
