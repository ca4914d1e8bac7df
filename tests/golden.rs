//! Golden tests: every log in tests/fixtures/logs parses to the events recorded in
//! tests/snapshots. Review changes with `INSTA_UPDATE=always cargo test --test golden` and a diff.

use std::path::Path;

fn fixture_logs() -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/logs");
    let mut logs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "log" || x == "txt"))
        .collect();
    logs.sort();
    logs
}

#[test]
fn every_fixture_log_parses_to_its_recorded_events() {
    let logs = fixture_logs();
    assert!(logs.len() >= 10, "fixtures missing: {logs:?}");
    for path in logs {
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let parsed = faultline::parse::parse_bytes(&bytes);
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("log")
            .to_owned();
        insta::assert_json_snapshot!(format!("parse_{name}"), parsed);
    }
}
