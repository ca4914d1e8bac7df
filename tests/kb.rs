//! The knowledge base against a real database: a temporary SQLite file always, and PostgreSQL when
//! `TEST_POSTGRES_URL` is set (CI sets it; without it the PostgreSQL run says loudly that it skips).

mod support;

use faultline::diagnose::analyze_str;
use faultline::kb::queries::{FeedbackInput, Filter};
use faultline::kb::rows::Verdict;
use faultline::kb::writer::{IncidentMeta, NewIncident, Writer};
use faultline::kb::{Store, Table, now_ms};
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
