//! The HTTP API over a real socket: the server runs in-process on a loopback port with a temporary
//! SQLite file, and again on PostgreSQL when `TEST_POSTGRES_URL` is set.

#[path = "../support/mod.rs"]
mod support;

mod bundles;
mod scenarios;
mod server;

use faultline::config::Config;
use faultline::service::Access;

/// The scenarios' server: a team server where anyone reads and writes need a token.
fn sqlite_config(db: &support::TempDb) -> Config {
    Config {
        database: db.url(),
        access: Access::TokenForWrites,
        ..Config::default()
    }
}

#[test]
fn the_api_works_on_sqlite() {
    let db = support::TempDb::new("api");
    scenarios::all(&sqlite_config(&db));
}

#[test]
fn the_api_works_on_postgres() {
    let runtime = tokio::runtime::Runtime::new().unwrap_or_else(|e| panic!("{e}"));
    let Some(url) = runtime.block_on(support::postgres_database("api")) else {
        return;
    };
    scenarios::all(&Config {
        database: url,
        access: Access::TokenForWrites,
        ..Config::default()
    });
}

#[test]
fn limits_and_policies_are_enforced() {
    let db = support::TempDb::new("api-limits");
    scenarios::limits(&db);
}

#[test]
fn bundles_work_on_sqlite() {
    let db = support::TempDb::new("api-bundles");
    bundles::all(&server::TestServer::start(sqlite_config(&db)));
}

#[test]
fn bundles_work_on_postgres() {
    let runtime = tokio::runtime::Runtime::new().unwrap_or_else(|e| panic!("{e}"));
    let Some(url) = runtime.block_on(support::postgres_database("api_bundles")) else {
        return;
    };
    bundles::all(&server::TestServer::start(Config {
        database: url,
        access: Access::TokenForWrites,
        ..Config::default()
    }));
}

#[test]
fn a_zip_bomb_is_refused_with_a_json_error() {
    let db = support::TempDb::new("api-bomb");
    let config = Config {
        bundle_max_inflated_bytes: 1 << 20,
        ..sqlite_config(&db)
    };
    bundles::a_zip_bomb_is_refused(&server::TestServer::start(config));
}
