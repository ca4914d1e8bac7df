//! Server-side time of the diagnosis page (`GET /incidents/{id}`) for an incident whose log is
//! 1 MiB (or `FAULTLINE_BENCH_KB` KiB): the knowledge-base read, the log folded around its evidence
//! lines and the template rendered, through the real router. Goal: under 200 ms.
//!
//! `cargo bench --bench web -- --warm-up-time 1 --measurement-time 5`

#[path = "support/noisy_log.rs"]
#[allow(dead_code)]
mod noisy_log;

use std::hint::black_box;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use criterion::{Criterion, criterion_group, criterion_main};
use faultline::app::App;
use faultline::config::Config;
use faultline::diagnose::analyze_str;
use faultline::kb::now_ms;
use faultline::kb::writer::{IncidentMeta, NewIncident};
use faultline::rules::RuleSet;
use tower::ServiceExt;

const SEED: u64 = 7;

/// A noisy training log of about `kb` KiB that ends in a device-side assert.
fn log(kb: usize) -> String {
    let tail = noisy_log::cuda_assert_traceback(SEED);
    let mut bytes = Vec::new();
    let _ = noisy_log::generate((kb << 10).saturating_sub(tail.len()), SEED, &mut bytes);
    bytes.extend_from_slice(&tail);
    String::from_utf8_lossy(&bytes).into_owned()
}

fn diagnosis_page(c: &mut Criterion) {
    let kb = std::env::var("FAULTLINE_BENCH_KB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024);
    let dir = std::env::temp_dir().join(format!("faultline-bench-web-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let runtime = tokio::runtime::Runtime::new().unwrap_or_else(|e| panic!("{e}"));
    let rules = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let log = log(kb);
    let diagnosis = analyze_str(&rules, &log);
    let config = Config {
        database: format!("sqlite://{}", dir.join("bench.db").display()),
        embedded_worker: false,
        rate_limit_per_minute: 0,
        ..Config::default()
    };
    let (app, id) = runtime.block_on(async {
        let app = App::start(config, rules)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
        let stored = app
            .state
            .writer
            .write(NewIncident::prepare(
                &log,
                &diagnosis,
                IncidentMeta::default(),
                now_ms(),
            ))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        (app, stored.incident_id)
    });
    let router = app.router();
    let get = || {
        let router = router.clone();
        async move {
            let request = Request::get(format!("/incidents/{id}"))
                .body(Body::empty())
                .unwrap_or_else(|e| panic!("{e}"));
            let response = router.oneshot(request).await.unwrap_or_else(|e| match e {});
            assert_eq!(response.status(), StatusCode::OK);
            let body = axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            black_box(body.len())
        }
    };
    let page_bytes = runtime.block_on(get());
    eprintln!(
        "log {} KiB, {} findings, page {} KiB",
        log.len() >> 10,
        diagnosis.findings.len(),
        page_bytes >> 10
    );
    c.bench_function(&format!("diagnosis_page_{kb}KiB_log"), |b| {
        b.iter(|| runtime.block_on(get()))
    });
    drop(app);
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, diagnosis_page);
criterion_main!(benches);
