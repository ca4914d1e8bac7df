//! Throughput of the core on a long noisy CI log (100 MB by default, or `FAULTLINE_BENCH_MB` MB):
//! parsing alone and the whole analysis with the embedded rule base; latency on a single ~4 KB
//! CUDA traceback (and what storing it adds); a pass over the 1,889 real logs of the held-out corpus,
//! one after another, as a service meets them; 4 MB of random bytes; redaction of the traceback
//! (with and without secrets) and of non-ASCII text; compilation of the embedded rule base and of
//! 1,000 rules.
//!
//! `cargo bench --bench pipeline`; `FAULTLINE_BENCH_MB=10 cargo bench --bench pipeline` for a quick run.

#[path = "support/noisy_log.rs"]
mod noisy_log;
#[path = "support/synthetic_rules.rs"]
mod synthetic_rules;

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use faultline::rules::{RuleFile, RuleSet};

const SEED: u64 = 42;

fn bench_mb() -> usize {
    std::env::var("FAULTLINE_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&mb| mb > 0)
        .unwrap_or(100)
}

fn rules() -> RuleSet {
    RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"))
}

fn noisy_log() -> Vec<u8> {
    let mb = bench_mb();
    let mut log = Vec::with_capacity((mb << 20) + (64 << 10));
    // Writing into a Vec cannot fail.
    let _ = noisy_log::generate(mb << 20, SEED, &mut log);
    log
}

fn long_log(c: &mut Criterion) {
    let log = noisy_log();
    let rules = rules();
    let mb = bench_mb();
    let mut group = c.benchmark_group("long_log");
    group.throughput(Throughput::Bytes(log.len() as u64));
    // One iteration takes about a second: the same few iterations per sample, 10 samples.
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(15));
    group.bench_function(format!("parse_{mb}mb"), |b| {
        b.iter(|| faultline::parse::parse_bytes(black_box(&log)))
    });
    group.bench_function(format!("analyze_{mb}mb"), |b| {
        b.iter(|| faultline::diagnose::analyze_bytes(black_box(&rules), black_box(&log)))
    });
    group.finish();
}

fn small_log(c: &mut Criterion) {
    let log = noisy_log::cuda_assert_traceback(SEED);
    let rules = rules();
    let mut group = c.benchmark_group("4kb_traceback");
    group.throughput(Throughput::Bytes(log.len() as u64));
    group.measurement_time(Duration::from_secs(5));
    group.bench_function("parse", |b| {
        b.iter(|| faultline::parse::parse_bytes(black_box(&log)))
    });
    group.bench_function("analyze", |b| {
        b.iter(|| faultline::diagnose::analyze_bytes(black_box(&rules), black_box(&log)))
    });
    group.bench_function("analyze_and_json", |b| {
        b.iter(|| {
            let analysis = faultline::diagnose::analyze_bytes(black_box(&rules), black_box(&log));
            serde_json::to_vec(&analysis.diagnosis).unwrap_or_default()
        })
    });
    // What storing adds on the request side: redaction, hashing, compression, encoding.
    let text = String::from_utf8_lossy(&log).into_owned();
    let diagnosis = faultline::diagnose::analyze_str(&rules, &text);
    group.bench_function("prepare_incident", |b| {
        b.iter(|| {
            let redacted = faultline::kb::redact::redact(black_box(&text));
            faultline::kb::writer::NewIncident::prepare(&redacted, &diagnosis, Default::default(), 0)
        })
    });
    group.finish();
}

/// Random bytes (a binary file given by mistake): invalid UTF-8 on every line, and automata
/// states no log needs.
fn binary_input(c: &mut Criterion) {
    let mut state = SEED;
    let bytes: Vec<u8> = (0..4 << 20)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()[0]
        })
        .collect();
    let rules = rules();
    let mut group = c.benchmark_group("binary_input");
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    group.sample_size(10);
    group.bench_function("analyze_4mb", |b| {
        b.iter(|| faultline::diagnose::analyze_bytes(black_box(&rules), black_box(&bytes)))
    });
    group.finish();
}

/// Redaction (done before the service analyzes or stores a log): a ~4 KB CUDA traceback without a
/// secret (what most requests bring), the same with one of each kind, and 4 MB of training
/// progress with tqdm's block characters and CJK text.
fn redaction(c: &mut Criterion) {
    let traceback = String::from_utf8_lossy(&noisy_log::cuda_assert_traceback(SEED)).into_owned();
    let with_secrets = format!(
        "{traceback}export HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyzABCDEF1234\n\
         {{\"SecretAccessKey\": \"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\"}}\n\
         curl -H 'Authorization: Bearer abc' https://ci:pw@ci.example.com/job/1 by ann@example.org\n\
         -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n\
         -----END PRIVATE KEY-----\n"
    );
    let progress: String = (0..40_000)
        .map(|i| {
            format!(
                "Epoch 1: {:3}%|{:<10}| {i}/40000 [00:10<00:10] 第 {i} 步 loss=0.{}\n",
                i % 100,
                "█".repeat(i % 10),
                i % 97
            )
        })
        .collect();
    let mut group = c.benchmark_group("redact");
    group.measurement_time(Duration::from_secs(5));
    for (name, log) in [
        ("4kb_traceback", &traceback),
        ("4kb_traceback_with_secrets", &with_secrets),
    ] {
        group.throughput(Throughput::Bytes(log.len() as u64));
        group.bench_function(name, |b| {
            b.iter(|| faultline::kb::redact::redact(black_box(log)).len())
        });
    }
    group.throughput(Throughput::Bytes(progress.len() as u64));
    group.sample_size(20);
    group.bench_function("non_ascii_progress", |b| {
        b.iter(|| faultline::kb::redact::redact(black_box(&progress)).len())
    });
    group.finish();
}

/// The real logs of the held-out corpus (JSON Lines with a `log` field).
fn held_out_logs() -> Vec<String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/corpus/held_out.jsonl"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|case| case.get("log")?.as_str().map(str::to_owned))
        .collect()
}

/// Many different small logs in turn: unlike one log analyzed again and again, each one takes the
/// automata through states the one before did not need.
fn real_logs(c: &mut Criterion) {
    let logs = held_out_logs();
    let rules = rules();
    let mut group = c.benchmark_group("held_out_corpus");
    group.throughput(Throughput::Elements(logs.len() as u64));
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function(format!("analyze_each_of_{}", logs.len()), |b| {
        b.iter(|| {
            for log in &logs {
                black_box(faultline::diagnose::analyze_str(&rules, black_box(log)));
            }
        })
    });
    group.finish();
}

fn compile_rules(c: &mut Criterion) {
    let taxonomy = RuleFile {
        relative: "taxonomy.toml".into(),
        display: "rules/taxonomy.toml".into(),
        text: include_str!("../rules/taxonomy.toml").into(),
    };
    let synthetic = synthetic_rules::synthetic_rules(1000);
    let mut group = c.benchmark_group("compile");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("embedded_rule_base", |b| b.iter(rules));
    group.bench_function("1000_rules", |b| {
        b.iter(|| {
            RuleSet::from_files(&taxonomy, black_box(&synthetic), "synthetic")
                .unwrap_or_else(|e| panic!("{e}"))
        })
    });
    // The automata built from a loaded rule base (each iteration on a fresh load, not timed):
    // the line set every analysis needs, and the prefilter beside it for large inputs.
    let thousand =
        || RuleSet::from_files(&taxonomy, &synthetic, "synthetic").unwrap_or_else(|e| panic!("{e}"));
    for (name, load) in [
        ("embedded", &rules as &dyn Fn() -> RuleSet),
        ("1000_rules", &thousand),
    ] {
        group.bench_function(format!("{name}_line_set"), |b| {
            // The rule base is handed back, to be dropped outside the timing.
            b.iter_batched(
                load,
                |rules| {
                    let _ = black_box(rules.automata());
                    rules
                },
                BatchSize::PerIteration,
            )
        });
        group.bench_function(format!("{name}_line_set_and_prefilter"), |b| {
            b.iter_batched(
                load,
                |rules| {
                    rules.prepare_for_large_inputs();
                    let _ = black_box(rules.prefilter());
                    rules
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    compile_rules,
    small_log,
    real_logs,
    binary_input,
    redaction,
    long_log
);
criterion_main!(benches);
