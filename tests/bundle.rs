//! A distributed job's files in, the first fault out: bundles written by hand in each test.

use faultline::bundle::analyze_files;
use faultline::bundle::xid::XidCatalog;
use faultline::model::{BundleDiagnosis, Confidence, FaultKind, XidOrigin};
use faultline::rules::RuleSet;
use proptest::prelude::*;

fn diagnose(files: &[(&str, String)]) -> BundleDiagnosis {
    let rules = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let catalog = XidCatalog::embedded().unwrap_or_else(|e| panic!("{e}"));
    let borrowed: Vec<(&str, &[u8])> = files.iter().map(|(n, t)| (*n, t.as_bytes())).collect();
    analyze_files(&rules, catalog, &borrowed)
}

fn timeout(rank: u32, stamp: &str, seq: u64) -> String {
    format!(
        "[rank{rank}]:[E{stamp} ProcessGroupNCCL.cpp:607] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.\n"
    )
}

fn index_error(rank: u32, stamp: &str) -> String {
    format!(
        "[rank{rank}]:[I{stamp} train.py:10] step 41\n[rank{rank}]: Traceback (most recent call last):\n[rank{rank}]:   File \"train.py\", line 12, in <module>\n[rank{rank}]:     x = table[idx]\n[rank{rank}]: IndexError: index 7 is out of bounds for dimension 0 with size 4\n"
    )
}

fn first(d: &BundleDiagnosis) -> &faultline::model::FirstFault {
    d.first_fault
        .as_ref()
        .unwrap_or_else(|| panic!("no first fault: {d:#?}"))
}

#[test]
fn a_rank_that_raises_is_the_first_fault_and_the_waiting_ranks_are_one_cascade() {
    let mut files = vec![("rank2.log", index_error(2, "1127 05:00:10.000000"))];
    for rank in [0, 1, 3] {
        files.push((
            ["rank0.log", "rank1.log", "", "rank3.log"][rank as usize],
            timeout(rank, "1127 05:10:10.000000", 41),
        ));
    }
    let d = diagnose(&files);
    let f = first(&d);
    assert_eq!(
        (f.kind, f.rank, f.confidence),
        (FaultKind::RankFailure, Some(2), Confidence::High)
    );
    assert!(
        f.summary.contains("IndexError") || f.cause.is_some(),
        "{}",
        f.summary
    );
    assert_eq!(d.cascades.len(), 1);
    assert_eq!(d.cascades[0].ranks, vec![0, 1, 3]);
    assert!(
        d.cascades[0]
            .summary
            .starts_with("3 ranks: collective timeout on ALLREDUCE SeqNum 41"),
        "{}",
        d.cascades[0].summary
    );
}

#[test]
fn a_rank_that_never_entered_the_collective_is_named_from_the_others_timeouts() {
    let mut files = Vec::new();
    for rank in 0..3u32 {
        files.push((
            format!("rank{rank}.log"),
            timeout(rank, "1127 05:10:10.000000", 12),
        ));
    }
    files.push((
        "rank3.log".to_owned(),
        "[rank3]: step 11 done\n[rank3]: loading next shard\n".to_owned(),
    ));
    let named: Vec<(&str, String)> = files.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    // Inferred from absence, with no world size: a rank with no file may have stayed out instead.
    let d = diagnose(&named);
    let f = first(&d);
    assert_eq!((f.kind, f.rank), (FaultKind::NeverEntered, Some(3)));
    assert_eq!(f.confidence, Confidence::Low);
    assert_eq!(f.collective.as_ref().and_then(|c| c.seq), Some(12));
    assert!(
        d.missing.iter().any(|m| m.contains("world size")),
        "{:?}",
        d.missing
    );
    // Every rank of a printed world size has a log: medium, never high (no line names it).
    let mut with_world = named.clone();
    with_world[3].1.push_str("[rank3]: WORLD_SIZE=4\n");
    let f = first(&diagnose(&with_world)).clone();
    assert_eq!((f.rank, f.confidence), (Some(3), Confidence::Medium));
    // With a fifth rank in the world and no file of it, the silent rank is not named.
    let mut with_gap = named;
    with_gap[3].1.push_str("[rank3]: WORLD_SIZE=5\n");
    let d = diagnose(&with_gap);
    assert!(
        d.first_fault.as_ref().is_none_or(|f| f.rank.is_none()),
        "{:?}",
        d.first_fault
    );
}

#[test]
fn dumps_show_which_rank_never_enqueued_the_stalled_collective_and_which_rank_has_no_dump() {
    let dump = |enqueued: u64, completed: u64| {
        format!(
            r#"{{"version": "2.10", "pg_config": {{"": {{"name": "", "desc": "", "ranks": "[0, 1, 2, 3]"}}}}, "pg_status": {{"0": {{"last_enqueued_collective": {enqueued}, "last_started_collective": -1, "last_completed_collective": {completed}}}}}}}"#
        )
    };
    let files = vec![
        ("nccl_trace_rank_0", dump(12, 11)),
        ("nccl_trace_rank_1", dump(12, 11)),
        ("nccl_trace_rank_2", dump(11, 11)),
    ];
    let d = diagnose(&files);
    let f = first(&d);
    assert_eq!(
        (f.kind, f.rank, f.confidence),
        (FaultKind::NeverEntered, Some(2), Confidence::High)
    );
    assert_eq!(d.collectives[0].never_entered, vec![2]);
    assert_eq!(d.coverage.world_size, Some(4));
    assert_eq!(d.coverage.without_dump, vec![3]);
}

#[test]
fn ranks_that_disagree_on_a_collectives_size_are_a_desync() {
    let mismatch = |me: u32, other: u32, mine: u32, theirs: u32| {
        format!(
            "[rank{me}]: RuntimeError: Detected mismatch between collectives on ranks. Rank {me} is running collective: CollectiveFingerPrint(SequenceNumber=1, OpType=ALLREDUCE, TensorShape=[{mine}], TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cpu, memory_format=(nullopt))), but Rank {other} is running collective: CollectiveFingerPrint(SequenceNumber=1, OpType=ALLREDUCE, TensorShape=[{theirs}], TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cpu, memory_format=(nullopt))).\n"
        )
    };
    let files = vec![
        ("rank0.log", mismatch(0, 1, 4, 6)),
        ("rank1.log", mismatch(1, 0, 6, 4)),
    ];
    let d = diagnose(&files);
    let f = first(&d);
    assert_eq!(f.kind, FaultKind::Desync);
    assert_eq!(f.collective.as_ref().and_then(|c| c.seq), Some(1));
    assert_eq!(d.collectives[0].desync[0].calls.len(), 2);
}

#[test]
fn an_xid_79_on_a_host_comes_before_the_cuda_error_and_the_timeouts_it_caused() {
    let dmesg = "Nov 27 05:00:00 node-3 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus.\n".to_owned();
    let cuda = "node-3:4242:4300 [0] NCCL INFO comm 0x1 rank 5 nranks 8 cudaDev 0 busId 3b000 commId 0x2 - Init COMPLETE\n[rank5]:[E1127 05:00:02.000000 c10.cpp:1] boom\n[rank5]: RuntimeError: CUDA error: unspecified launch failure\n".to_owned();
    let mut files = vec![
        ("node-3/dmesg.txt".to_owned(), dmesg),
        ("rank5.log".to_owned(), cuda),
    ];
    for rank in [0u32, 1, 2, 3, 4, 6, 7] {
        files.push((
            format!("rank{rank}.log"),
            timeout(rank, "1127 05:10:00.000000", 900),
        ));
    }
    let named: Vec<(&str, String)> = files.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let d = diagnose(&named);
    let f = first(&d);
    assert_eq!(f.kind, FaultKind::Xid, "{}", f.summary);
    assert_eq!(f.host.as_deref(), Some("node-3"));
    assert_eq!(f.rank, Some(5));
    assert_eq!(d.xids[0].settled, XidOrigin::Hardware);
    assert_eq!(d.cascades.iter().map(|c| c.ranks.len()).sum::<usize>(), 7);
}

#[test]
fn an_ambiguous_xid_next_to_a_device_assert_on_the_same_gpu_is_the_applications() {
    let dmesg =
        "Nov 27 05:00:00 node-1 kernel: NVRM: Xid (PCI:0000:3b:00): 13, pid=1, Graphics SM Warp Exception\n"
            .to_owned();
    let assert_log = "node-1:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 3b000 commId 0x2 - Init COMPLETE\n/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1289: indexSelectLargeIndex: block: [0,0,0], thread: [0,0,0] Assertion `srcIndex < srcSelectDimSize` failed.\nRuntimeError: CUDA error: device-side assert triggered\n".to_owned();
    let d = diagnose(&[("node-1/dmesg.txt", dmesg), ("rank0.log", assert_log)]);
    assert_eq!(d.xids[0].origin, XidOrigin::Ambiguous);
    assert_eq!(d.xids[0].settled, XidOrigin::Application);
    let f = first(&d);
    assert_eq!((f.kind, f.rank), (FaultKind::RankFailure, Some(0)));
}

#[test]
fn a_clock_offset_between_two_hosts_is_removed_before_the_election() {
    // node-b's clock is 30 s ahead: both hosts time out in SeqNum 77 at the same moment.
    let host = |h: &str, rank: u32, text: String| {
        text.replace(&format!("[rank{rank}]:"), &format!("{h} [stderr] [rank{rank}]:"))
    };
    let files = vec![
        (
            "rank0.log",
            host("node-a", 0, timeout(0, "1127 05:10:00.000000", 77)),
        ),
        (
            "rank1.log",
            host("node-a", 1, index_error(1, "1127 05:00:10.000000")),
        ),
        (
            "rank2.log",
            host("node-b", 2, timeout(2, "1127 05:10:30.000000", 77)),
        ),
        (
            "rank3.log",
            host(
                "node-b",
                3,
                index_error(3, "1127 05:00:20.000000") + &timeout(3, "1127 05:10:30.000000", 77),
            ),
        ),
    ];
    let d = diagnose(&files);
    assert_eq!(d.clock_offsets.len(), 1, "{:#?}", d.clock_offsets);
    assert_eq!(
        (d.clock_offsets[0].host.as_str(), d.clock_offsets[0].offset_ms),
        ("node-b", 30_000)
    );
    assert_eq!(
        first(&d).rank,
        Some(3),
        "rank 3 raised at 04:59:50 on node-a's clock"
    );
}

#[test]
fn one_interleaved_log_is_split_by_its_rank_prefixes() {
    let log = index_error(2, "1127 05:00:10.000000")
        + &timeout(0, "1127 05:10:10.000000", 5)
        + &timeout(1, "1127 05:10:10.000000", 5);
    let d = diagnose(&[("train.log", log)]);
    assert_eq!(d.files[0].kind, faultline::model::FileKind::InterleavedLog);
    assert_eq!(d.files[0].ranks, vec![0, 1, 2]);
    assert_eq!(first(&d).rank, Some(2));
    assert_eq!(d.cascades[0].ranks, vec![0, 1]);
}

#[test]
fn a_torchrun_error_file_gives_its_ranks_exception_and_time() {
    let error = r#"{"message": {"message": "IndexError: index 7 is out of bounds for dimension 0 with size 4", "extraInfo": {"py_callstack": "Traceback (most recent call last):\n  File \"job.py\", line 11, in main\nIndexError: index 7 is out of bounds for dimension 0 with size 4\n", "timestamp": "1795757937"}}}"#;
    let barrier = "[rank0]: RuntimeError: [Rank 0]: Ranks 2 failed to pass monitoredBarrier in 10000 ms\n";
    let summary = "Root Cause (first observed failure):\n[0]:\n  time      : 2026-11-27_05:51:51\n  host      : node-b\n  rank      : 6 (local_rank: 2)\n  exitcode  : 1 (pid: 29701)\n  error_file: /tmp/logs/run_x1/attempt_0/2/error.json\n  traceback : Traceback (most recent call last):\n  IndexError: index 7 is out of bounds for dimension 0 with size 4\n============================================================\n";
    // The folder names a local rank: alone, it does not say the global one (rank 0's log is
    // not a folder of the same agent, so it says nothing of the agent's ranks).
    let d = diagnose(&[
        ("run_x1/attempt_0/2/error.json", error.to_owned()),
        ("rank0.log", barrier.to_owned()),
    ]);
    let f = first(&d);
    assert_eq!((f.rank, f.kind), (None, FaultKind::RankFailure));
    assert!(f.at_us.is_some());
    assert!(
        d.warnings.iter().any(|w| w.code == "global_rank_unknown"),
        "{:?}",
        d.warnings
    );
    // torchrun's summary ties the folder's error file to global rank 6 on node-b.
    let d = diagnose(&[
        ("node-b/console.log", summary.to_owned()),
        ("run_x1/attempt_0/2/error.json", error.to_owned()),
    ]);
    let f = first(&d);
    assert_eq!(
        (f.rank, f.host.as_deref(), f.local_rank),
        (Some(6), Some("node-b"), Some(2))
    );
    let evidence_ranks: Vec<Option<u32>> = f.evidence.iter().flat_map(|e| &e.lines).map(|l| l.rank).collect();
    assert_eq!(
        evidence_ranks,
        vec![Some(6)],
        "the evidence names the global rank"
    );
}

#[test]
fn a_torchrun_worker_folder_whose_lines_name_its_host_takes_the_global_rank_of_that_hosts_summary_row() {
    let error = r#"{"message": {"message": "IndexError: index 7 is out of bounds for dimension 0 with size 4", "extraInfo": {"py_callstack": "Traceback (most recent call last):\n  File \"job.py\", line 11, in main\nIndexError: index 7 is out of bounds for dimension 0 with size 4\n", "timestamp": "1795757937"}}}"#;
    let failed = "Root Cause (first observed failure):\n[0]:\n  time      : 2026-11-27_05:51:51\n  host      : node-b\n  rank      : 6 (local_rank: 2)\n  exitcode  : 1 (pid: 29701)\n  error_file: /tmp/logs/run_b/attempt_0/2/error.json\n  traceback : IndexError: index 7 is out of bounds for dimension 0 with size 4\n============================================================\n";
    let aborted = "Root Cause (first observed failure):\n[0]:\n  time      : 2026-11-27_06:01:52\n  host      : node-a\n  rank      : 1 (local_rank: 1)\n  exitcode  : -6 (pid: 29611)\n  error_file: <N/A>\n  traceback : Signal 6 (SIGABRT) received by PID 29611\n============================================================\n";
    // No prefix, no error file: only NCCL's `host:pid:tid [dev]` lines say where this worker ran.
    let waiting = "node-a:29611:29611 [1] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n[E1127 06:01:51.100000 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.\n";
    let d = diagnose(&[
        ("node-a/console.log", aborted.to_owned()),
        ("node-a/logs/run_a/attempt_0/1/stderr.log", waiting.to_owned()),
        ("node-b/console.log", failed.to_owned()),
        ("node-b/logs/run_b/attempt_0/2/error.json", error.to_owned()),
    ]);
    assert_eq!(first(&d).rank, Some(6));
    assert_eq!(d.cascades.len(), 1, "{:#?}", d.cascades);
    assert_eq!(d.cascades[0].ranks, vec![1]);
    assert!(
        !d.warnings.iter().any(|w| w.code == "global_rank_unknown"),
        "{:?}",
        d.warnings
    );
    // Another host's row of the same local rank is not taken for it.
    let d = diagnose(&[
        (
            "node-b/console.log",
            failed.replace("local_rank: 2", "local_rank: 1"),
        ),
        ("node-a/logs/run_a/attempt_0/1/stderr.log", waiting.to_owned()),
    ]);
    assert!(d.warnings.iter().any(|w| w.code == "global_rank_unknown"));
}

#[test]
fn a_bundle_with_no_failure_of_any_ranks_own_says_what_is_missing() {
    let d = diagnose(&[
        ("rank0.log", "[rank0]: step 1\n".to_owned()),
        ("rank1.log", "[rank1]: step 1\n".to_owned()),
    ]);
    assert!(d.first_fault.is_none());
    assert!(!d.missing.is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]
    #[test]
    fn no_bundle_input_panics(files in proptest::collection::vec((".{0,20}", proptest::collection::vec(any::<u8>(), 0..600)), 0..4),
                              seed in proptest::collection::vec(prop_oneof![
                                  Just(b"\x80\x02}q\x00(X\x07\x00\x00\x00entries".to_vec()),
                                  Just(b"{\"message\": {\"message\": ".to_vec()),
                                  Just(b"NVRM: Xid (PCI:0000:3b:00): ".to_vec()),
                                  Just(b"[rank1]: Watchdog caught collective operation timeout: WorkNCCL(SeqNum=".to_vec()),
                              ], 0..3)) {
        let rules = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
        let catalog = XidCatalog::embedded().unwrap_or_else(|e| panic!("{e}"));
        let mut owned: Vec<(String, Vec<u8>)> = files;
        for (i, s) in seed.into_iter().enumerate() {
            if let Some(f) = owned.get_mut(i) {
                let mut b = s;
                b.extend_from_slice(&f.1);
                f.1 = b;
            }
        }
        let borrowed: Vec<(&str, &[u8])> = owned.iter().map(|(n, b)| (n.as_str(), b.as_slice())).collect();
        let d = analyze_files(&rules, catalog, &borrowed);
        prop_assert!(serde_json::to_string(&d).is_ok());
    }
}

#[test]
fn an_agents_silent_worker_folder_takes_its_rank_from_its_other_folders_only_when_they_agree() {
    let waited = |rank: u32| {
        format!(
            "[rank{rank}]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 18000ms for recv operation to complete\n"
        )
    };
    // Local ranks 0 and 1 are global ranks 4 and 5: the agent's base is 4, so local rank 2 is 6.
    let agreeing = diagnose(&[
        ("node-b/run_a/attempt_0/0/stderr.log", waited(4)),
        ("node-b/run_a/attempt_0/1/stderr.log", waited(5)),
        (
            "node-b/run_a/attempt_0/2/stdout.log",
            "loading shard 3\n".to_owned(),
        ),
    ]);
    let silent = agreeing
        .files
        .iter()
        .find(|f| f.name.ends_with("2/stdout.log"))
        .unwrap_or_else(|| panic!("{:?}", agreeing.files));
    assert_eq!(silent.ranks, vec![6]);
    // Folders that give two bases (4 and 9) prove no layout: the silent folder's rank stays unknown.
    let disagreeing = diagnose(&[
        ("node-b/run_a/attempt_0/0/stderr.log", waited(4)),
        ("node-b/run_a/attempt_0/1/stderr.log", waited(10)),
        (
            "node-b/run_a/attempt_0/2/stdout.log",
            "loading shard 3\n".to_owned(),
        ),
    ]);
    let silent = disagreeing
        .files
        .iter()
        .find(|f| f.name.ends_with("2/stdout.log"))
        .unwrap_or_else(|| panic!("{:?}", disagreeing.files));
    assert!(silent.ranks.is_empty(), "{:?}", silent.ranks);
}

#[test]
fn a_rank_whose_error_file_holds_only_the_message_takes_its_cause_from_the_assertion_in_its_stderr() {
    // torchrun's error file: the exception message only, and the earliest time of the rank.
    let error = r#"{"message": {"message": "RuntimeError: CUDA error: device-side assert triggered", "extraInfo": {"py_callstack": "Traceback (most recent call last):\n  File \"train.py\", line 187, in main\n    loss = model(**batch).loss\nRuntimeError: CUDA error: device-side assert triggered\n", "timestamp": "1795757937"}}}"#;
    // Its stderr, stamped a second later: the assertion that names the kernel, then the traceback.
    let stderr = [
        "/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1236: indexSelectLargeIndex: block: [190,0,0], thread: [32,0,0] Assertion `srcIndex < srcSelectDimSize` failed.",
        "/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1236: indexSelectLargeIndex: block: [190,0,0], thread: [33,0,0] Assertion `srcIndex < srcSelectDimSize` failed.",
        "Traceback (most recent call last):",
        "  File \"train.py\", line 187, in main",
        "    loss = model(**batch).loss",
        "RuntimeError: CUDA error: device-side assert triggered",
    ]
    .iter()
    .map(|line| format!("2026-11-27T05:38:58.0000000Z {line}\n"))
    .collect::<String>();
    let summary = "Root Cause (first observed failure):\n[0]:\n  time      : 2026-11-27_05:38:58\n  host      : node-a\n  rank      : 3 (local_rank: 3)\n  exitcode  : 1 (pid: 4103)\n  error_file: /tmp/logs/run_a/attempt_0/3/error.json\n  traceback : RuntimeError: CUDA error: device-side assert triggered\n============================================================\n";
    let d = diagnose(&[
        ("node-a/console.log", summary.to_owned()),
        ("node-a/logs/run_a/attempt_0/3/error.json", error.to_owned()),
        ("node-a/logs/run_a/attempt_0/3/stderr.log", stderr),
    ]);
    let f = first(&d);
    assert_eq!(f.rank, Some(3));
    let cause = f.cause.as_ref().unwrap_or_else(|| panic!("no cause: {f:#?}"));
    assert_eq!(
        (cause.rule.as_str(), cause.confidence),
        ("assert.index_select", Confidence::High),
        "{f:#?}"
    );
    assert!(f.summary.contains(cause.title.as_str()), "{}", f.summary);
    // The time is still the rank's earliest: the error file's.
    assert_eq!(f.at_us, Some(1_795_757_937_000_000));
    let files: Vec<&str> = f.evidence.iter().map(|e| e.file.as_str()).collect();
    assert_eq!(
        files,
        vec![
            "node-a/logs/run_a/attempt_0/3/stderr.log",
            "node-a/logs/run_a/attempt_0/3/error.json (py_callstack)",
        ],
        "the evidence of the file that names the cause, then of the one that gave the time"
    );
}

fn diagnose_bytes(files: &[(&str, &[u8])]) -> BundleDiagnosis {
    let rules = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let catalog = XidCatalog::embedded().unwrap_or_else(|e| panic!("{e}"));
    analyze_files(&rules, catalog, files)
}

fn left_out_warnings(d: &BundleDiagnosis) -> Vec<&str> {
    d.warnings
        .iter()
        .filter(|w| w.code == faultline::bundle::binary::LEFT_OUT)
        .map(|w| w.message.as_str())
        .collect()
}

#[test]
fn a_binary_file_that_is_no_dump_is_left_out_with_a_warning_and_the_others_are_read() {
    let raised = index_error(2, "1127 05:00:10.000000");
    let waited = timeout(0, "1127 05:10:10.000000", 41);
    let core = b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00[rank1]: IndexError: not a log at all\n";
    let d = diagnose_bytes(&[
        ("rank0.log", waited.as_bytes()),
        ("rank2.log", raised.as_bytes()),
        ("core.1234", core),
    ]);
    assert_eq!(
        (first(&d).kind, first(&d).rank),
        (FaultKind::RankFailure, Some(2))
    );
    assert_eq!(
        left_out_warnings(&d),
        vec![r#"file "core.1234": binary, not a format faultline reads; not analysed and not kept"#]
    );
    assert!(d.files.iter().all(|f| f.name != "core.1234"), "{:?}", d.files);
    assert!(
        d.ranks.iter().all(|r| r.rank != 1),
        "nothing was read from the core dump"
    );
}

#[test]
fn a_flight_recorder_pickle_is_read_and_one_cut_short_is_left_out_saying_why() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/distributed/sleep-past-timeout-torch2.15.0-gloo-n8/host-a/fr_trace/fr_3");
    let pickle = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let d = diagnose_bytes(&[
        ("fr_trace/fr_3", &pickle),
        ("fr_trace/fr_4", &pickle[..pickle.len() / 2]),
    ]);
    let read = d
        .files
        .iter()
        .find(|f| f.name == "fr_trace/fr_3")
        .unwrap_or_else(|| panic!("{:?}", d.files));
    assert_eq!(
        (read.kind, read.ranks.as_slice()),
        (faultline::model::FileKind::FlightRecorder, &[3][..])
    );
    let said = left_out_warnings(&d);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].starts_with(r#"file "fr_trace/fr_4": binary, a flight-recorder pickle faultline cannot read (the pickle is cut short"#)
            && said[0].ends_with("; not analysed and not kept"),
        "{said:?}"
    );
}
