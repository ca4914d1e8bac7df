//! `faultline analyze` given a distributed job: several files, a folder, a `.tar.gz` or a `.zip`
//! are one bundle; archives over the limits and missing files are refused with exit code 2; a
//! single log is still analyzed as before. A binary file that is no flight-recorder dump is left
//! out with the warning the service gives; a bundle of nothing else, or one such file alone, is
//! refused with exit code 2; a flight-recorder pickle alone is read as a one-file bundle.

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Output;

use flate2::Compression;
use flate2::write::GzEncoder;

const RAISES: &str = "[rank2]:[I1127 05:00:10.000000 train.py:10] step 41\n[rank2]: Traceback (most recent call last):\n[rank2]:   File \"train.py\", line 12, in <module>\n[rank2]:     x = table[idx]\n[rank2]: IndexError: index 7 is out of bounds for dimension 0 with size 4\n";

fn waits(rank: u32) -> String {
    format!(
        "[rank{rank}]:[E1127 05:10:10.000000 ProcessGroupNCCL.cpp:607] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=41, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.\n"
    )
}

/// The job's three rank logs: rank 2 raises, ranks 0 and 1 wait for it.
fn job() -> Vec<(String, String)> {
    vec![
        ("rank0.log".to_owned(), waits(0)),
        ("rank1.log".to_owned(), waits(1)),
        ("rank2.log".to_owned(), RAISES.to_owned()),
    ]
}

/// A fresh folder under the target directory, named for the test.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cli_bundle-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

fn write(path: &Path, bytes: &[u8]) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{}: {e}", parent.display()));
    }
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn faultline(args: &[&str], stdin: &str) -> Output {
    support::run_with_stdin(args, stdin)
}

fn utf8(path: &Path) -> &str {
    path.to_str()
        .unwrap_or_else(|| panic!("not a UTF-8 path: {}", path.display()))
}

fn json_of(o: &Output) -> serde_json::Value {
    assert_eq!(
        o.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&o.stdout)))
}

/// Asserts the bundle diagnosis names rank 2 and folds ranks 0 and 1.
fn names_rank_2(d: &serde_json::Value) {
    assert_eq!(d["first_fault"]["rank"], 2, "{d:#}");
    assert_eq!(d["first_fault"]["kind"], "rank_failure");
    assert_eq!(d["cascades"][0]["ranks"], serde_json::json!([0, 1]), "{d:#}");
}

fn refused(o: &Output, words: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert!(err.contains(words), "stderr does not say {words:?}: {err}");
}

#[test]
fn several_files_are_read_as_one_job() {
    let dir = scratch("files");
    let mut args = vec!["analyze".to_owned(), "--format".to_owned(), "json".to_owned()];
    for (name, text) in job() {
        write(&dir.join(&name), text.as_bytes());
        args.push(dir.join(&name).display().to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    names_rank_2(&json_of(&faultline(&args, "")));
}

#[test]
fn a_folder_is_read_with_its_subfolders() {
    let dir = scratch("folder");
    for (i, (name, text)) in job().into_iter().enumerate() {
        write(&dir.join(format!("node-{i}")).join(name), text.as_bytes());
    }
    let d = json_of(&faultline(&["analyze", "--format", "json", utf8(&dir)], ""));
    names_rank_2(&d);
    assert_eq!(d["files"].as_array().map(Vec::len), Some(3));
}

/// The first bytes of an ELF core dump: a binary file faultline does not read.
const CORE_DUMP: &[u8] = b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x04\x00\x3e\x00";

#[test]
fn a_binary_file_in_a_folder_is_left_out_with_the_warning_the_service_gives() {
    let dir = scratch("binary");
    for (name, text) in job() {
        write(&dir.join(name), text.as_bytes());
    }
    write(&dir.join("core.1234"), CORE_DUMP);
    let d = json_of(&faultline(&["analyze", "--format", "json", utf8(&dir)], ""));
    names_rank_2(&d);
    assert_eq!(d["files"].as_array().map(Vec::len), Some(3), "{d:#}");
    let warning = d["warnings"]
        .as_array()
        .and_then(|w| w.iter().find(|w| w["code"] == "binary_left_out"))
        .unwrap_or_else(|| panic!("no warning for core.1234: {d:#}"));
    assert_eq!(
        warning["message"],
        r#"file "core.1234": binary, not a format faultline reads; not analysed and not kept"#
    );
    let human = faultline(&["analyze", utf8(&dir)], "");
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains(r#"warning: file "core.1234": binary, not a format"#),
        "{text}"
    );
}

#[test]
fn a_bundle_of_binary_files_none_of_them_a_dump_is_refused_with_exit_2() {
    let dir = scratch("only-binary");
    write(&dir.join("core.1234"), CORE_DUMP);
    write(&dir.join("core.5678"), CORE_DUMP);
    refused(
        &faultline(&["analyze", utf8(&dir)], ""),
        r#"no file of the bundle can be read ("core.1234": binary, not a format faultline reads"#,
    );
}

#[test]
fn a_single_binary_file_is_refused_in_the_bundle_s_words_not_read_as_text() {
    let dir = scratch("single-binary");
    let core = dir.join("core.1234");
    write(&core, CORE_DUMP);
    refused(
        &faultline(&["analyze", utf8(&core)], ""),
        r#"core.1234": binary, not a format faultline reads"#,
    );
}

#[test]
fn a_single_flight_recorder_pickle_is_read_as_a_one_file_bundle() {
    let dump = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/distributed/raise-value-2nodes-torch2.15.0-gloo-n8/host-a/fr_trace/fr_0"
    );
    let o = faultline(&["analyze", "--format", "json", dump], "");
    assert_eq!(o.status.code(), Some(1), "one healthy rank's dump: nothing found");
    let d: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&o.stdout)));
    let files = d["files"].as_array().unwrap_or_else(|| panic!("no files: {d:#}"));
    assert_eq!(files.len(), 1, "{d:#}");
    assert_eq!(files[0]["kind"], "flight_recorder", "{d:#}");
    assert_eq!(
        d["coverage"]["world_size"], 8,
        "the dump's group gives the job's size: {d:#}"
    );
    assert_eq!(d["coverage"]["with_dump"], serde_json::json!([0]), "{d:#}");
}

/// A ustar header for a regular file.
fn tar_header(name: &str, size: usize) -> [u8; 512] {
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name.as_bytes());
    h[100..107].copy_from_slice(b"0000644");
    h[108..115].copy_from_slice(b"0000000");
    h[116..123].copy_from_slice(b"0000000");
    h[124..135].copy_from_slice(format!("{size:011o}").as_bytes());
    h[136..147].copy_from_slice(b"00000000000");
    h[156] = b'0';
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|b| u32::from(*b)).sum();
    h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
    h
}

fn tar_gz(files: &[(String, String)]) -> Vec<u8> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
    for (name, text) in files {
        let mut block = tar_header(name, text.len()).to_vec();
        block.extend_from_slice(text.as_bytes());
        block.resize(512 + text.len().div_ceil(512) * 512, 0);
        gz.write_all(&block).unwrap_or_else(|e| panic!("{e}"));
    }
    gz.write_all(&[0u8; 1024]).unwrap_or_else(|e| panic!("{e}"));
    gz.finish().unwrap_or_else(|e| panic!("{e}"))
}

fn zip(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, bytes) in files {
        out.start_file(name.as_str(), zip::write::SimpleFileOptions::default())
            .unwrap_or_else(|e| panic!("{e}"));
        out.write_all(bytes).unwrap_or_else(|e| panic!("{e}"));
    }
    out.finish().unwrap_or_else(|e| panic!("{e}")).into_inner()
}

#[test]
fn a_tar_gz_is_read_as_one_job() {
    let dir = scratch("targz");
    let path = dir.join("job.tar.gz");
    write(&path, &tar_gz(&job()));
    let d = json_of(&faultline(&["analyze", "--format", "json", utf8(&path)], ""));
    names_rank_2(&d);
}

#[test]
fn a_zip_is_read_as_one_job() {
    let dir = scratch("zip");
    let path = dir.join("job.zip");
    let files: Vec<(String, Vec<u8>)> = job().into_iter().map(|(n, t)| (n, t.into_bytes())).collect();
    write(&path, &zip(&files));
    let d = json_of(&faultline(&["analyze", "--format", "json", utf8(&path)], ""));
    names_rank_2(&d);
}

#[test]
fn the_json_document_has_the_bundle_diagnosis_shape() {
    let dir = scratch("shape");
    for (name, text) in job() {
        write(&dir.join(name), text.as_bytes());
    }
    let d = json_of(&faultline(&["analyze", "--format", "json", utf8(&dir)], ""));
    assert_eq!(d["format_version"], 1);
    let fault = &d["first_fault"];
    for key in ["kind", "summary", "rank", "confidence", "reasons", "evidence"] {
        assert!(!fault[key].is_null(), "first_fault has no {key}: {fault:#}");
    }
    assert_eq!(fault["collective"]["op"], "ALLREDUCE");
    assert_eq!(fault["collective"]["seq"], 41);
    for key in ["cascades", "ranks", "timeline", "files", "collectives"] {
        assert!(d[key].is_array(), "no {key} list: {d:#}");
    }
    assert_eq!(d["coverage"]["with_log"], serde_json::json!([0, 1, 2]));
    let ranks = d["ranks"]
        .as_array()
        .map(|r| r.iter().map(|r| r["outcome"].clone()).collect::<Vec<_>>());
    assert_eq!(
        ranks,
        Some(vec!["cascade".into(), "cascade".into(), "fault".into()])
    );
    // Each file carries its own single-log diagnosis.
    assert!(
        d["files"][2]["diagnosis"]["findings"].is_array(),
        "{:#}",
        d["files"][2]
    );
}

#[test]
fn a_zip_that_inflates_past_the_limit_is_refused_with_exit_2() {
    // Five entries, each declaring 4 GiB in the central directory: 20 GiB in all.
    let files: Vec<(String, Vec<u8>)> = (0..5)
        .map(|i| (format!("rank{i}.log"), vec![b'a'; 1024]))
        .collect();
    let mut bytes = zip(&files);
    let mut at = 0;
    let mut patched = 0;
    while let Some(i) = bytes[at..].windows(4).position(|w| w == b"PK\x01\x02") {
        let header = at + i;
        bytes[header + 24..header + 28].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
        patched += 1;
        at = header + 4;
    }
    assert_eq!(patched, 5, "the central directory lists the five entries");
    let dir = scratch("bomb");
    let path = dir.join("bomb.zip");
    write(&path, &bytes);
    refused(&faultline(&["analyze", utf8(&path)], ""), "inflates to more than");
}

#[test]
fn a_tar_with_too_many_entries_is_refused_with_exit_2() {
    let files: Vec<(String, String)> = (0..20_001).map(|i| (format!("f{i}"), String::new())).collect();
    let dir = scratch("entries");
    let path = dir.join("many.tar.gz");
    write(&path, &tar_gz(&files));
    refused(&faultline(&["analyze", utf8(&path)], ""), "more than 20000 files");
}

#[test]
fn a_missing_file_among_several_is_refused_with_exit_2() {
    let dir = scratch("missing");
    write(&dir.join("rank0.log"), waits(0).as_bytes());
    let missing = dir.join("rank9.log");
    refused(
        &faultline(&["analyze", utf8(&dir.join("rank0.log")), utf8(&missing)], ""),
        "cannot open",
    );
}

#[test]
fn a_single_file_is_analyzed_as_one_log_as_before() {
    let dir = scratch("single");
    let path = dir.join("rank2.log");
    write(&path, RAISES.as_bytes());
    let from_file = faultline(&["analyze", "--format", "json", utf8(&path)], "");
    let from_stdin = faultline(&["analyze", "--format", "json"], RAISES);
    assert_eq!(from_file.status.code(), Some(0));
    assert_eq!(
        from_file.stdout, from_stdin.stdout,
        "a file and standard input give the same diagnosis"
    );
    let d: serde_json::Value = serde_json::from_slice(&from_file.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert!(d["first_fault"].is_null() && d["findings"].is_array(), "{d:#}");
}
