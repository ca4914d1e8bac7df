//! The knowledge base against a real database: a temporary SQLite file always, and PostgreSQL when
//! `TEST_POSTGRES_URL` is set (CI sets it; without it the PostgreSQL run says loudly that it skips).

mod support;

use faultline::diagnose::analyze_str;
use faultline::kb::bundles::BundleText;
use faultline::kb::queries::{FeedbackInput, Filter};
use faultline::kb::rows::Verdict;
use faultline::kb::writer::{IncidentMeta, NewIncident, Writer};
use faultline::kb::{Store, Table, now_ms};
use faultline::model::{
    BUNDLE_FORMAT_VERSION, BundleDiagnosis, Confidence, Coverage, FaultKind, FileKind, FirstFault, GpuRef,
    RankOutcome, RankReport,
};
use faultline::rules::RuleSet;

const OOM: &str = "Traceback (most recent call last):\n  File \"/work/train.py\", line 3, in step\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.23 GiB is free.\n";
const ASSERT: &str = "/pytorch/aten/src/ATen/native/cuda/Indexing.cu:658: indexSelectLargeIndex: block: [63,0,0], thread: [56,0,0] Assertion `srcIndex < srcSelectDimSize` failed.\nRuntimeError: CUDA error: device-side assert triggered\n";

fn incident(rules: &RuleSet, log: &str, project: &str) -> NewIncident {
    let diagnosis = analyze_str(rules, log);
    let meta = IncidentMeta {
        project: Some(project.into()),
        tags: vec!["nightly".into()],
        ..IncidentMeta::default()
    };
    NewIncident::prepare(log, &diagnosis, meta, now_ms())
}

async fn knowledge_base_works_on(store: Store) {
    let rules = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let (writer, task) = Writer::spawn(store.clone(), 64);

    let first = writer
        .write(incident(&rules, OOM, "vision"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(first.new_group, "the first OOM makes a group");
    let again = writer
        .write(incident(&rules, OOM, "nlp"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again.group_id, first.group_id);
    assert!(!again.new_group);
    let other = writer
        .write(incident(&rules, ASSERT, "nlp"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(other.group_id, first.group_id);
    let nothing = writer
        .write(incident(&rules, "all good\n", "nlp"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        nothing.group_id, None,
        "an undiagnosed log is stored without a group"
    );

    // The same log twice is stored once.
    assert_eq!(store.count(Table::Incidents).await.ok(), Some(4));
    assert_eq!(store.count(Table::Logs).await.ok(), Some(3));

    let all = store
        .list_incidents(&Filter::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(all.items.len(), 4);
    assert_eq!(all.items[0].id, nothing.incident_id, "newest first");
    let oom = store
        .list_incidents(&Filter {
            class: Some("cuda.oom".into()),
            ..Filter::default()
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(oom.items.len(), 2);
    let nlp = store
        .list_incidents(&Filter {
            project: Some("nlp".into()),
            limit: Some(2),
            ..Filter::default()
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((nlp.items.len(), nlp.next_offset), (2, Some(2)));
    let searched = store
        .list_incidents(&Filter {
            q: Some("srcSelectDimSize\" OR 1=1 --".into()),
            ..Filter::default()
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        searched.items.iter().map(|i| i.id).collect::<Vec<_>>(),
        vec![other.incident_id]
    );

    let detail = store
        .incident(first.incident_id)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(detail.log, OOM);
    assert_eq!(
        detail.diagnosis.primary().map(|f| f.class.as_str()),
        Some("cuda.oom")
    );
    assert_eq!(detail.group.as_ref().map(|g| g.count), Some(2));

    let group_id = first
        .group_id
        .unwrap_or_else(|| panic!("the first incident has no group: {first:?}"));
    let note = store
        .add_note(
            group_id,
            "Lower the batch size on the A10 runners.",
            Some("alice"),
        )
        .await;
    assert!(note.is_ok(), "{note:?}");
    let group = store.group(group_id, 30).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(group.group.count, 2);
    assert_eq!(group.notes.len(), 1);
    assert_eq!(group.projects.len(), 2);
    assert_eq!(group.daily.iter().map(|d| d.count).sum::<i64>(), 2);
    assert_eq!(group.recent.len(), 2);

    let feedback = FeedbackInput {
        verdict: Some(Verdict::Right),
        fix_worked: Some(true),
        ..FeedbackInput::default()
    };
    let saved = store
        .add_feedback(first.incident_id, &feedback, Some("ci"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let rule = saved
        .rule
        .clone()
        .unwrap_or_else(|| panic!("the feedback names no rule: {saved:?}"));
    let stats = store
        .rule_stats(&rule, 30)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (stats.hits, stats.right, stats.wrong, stats.precision),
        (2, 1, 0, Some(1.0))
    );
    assert_eq!(stats.daily.iter().map(|d| d.count).sum::<i64>(), 2);
    assert!(
        store
            .add_feedback(first.incident_id, &FeedbackInput::default(), None)
            .await
            .is_err()
    );

    let similar = store
        .similar(first.incident_id, 10)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        similar.first().map(|s| s.id),
        Some(again.incident_id),
        "the same group comes first"
    );

    assert!(store.incident(999_999).await.is_err());
    assert!(store.add_note(999_999, "x", None).await.is_err());

    let token = store.create_token("ci").await.unwrap_or_else(|e| panic!("{e}"));
    assert!(token.starts_with("fl_"));
    assert_eq!(
        store.verify_token(&token).await.ok().flatten().map(|o| o.name),
        Some("ci".into())
    );
    assert_eq!(store.verify_token("fl_wrong").await.ok().flatten(), None);
    assert!(store.create_token("ci").await.is_err(), "names are unique");

    drop(writer);
    let _ = task.await;
}

#[tokio::test]
async fn the_knowledge_base_works_on_sqlite() {
    let db = support::TempDb::new("kb");
    let store = db.store().await;
    // Migrating twice is a no-op.
    assert!(store.migrate().await.is_ok());
    knowledge_base_works_on(store).await;
}

#[tokio::test]
async fn the_knowledge_base_works_on_postgres() {
    let Some(store) = support::postgres_store("kb").await else {
        return;
    };
    knowledge_base_works_on(store).await;
}

/// Submits many incidents at once, so that the writer stores them in shared statements, and checks
/// that each answer names the incident's own row and group.
async fn a_batch_keeps_each_incident_with_its_own_row(store: Store) {
    let rules = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let (writer, task) = Writer::spawn(store.clone(), 64);
    let logs = [OOM, ASSERT, "all good\n"];
    let submissions: Vec<_> = (0..48)
        .map(|n| {
            let log = logs[n % logs.len()];
            let project = format!("project-{n}");
            let incident = incident(&rules, log, &project);
            let writer = writer.clone();
            tokio::spawn(async move { (log, project, writer.write(incident).await) })
        })
        .collect();
    let mut answers = Vec::new();
    for submission in submissions {
        let (log, project, stored) = submission.await.unwrap_or_else(|e| panic!("{e}"));
        answers.push((log, project, stored.unwrap_or_else(|e| panic!("{e}"))));
    }

    for (log, project, stored) in &answers {
        let detail = store
            .incident(stored.incident_id)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(detail.incident.project.as_deref(), Some(project.as_str()));
        assert_eq!(detail.log, *log);
        assert_eq!(detail.incident.group_id, stored.group_id, "{project}");
    }
    let new_groups = answers.iter().filter(|(_, _, s)| s.new_group).count();
    assert_eq!(
        new_groups, 2,
        "one OOM group and one assert group are new, each once"
    );
    for log in [OOM, ASSERT] {
        let groups: Vec<Option<i64>> = answers
            .iter()
            .filter(|(l, _, _)| *l == log)
            .map(|(_, _, s)| s.group_id)
            .collect();
        assert!(groups.iter().all(|g| g.is_some() && *g == groups[0]));
        let group = store
            .group(
                groups[0].unwrap_or_else(|| panic!("no group for {log:?}: {groups:?}")),
                30,
            )
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(group.group.count, 16, "every incident of the batch is counted");
    }
    assert_eq!(store.count(Table::Incidents).await.ok(), Some(48));
    assert_eq!(store.count(Table::Logs).await.ok(), Some(3));

    drop(writer);
    let _ = task.await;
}

#[tokio::test]
async fn a_batch_keeps_each_incident_with_its_own_row_on_sqlite() {
    let db = support::TempDb::new("kb-batch");
    let store = db.store().await;
    a_batch_keeps_each_incident_with_its_own_row(store).await;
}

#[tokio::test]
async fn a_batch_keeps_each_incident_with_its_own_row_on_postgres() {
    let Some(store) = support::postgres_store("kb_batch").await else {
        return;
    };
    a_batch_keeps_each_incident_with_its_own_row(store).await;
}

/// The queue of failures the rule base does not know: incidents in which no rule found a root
/// cause or a symptom, a context finding (a warning) included, and the share the rules explain.
async fn the_undiagnosed_incidents_form_a_queue_and_a_share(store: Store) {
    let rules = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let (writer, task) = Writer::spawn(store.clone(), 64);
    let warning_only = "UserWarning: CUDA initialization: CUDA unknown error - this may be due to an incorrectly set up environment\nTraceback (most recent call last):\n  File \"train.py\", line 2, in <module>\nValueError: the config has no field 'warmup'\n";
    let mut stored = Vec::new();
    for log in [OOM, "all good\n", warning_only, ASSERT] {
        let written = writer.write(incident(&rules, log, "nlp")).await;
        stored.push(written.unwrap_or_else(|e| panic!("{e}")).incident_id);
    }
    let ids = |diagnosed| {
        let store = store.clone();
        async move {
            let filter = Filter {
                diagnosed: Some(diagnosed),
                ..Filter::default()
            };
            let page = store
                .list_incidents(&filter)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            page.items.iter().map(|i| i.id).collect::<Vec<_>>()
        }
    };
    assert_eq!(
        ids(false).await,
        vec![stored[2], stored[1]],
        "the log with only a warning and the log with nothing known, newest first"
    );
    assert_eq!(ids(true).await, vec![stored[3], stored[0]]);

    // The queue shows, and search finds, the error a log with no diagnosis ends with.
    let warning = store.incident(stored[2]).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        warning.incident.unexplained_error.as_deref(),
        Some("ValueError: the config has no field 'warmup'")
    );
    let searched = store
        .list_incidents(&Filter {
            q: Some("warmup".into()),
            ..Filter::default()
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        searched.items.iter().map(|i| i.id).collect::<Vec<_>>(),
        vec![stored[2]]
    );

    let coverage = store.coverage(0).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((coverage.incidents, coverage.diagnosed), (4, 2));
    let future = store
        .coverage(now_ms() + 60_000)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (future.incidents, future.diagnosed),
        (0, 0),
        "an empty window counts nothing"
    );

    let groups = Filter {
        diagnosed: Some(false),
        ..Filter::default()
    };
    assert!(
        store.list_groups(&groups).await.is_err(),
        "groups have no such filter"
    );

    drop(writer);
    let _ = task.await;
}

#[tokio::test]
async fn the_undiagnosed_incidents_form_a_queue_and_a_share_on_sqlite() {
    let db = support::TempDb::new("kb-queue");
    let store = db.store().await;
    the_undiagnosed_incidents_form_a_queue_and_a_share(store).await;
}

#[tokio::test]
async fn the_undiagnosed_incidents_form_a_queue_and_a_share_on_postgres() {
    let Some(store) = support::postgres_store("kb_queue").await else {
        return;
    };
    the_undiagnosed_incidents_form_a_queue_and_a_share(store).await;
}

/// A distributed job's bundle as the analyzer would give it: `ranks` on two hosts, the first fault
/// on `first` (with `uuid` on its GPU when given).
fn bundle_of(ranks: u32, first: Option<(u32, &str)>, uuid: Option<&str>) -> BundleDiagnosis {
    let host = |r: u32| format!("node-{}", r / 2);
    let gpu = |r: u32| GpuRef {
        index: Some(r % 2),
        bus_id: Some(format!("0000:{:02x}:00", 0x3b + r % 2)),
        uuid: None,
        name: None,
    };
    let first_fault = first.map(|(rank, summary)| FirstFault {
        kind: FaultKind::RankFailure,
        summary: summary.to_owned(),
        rank: Some(rank),
        host: Some(host(rank)),
        local_rank: Some(rank % 2),
        gpu: Some(GpuRef {
            uuid: uuid.map(str::to_owned),
            ..gpu(rank)
        }),
        collective: None,
        cause: None,
        xid: None,
        at_us: None,
        confidence: Confidence::High,
        reasons: vec!["the only rank that failed by itself".into()],
        evidence: Vec::new(),
    });
    BundleDiagnosis {
        format_version: BUNDLE_FORMAT_VERSION,
        first_fault,
        cascades: Vec::new(),
        missing: Vec::new(),
        collectives: Vec::new(),
        xids: Vec::new(),
        coverage: Coverage::default(),
        ranks: (0..ranks)
            .map(|rank| RankReport {
                rank,
                host: Some(host(rank)),
                local_rank: Some(rank % 2),
                gpu: Some(gpu(rank)),
                files: vec![format!("rank{rank}.log")],
                outcome: RankOutcome::Cascade,
                root: None,
                first_failure: None,
            })
            .collect(),
        hosts: Vec::new(),
        clock_offsets: Vec::new(),
        timeline: Vec::new(),
        files: Vec::new(),
        warnings: Vec::new(),
    }
}

/// A flight-recorder dump as the service keeps a pickle: its content in JSON.
const DUMP_JSON: &str = "{\n  \"entries\": [],\n  \"pg_config\": {},\n  \"version\": \"2.10\"\n}";

fn text(name: &str, kind: FileKind, text: &str) -> BundleText {
    BundleText {
        name: name.to_owned(),
        kind,
        text: text.to_owned(),
        bytes: text.len() as u64,
        binary: false,
        kept_as: None,
    }
}

/// A bundle incident of `job` whose first fault is rank 1 (its GPU's UUID `uuid`).
fn bundle_incident(rules: &RuleSet, job: Option<&str>, project: &str, uuid: Option<&str>) -> NewIncident {
    let files = [
        text(
            "rank0.log",
            FileKind::RankLog,
            "[rank0]: Watchdog caught collective operation timeout\n",
        ),
        text("rank1.log", FileKind::RankLog, ASSERT),
    ];
    let bundle = bundle_of(2, Some((1, "rank 1 on node-0 failed first")), uuid);
    let meta = IncidentMeta {
        project: Some(project.into()),
        job_url: job.map(str::to_owned),
        ..IncidentMeta::default()
    };
    NewIncident::prepare_bundle(&files, 1, &analyze_str(rules, ASSERT), &bundle, meta, now_ms())
}

async fn a_bundle_keeps_every_file_and_where_each_rank_ran(store: Store) {
    let rules = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let (writer, task) = Writer::spawn(store.clone(), 64);
    let dmesg =
        "[Tue Mar  4 10:00:01 2025] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n";
    let files = [
        text("logs/rank0.log", FileKind::RankLog, OOM),
        text("logs/rank1.log", FileKind::RankLog, ASSERT),
        text("dmesg.txt", FileKind::KernelLog, dmesg),
        text("copy/rank1.log", FileKind::RankLog, ASSERT),
        BundleText {
            binary: true,
            kept_as: Some("fr_trace/fr_1.json".to_owned()),
            ..text("fr_trace/fr_1", FileKind::FlightRecorder, DUMP_JSON)
        },
    ];
    let bundle = bundle_of(
        2,
        Some((1, "rank 1 on node-0 failed first: a device-side assert")),
        Some("GPU-aaaa"),
    );
    let incident = NewIncident::prepare_bundle(
        &files,
        1,
        &analyze_str(&rules, ASSERT),
        &bundle,
        IncidentMeta::default(),
        now_ms(),
    );
    let stored = writer.write(incident).await.unwrap_or_else(|e| panic!("{e}"));

    let detail = store
        .incident(stored.incident_id)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        detail.bundle.as_ref(),
        Some(&bundle),
        "the bundle diagnosis comes back as it was stored"
    );
    assert_eq!(
        detail.log, ASSERT,
        "the incident shows the log of the rank that failed first"
    );
    assert_eq!(detail.incident.class.as_deref(), Some("cuda.device_assert.index"));
    let names: Vec<(&str, &str)> = detail
        .files
        .iter()
        .map(|f| (f.name.as_str(), f.kind.as_str()))
        .collect();
    assert_eq!(
        names,
        vec![
            ("logs/rank0.log", "rank_log"),
            ("logs/rank1.log", "rank_log"),
            ("dmesg.txt", "kernel_log"),
            ("copy/rank1.log", "rank_log"),
            ("fr_trace/fr_1", "flight_recorder")
        ],
        "every file is kept, in the order it came"
    );
    assert!(
        detail.files[..4]
            .iter()
            .all(|f| f.kept_as.is_none() && f.media_type().starts_with("text/plain")),
        "a text file is kept as it came"
    );
    let (dump, kept) = store
        .incident_file(stored.incident_id, 4)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (
            dump.binary,
            dump.kept_as.as_deref(),
            dump.media_type(),
            kept.as_str()
        ),
        (true, Some("fr_trace/fr_1.json"), "application/json", DUMP_JSON),
        "a pickle comes back as the JSON it was kept as"
    );
    let (file, kept) = store
        .incident_file(stored.incident_id, 2)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (file.name.as_str(), file.lines, kept.as_str()),
        ("dmesg.txt", 1, dmesg)
    );
    assert!(
        store.incident_file(stored.incident_id, 5).await.is_err(),
        "there is no sixth file"
    );
    assert_eq!(
        store.count(Table::Logs).await.ok(),
        Some(4),
        "the same text twice is kept once"
    );

    // A single log has no files and no bundle.
    let single = writer
        .write(incident_of(&rules, OOM))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let single = store
        .incident(single.incident_id)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(single.bundle.is_none() && single.files.is_empty());

    // A first fault no rule names still titles the incident.
    let unknown = NewIncident::prepare_bundle(
        &[
            text("rank0.log", FileKind::RankLog, "step 10\n"),
            text("rank1.log", FileKind::RankLog, "step 9\n"),
        ],
        1,
        &analyze_str(&rules, "step 9\n"),
        &bundle_of(2, Some((1, "rank 1 never entered ALLREDUCE SeqNum 12")), None),
        IncidentMeta::default(),
        now_ms(),
    );
    let unknown = writer.write(unknown).await.unwrap_or_else(|e| panic!("{e}"));
    let listed = store
        .list_incidents(&Filter::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let row = listed.items.iter().find(|i| i.id == unknown.incident_id);
    assert_eq!(
        row.map(|r| (r.title.as_deref(), r.diagnosed)),
        Some((Some("rank 1 never entered ALLREDUCE SeqNum 12"), true))
    );

    drop(writer);
    let _ = task.await;
}

fn incident_of(rules: &RuleSet, log: &str) -> NewIncident {
    NewIncident::prepare(log, &analyze_str(rules, log), IncidentMeta::default(), now_ms())
}

#[tokio::test]
async fn a_bundle_keeps_every_file_and_where_each_rank_ran_on_sqlite() {
    let db = support::TempDb::new("kb-bundle");
    a_bundle_keeps_every_file_and_where_each_rank_ran(db.store().await).await;
}

#[tokio::test]
async fn a_bundle_keeps_every_file_and_where_each_rank_ran_on_postgres() {
    let Some(store) = support::postgres_store("kb_bundle").await else {
        return;
    };
    a_bundle_keeps_every_file_and_where_each_rank_ran(store).await;
}

/// A GPU that failed first in three jobs is flagged at a threshold of 3; one in two jobs is listed,
/// not flagged; a job submitted twice counts once; its host is listed with it.
async fn a_gpu_that_fails_first_in_three_jobs_is_flagged(store: Store) {
    let rules = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let (writer, task) = Writer::spawn(store.clone(), 64);
    let submissions = [
        (Some("https://ci/job/1"), "vision", Some("GPU-bad")),
        (Some("https://ci/job/1"), "vision", Some("GPU-bad")),
        (Some("https://ci/job/2"), "nlp", Some("GPU-bad")),
        (None, "nlp", Some("GPU-bad")),
        (Some("https://ci/job/3"), "nlp", Some("GPU-meh")),
        (Some("https://ci/job/4"), "nlp", Some("GPU-meh")),
        (Some("https://ci/job/5"), "nlp", Some("GPU-once")),
    ];
    let mut ids = Vec::new();
    for (job, project, uuid) in submissions {
        let stored = writer.write(bundle_incident(&rules, job, project, uuid)).await;
        ids.push(stored.unwrap_or_else(|e| panic!("{e}")).incident_id);
    }
    let offenders = store.offenders(3).await.unwrap_or_else(|e| panic!("{e}"));
    let gpus: Vec<(&str, i64, bool)> = offenders
        .gpus
        .iter()
        .map(|o| (o.key.as_str(), o.jobs, o.flagged))
        .collect();
    assert_eq!(
        gpus,
        vec![("uuid:GPU-bad", 3, true), ("uuid:GPU-meh", 2, false)],
        "a GPU in one job only is no repeat offender"
    );
    let bad = &offenders.gpus[0];
    assert_eq!(
        bad.incidents,
        vec![ids[3], ids[2], ids[1], ids[0]],
        "newest first"
    );
    assert_eq!(bad.projects, vec!["nlp".to_owned(), "vision".to_owned()]);
    assert_eq!(bad.host.as_deref(), Some("node-0"));
    assert_eq!(
        bad.gpu.as_ref().and_then(|g| g.bus_id.as_deref()),
        Some("0000:3c:00")
    );
    assert_eq!(
        offenders
            .hosts
            .iter()
            .map(|o| (o.key.as_str(), o.jobs, o.flagged))
            .collect::<Vec<_>>(),
        vec![("node-0", 6, true)],
        "every first fault was on node-0"
    );

    let lower = store.offenders(2).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(lower.gpus.iter().all(|o| o.flagged), "the threshold is a setting");
    assert_eq!(lower.threshold, 2);

    drop(writer);
    let _ = task.await;
}

#[tokio::test]
async fn a_gpu_that_fails_first_in_three_jobs_is_flagged_on_sqlite() {
    let db = support::TempDb::new("kb-offenders");
    a_gpu_that_fails_first_in_three_jobs_is_flagged(db.store().await).await;
}

#[tokio::test]
async fn a_gpu_that_fails_first_in_three_jobs_is_flagged_on_postgres() {
    let Some(store) = support::postgres_store("kb_offenders").await else {
        return;
    };
    a_gpu_that_fails_first_in_three_jobs_is_flagged(store).await;
}
