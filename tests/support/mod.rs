//! Shared test helpers: temporary SQLite files, throwaway PostgreSQL databases, a WebDriver client.
#![allow(dead_code)]

pub mod webdriver;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

use faultline::kb::Store;
use sqlx::{Connection, Executor};

/// A temporary directory with a SQLite file in it, removed on drop.
pub struct TempDb {
    pub dir: PathBuf,
}

impl TempDb {
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "faultline-test-{name}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        Self { dir }
    }

    pub fn url(&self) -> String {
        format!("sqlite://{}", self.dir.join("faultline.db").display())
    }

    /// The knowledge base in this directory, migrated.
    pub async fn store(&self) -> Store {
        Store::open_and_migrate(&self.url(), &Default::default())
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether the tests run under CI: `CI` set to anything but empty or `false` (.ci/run sets it).
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false")
}

/// `part` of the suite cannot run here: it `needs` something missing. Under CI that is a failure
/// (CI provides everything, so it can never pass by skipping); by hand the part is skipped with a
/// loud line, written straight to stderr (the harness swallows `eprintln!` of passing tests).
pub fn skip_unless_ci(part: &str, needs: &str) {
    assert!(!under_ci(), "CI is set but {part} cannot run: they need {needs}");
    let _ = writeln!(std::io::stderr(), "\n*** SKIPPED: {part} need {needs} ***\n");
}

/// Whether `python` runs and imports numpy and safetensors.
fn has_numpy_and_safetensors(python: &str) -> bool {
    Command::new(python)
        .args(["-c", "import numpy, safetensors"])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn find_numpy_python() -> Option<String> {
    if let Ok(python) = std::env::var("FAULTLINE_PYTHON")
        && !python.is_empty()
    {
        assert!(
            has_numpy_and_safetensors(&python),
            "FAULTLINE_PYTHON={python} cannot import numpy and safetensors (pip install numpy safetensors)"
        );
        return Some(python);
    }
    has_numpy_and_safetensors("python3").then(|| "python3".to_owned())
}

/// A Python with numpy and safetensors: `FAULTLINE_PYTHON`, else `python3` when it has both;
/// None when there is none, which skips `part` (see [`skip_unless_ci`]).
pub fn numpy_python(part: &str) -> Option<&'static str> {
    static PYTHON: OnceLock<Option<String>> = OnceLock::new();
    let found = PYTHON.get_or_init(find_numpy_python).as_deref();
    if found.is_none() {
        skip_unless_ci(
            part,
            "a Python with numpy and safetensors: set FAULTLINE_PYTHON (e.g. target/ci-venv/bin/python; .ci/run does) or pip install numpy safetensors",
        );
    }
    found
}

/// The PostgreSQL server tests may use; its absence skips the PostgreSQL half of a test (see
/// [`skip_unless_ci`]).
pub fn postgres_url() -> Option<String> {
    match std::env::var("TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            skip_unless_ci(
                "PostgreSQL tests",
                "TEST_POSTGRES_URL (e.g. postgres://postgres@127.0.0.1:55432/postgres; .ci/run sets it)",
            );
            None
        }
    }
}

/// A fresh, empty PostgreSQL database for one test, migrated.
pub async fn postgres_store(name: &str) -> Option<Store> {
    let admin = postgres_url()?;
    let db = format!("faultline_test_{name}_{}", std::process::id());
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(&admin)
        .await
        .unwrap_or_else(|e| panic!("cannot reach {admin}: {e}"));
    let drop = format!("DROP DATABASE IF EXISTS {db}");
    let create = format!("CREATE DATABASE {db}");
    conn.execute(sqlx::AssertSqlSafe(drop))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    conn.execute(sqlx::AssertSqlSafe(create))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let url = match admin.rfind('/') {
        Some(i) if i > "postgres://".len() => format!("{}/{db}", &admin[..i]),
        _ => format!("{admin}/{db}"),
    };
    Some(
        Store::open_and_migrate(&url, &Default::default())
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
}

/// The URL of a fresh PostgreSQL database (not migrated), for server tests.
pub async fn postgres_database(name: &str) -> Option<String> {
    let store = postgres_store(name).await?;
    store.close().await;
    let admin = postgres_url()?;
    let db = format!("faultline_test_{name}_{}", std::process::id());
    let i = admin.rfind('/')?;
    Some(format!("{}/{db}", &admin[..i]))
}

/// Analyzes `log` with the embedded rules and stores it as an incident; returns its id.
pub async fn stored_incident(store: &Store, log: &str) -> i64 {
    let rules = faultline::rules::RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let diagnosis = faultline::diagnose::analyze_str(&rules, log);
    let (writer, task) = faultline::kb::writer::Writer::spawn(store.clone(), 8);
    let stored = writer
        .write(faultline::kb::writer::NewIncident::prepare(
            log,
            &diagnosis,
            faultline::kb::writer::IncidentMeta::default(),
            faultline::kb::now_ms(),
        ))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    drop(writer);
    let _ = task.await;
    stored.incident_id
}

/// The faultline binary with the environment the tests expect: the embedded rules, a quiet log.
pub fn faultline() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_faultline"));
    command.env_remove("FAULTLINE_RULES").env("FAULTLINE_LOG", "warn");
    command
}

/// Runs `faultline ARGS` (see [`faultline`]) with `stdin` as its standard input and waits for it.
pub fn run_with_stdin(args: &[&str], stdin: &str) -> std::process::Output {
    let mut child = faultline()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run faultline: {e}"));
    if let Some(mut input) = child.stdin.take() {
        let _ = input.write_all(stdin.as_bytes());
    }
    child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("faultline did not finish: {e}"))
}

/// Starts `command` (a `faultline` command line) and reads the first line it prints, then keeps
/// draining its output (a closed pipe would fail its next line); returns the child and that line.
pub fn spawn_reading_first_line(mut command: Command) -> (Child, String) {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start faultline: {e}"));
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let mut stdout = BufReader::new(stdout);
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap_or_else(|e| panic!("{e}"));
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    (child, line)
}

/// Starts `faultline serve` on a free loopback port over `database` with no rate limit (`command`
/// is [`faultline`] with any environment a test adds); returns the child and its base URL.
pub fn start_server(mut command: Command, database: &str) -> (Child, String) {
    command.args([
        "serve",
        "--bind",
        "127.0.0.1:0",
        "--rate-limit",
        "0",
        "--database",
        database,
    ]);
    let (child, line) = spawn_reading_first_line(command);
    let base = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("unexpected first line: {line}"))
        .to_owned();
    (child, base)
}

/// A token named `name` made with `faultline token create` on `database`.
pub fn create_token(database: &str, name: &str) -> String {
    let created = faultline()
        .args(["token", "create", "--name", name, "--database", database])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    String::from_utf8_lossy(&created.stdout).trim().to_owned()
}

/// `doc[key]` as an integer (an incident id, a group id); panics naming the key and showing the
/// document when it is missing or not an integer, rather than letting an id of 0 go on.
pub fn json_i64(doc: &serde_json::Value, key: &str) -> i64 {
    doc[key]
        .as_i64()
        .unwrap_or_else(|| panic!("expected an integer {key:?} in {doc}"))
}

/// `doc[key]` as a string (a URL, an id); panics naming the key and showing the document when it
/// is missing or not a string, rather than letting an empty string go on.
pub fn json_str<'a>(doc: &'a serde_json::Value, key: &str) -> &'a str {
    doc[key]
        .as_str()
        .unwrap_or_else(|| panic!("expected a string {key:?} in {doc}"))
}

/// The held-out corpus (`tests/fixtures/corpus/held_out.jsonl`): real logs from public threads,
/// collected in rounds after the rules (see tests/fixtures/README.md).
pub fn held_out_cases() -> Vec<faultline::eval::Case> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/corpus/held_out.jsonl"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    faultline::eval::read_cases(&text, path).unwrap_or_else(|e| panic!("{e}"))
}
