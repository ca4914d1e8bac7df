//! `faultline replay`: runs one replay check offline.

use std::io::Write;

/// Arguments of `faultline replay`.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {}

/// Runs the command.
pub fn run(_args: &ReplayArgs, _out: &mut dyn Write) -> anyhow::Result<u8> {
    // INTERFACE: implemented by the replay work.
    anyhow::bail!("not implemented yet")
}
