//! The state every action of the service can reach: the rule base, the knowledge base and its
//! writer, the configuration and the policy, the limiters and budgets, the snapshot storage.

use std::sync::Arc;

use super::Policy;
use super::auth;
use super::budget::MemoryBudget;
use super::csrf::CsrfKey;
use super::limit::RateLimiter;
use crate::bundle::xid::XidCatalog;
use crate::config::Config;
use crate::kb::Store;
use crate::kb::writer::Writer;
use crate::metrics::Metrics;
use crate::rules::RuleSet;

/// What every request can reach.
#[derive(Clone)]
pub struct AppState {
    /// The rule base.
    pub rules: Arc<RuleSet>,
    /// What each NVIDIA Xid means (the rule base's `xid.toml`), for bundles.
    pub xids: Arc<XidCatalog>,
    /// The knowledge base.
    pub store: Store,
    /// Where incidents are written.
    pub writer: Writer,
    /// The configuration.
    pub config: Arc<Config>,
    /// Counters.
    pub metrics: Arc<Metrics>,
    /// Rate limiter.
    pub limiter: Arc<RateLimiter>,
    /// Verified tokens.
    pub tokens: Arc<auth::TokenCache>,
    /// Wrong tokens per client address.
    pub guesses: Arc<RateLimiter>,
    /// Who may do what.
    pub policy: Policy,
    /// One rule backtest at a time.
    pub backtests: Arc<tokio::sync::Semaphore>,
    /// Signs the pages' CSRF tokens (the knowledge base's shared key once the app opens it).
    pub csrf_key: CsrfKey,
    /// Where tensor snapshots are written (none until the app opens it).
    pub snapshots: crate::objects::SnapshotStore,
    /// Memory shared by the snapshot uploads in flight and the embedded replay worker.
    pub snapshot_memory: MemoryBudget,
}

impl AppState {
    /// State over a store whose writer is already running.
    pub fn new(rules: RuleSet, xids: XidCatalog, store: Store, writer: Writer, config: Config) -> Self {
        Self {
            rules: Arc::new(rules),
            xids: Arc::new(xids),
            store,
            writer,
            limiter: Arc::new(RateLimiter::new(
                config.rate_limit_per_minute,
                config.rate_limit_burst,
            )),
            guesses: Arc::new(RateLimiter::new(auth::GUESSES_PER_MINUTE, auth::GUESS_BURST)),
            policy: config.policy(),
            backtests: Arc::new(tokio::sync::Semaphore::new(1)),
            csrf_key: CsrfKey::random(),
            snapshot_memory: MemoryBudget::new(config.snapshot_memory_budget_bytes as u64),
            config: Arc::new(config),
            metrics: Arc::new(Metrics::default()),
            tokens: Arc::new(auth::TokenCache::default()),
            snapshots: crate::objects::SnapshotStore::disabled(),
        }
    }
}
