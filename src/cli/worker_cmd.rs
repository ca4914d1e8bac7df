//! `faultline worker`: runs a standalone replay worker.

use std::io::Write;

/// Arguments of `faultline worker`.
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {}

/// Runs the command.
pub fn run(_args: &WorkerArgs, _out: &mut dyn Write) -> anyhow::Result<u8> {
    // INTERFACE: implemented by the replay work.
    anyhow::bail!("not implemented yet")
}
