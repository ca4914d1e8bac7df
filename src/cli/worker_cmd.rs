//! `faultline worker`: a standalone replay worker that leases jobs from the knowledge base.

use std::io::Write;

use anyhow::Context;

use super::serve::{ConfigArgs, SnapshotArgs, init_logging, runtime};
use super::{EXIT_ERROR, EXIT_OK};
use crate::app::{shutdown_signal, store_options};
use crate::config::redact_url;
use crate::kb::Store;
use crate::objects::SnapshotStore;
use crate::replay::BackendChoice;
use crate::worker::{Outcome, Worker, WorkerOptions};

/// Arguments of `faultline worker`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Several workers (and servers) may share one PostgreSQL database: each job is leased by one worker \
at a time; a worker that dies lets its lease expire and another one runs the job again. With \
--once the exit code is 0 when the job was done, 1 when its attempt failed.")]
pub struct WorkerArgs {
    #[command(flatten)]
    config: ConfigArgs,
    /// Where checks run: the GPU when one opens (auto), the CPU, or the GPU only.
    #[arg(long, value_name = "auto|cpu|gpu")]
    backend: Option<BackendChoice>,
    #[command(flatten)]
    snapshots: SnapshotArgs,
    /// Wait for one job, run it, and exit.
    #[arg(long)]
    once: bool,
    /// Lease length in seconds (renewed while a job runs; a dead worker's job is retried after it).
    #[arg(long, value_name = "SECONDS")]
    lease_secs: Option<u64>,
    /// Seconds between looks at an empty queue.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    poll_secs: f64,
}

/// Runs the command.
pub fn run(args: &WorkerArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    init_logging();
    let mut config = args.config.load()?;
    args.snapshots.apply(&mut config);
    if let Some(backend) = args.backend {
        config.replay_backend = backend;
    }
    if let Some(secs) = args.lease_secs {
        config.replay_lease_secs = secs;
    }
    let mut options = WorkerOptions::from_config(&config);
    options.poll = std::time::Duration::from_secs_f64(args.poll_secs.clamp(0.01, 3600.0));
    let objects = SnapshotStore::open(&config.snapshot_store, &config.database)?;
    runtime()?.block_on(async {
        let store = Store::open_and_migrate(&config.database, &store_options(&config))
            .await
            .with_context(|| format!("cannot open the knowledge base {}", redact_url(&config.database)))?;
        writeln!(
            out,
            "faultline worker {} on {} (snapshots in {}, backend {:?})",
            options.id,
            redact_url(&config.database),
            objects.location(),
            options.backend
        )?;
        out.flush()?;
        let worker = Worker::new(store.clone(), objects, options);
        let code = if args.once {
            match worker.run_one().await? {
                Outcome::Done { job_id, results } => {
                    writeln!(out, "job {job_id} done: {} checks", results.len())?;
                    EXIT_OK
                }
                Outcome::Failed { job_id, error, state } => {
                    writeln!(out, "job {job_id} attempt failed ({}): {error}", state.as_str())?;
                    super::EXIT_NOTHING
                }
                Outcome::LeaseLost { job_id } => {
                    writeln!(out, "job {job_id} was taken over by another worker")?;
                    EXIT_ERROR
                }
            }
        } else {
            worker.run(shutdown_signal()).await;
            EXIT_OK
        };
        store.close().await;
        Ok(code)
    })
}
