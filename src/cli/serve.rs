//! `faultline serve`, `faultline migrate`, `faultline token create`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};

use super::{EXIT_OK, RulesOption};
use crate::app::{App, shutdown_signal, store_options};
use crate::config::{Config, redact_url};
use crate::kb::Store;
use crate::service::Access;

/// Where the configuration comes from, shared by the server commands.
#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// Configuration file (default: faultline.toml in the working directory, when present).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Database URL: sqlite://FILE (default sqlite://faultline.db) or postgres://….
    #[arg(long, value_name = "URL")]
    database: Option<String>,
}

impl ConfigArgs {
    /// The configuration: defaults < file < environment < `--database`.
    pub(super) fn load(&self) -> anyhow::Result<Config> {
        let mut config = Config::load(self.config.as_deref(), |name| std::env::var(name).ok())?;
        if let Some(db) = &self.database {
            config.database = db.clone();
        }
        Ok(config)
    }
}

/// Arguments of `faultline serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    config: ConfigArgs,
    /// Address to listen on (default 127.0.0.1:8080).
    #[arg(long, value_name = "ADDR")]
    bind: Option<std::net::SocketAddr>,
    /// Who may read and write, on the API and the pages: auto (default: open to this machine
    /// when bound to loopback, a token for everything otherwise), open, token-for-writes, private.
    #[arg(long, value_name = "MODE")]
    access: Option<Access>,
    /// Same as `--access open`: anyone who reaches the server reads every stored log and writes.
    #[arg(long, conflicts_with = "access")]
    open: bool,
    /// Deprecated: `--access private`.
    #[arg(long, hide = true)]
    require_token_for_reads: bool,
    /// Deprecated: `--access private`.
    #[arg(long, hide = true)]
    web_requires_token: bool,
    /// Requests per minute per client; 0 turns the limit off.
    #[arg(long, value_name = "N")]
    rate_limit: Option<u32>,
    /// Most client connections open at once (default and most: half the open-file limit).
    #[arg(long, value_name = "N")]
    max_client_connections: Option<usize>,
    /// Most connections open at once from one IP address (default 256); 0 turns the cap off.
    /// Behind a reverse proxy every client has the proxy's address: raise it or turn it off.
    #[arg(long, value_name = "N")]
    max_connections_per_ip: Option<usize>,
    #[command(flatten)]
    rules: RulesOption,
    /// Run no replay worker in this process (standalone `faultline worker`s do the jobs).
    #[arg(long)]
    no_worker: bool,
    #[command(flatten)]
    snapshots: SnapshotArgs,
}

/// Where snapshots are kept, shared by `serve` and `worker`.
#[derive(Debug, Args)]
pub struct SnapshotArgs {
    /// Snapshot storage: a folder, or s3://bucket/prefix (endpoint and credentials from AWS_*
    /// variables); default: a `snapshots` folder beside the SQLite file.
    #[arg(long, value_name = "DIR|s3://BUCKET/PREFIX")]
    snapshot_store: Option<String>,
    /// Keep only what snapshots hold and the check results, not their tensors (each file is
    /// deleted once its job has finished).
    #[arg(long)]
    snapshot_summary_only: bool,
    /// Delete snapshot files older than this many days (0 keeps them).
    #[arg(long, value_name = "DAYS")]
    snapshot_retention_days: Option<u32>,
}

impl SnapshotArgs {
    /// Applies the flags to `config`.
    pub(super) fn apply(&self, config: &mut Config) {
        if let Some(store) = &self.snapshot_store {
            config.snapshot_store = store.clone();
        }
        if self.snapshot_summary_only {
            config.snapshot_summary_only = true;
        }
        if let Some(days) = self.snapshot_retention_days {
            config.snapshot_retention_days = days;
        }
    }
}

/// Arguments of `faultline migrate`.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    #[command(flatten)]
    config: ConfigArgs,
}

/// Arguments of `faultline token`.
#[derive(Debug, Args)]
pub struct TokenArgs {
    #[command(subcommand)]
    command: TokenCommand,
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Creates an API token and prints it once (only its hash is stored).
    Create {
        /// A name for the token (`ci`, `alice`).
        #[arg(long)]
        name: String,
        #[command(flatten)]
        config: ConfigArgs,
    },
}

/// A multi-threaded async runtime.
pub(super) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Logs to standard error, filtered by `FAULTLINE_LOG` (default `info`).
pub(super) fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("FAULTLINE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

pub(super) fn serve(args: &ServeArgs, out: &mut impl Write) -> anyhow::Result<u8> {
    init_logging();
    let mut config = args.config.load()?;
    if let Some(bind) = args.bind {
        config.bind = bind;
    }
    if let Some(access) = args.access {
        config.access = access;
    }
    if args.open {
        config.access = Access::Open;
    }
    if args.require_token_for_reads || args.web_requires_token {
        config.access = Access::Private;
    }
    if let Some(n) = args.rate_limit {
        config.rate_limit_per_minute = n;
    }
    if let Some(n) = args.max_client_connections {
        config.max_client_connections = Some(n);
    }
    if let Some(n) = args.max_connections_per_ip {
        config.max_connections_per_ip = n;
    }
    if args.rules.dir.is_some() {
        config.rules = args.rules.dir.clone();
    }
    if args.no_worker {
        config.embedded_worker = false;
    }
    args.snapshots.apply(&mut config);
    let rules = super::load_rules(config.rules.as_deref())?;
    runtime()?.block_on(async move {
        let listener = tokio::net::TcpListener::bind(config.bind)
            .await
            .with_context(|| format!("cannot listen on {}", config.bind))?;
        let address = listener.local_addr()?;
        let database = redact_url(&config.database);
        let count = rules.rules().len();
        let policy = config.policy();
        let app = App::start(config, rules).await?;
        writeln!(
            out,
            "faultline listening on http://{address} (database {database}, {count} rules; access {}: {})",
            policy.mode(),
            policy.describe()
        )?;
        if policy.exposes_logs() {
            tracing::warn!(
                "access {}: anyone who reaches {address} can read every stored log",
                policy.mode()
            );
        }
        out.flush()?;
        app.serve(listener, shutdown_signal()).await?;
        Ok(EXIT_OK)
    })
}

pub(super) fn migrate(args: &MigrateArgs, out: &mut impl Write) -> anyhow::Result<u8> {
    let config = args.config.load()?;
    runtime()?.block_on(async {
        let store = Store::open(&config.database, &store_options(&config)).await?;
        store.migrate().await?;
        store.close().await;
        Ok::<_, anyhow::Error>(())
    })?;
    writeln!(out, "{}: schema up to date", redact_url(&config.database))?;
    Ok(EXIT_OK)
}

pub(super) fn token(args: &TokenArgs, out: &mut impl Write) -> anyhow::Result<u8> {
    let TokenCommand::Create { name, config } = &args.command;
    let config = config.load()?;
    let token = runtime()?.block_on(async {
        let store = Store::open_and_migrate(&config.database, &store_options(&config)).await?;
        let token = store.create_token(name).await;
        store.close().await;
        token
    })?;
    writeln!(out, "{token}")?;
    eprintln!(
        "faultline: token {name:?} created; it is shown only this once. Send it as `Authorization: Bearer <token>`."
    );
    Ok(EXIT_OK)
}
