//! Running the service: open the knowledge base and the snapshot storage, start the writer and
//! (unless turned off) the embedded replay worker, serve the routes until SIGTERM or Ctrl-C, then
//! finish the requests in flight and commit every acknowledged incident.

use anyhow::Context;
use axum::Router;
use tokio::net::TcpListener;

use crate::api::{self, AppState};
use crate::config::{Config, redact_url};
use crate::kb::writer::Writer;
use crate::kb::{Store, StoreOptions};
use crate::objects::SnapshotStore;
use crate::rules::RuleSet;
use crate::server::{self, ServerOptions};
use crate::service::bundle::xid_catalog;
use crate::service::csrf::CsrfKey;
use crate::web;
use crate::worker::{Worker, WorkerOptions};

mod layers;
pub use layers::UPLOAD_TIMEOUT;

/// The store options a configuration asks for.
pub fn store_options(config: &Config) -> StoreOptions {
    StoreOptions {
        max_connections: config.max_connections,
        sqlite_synchronous: config.sqlite_synchronous.clone(),
    }
}

/// Everything the server needs, built from a configuration.
pub struct App {
    /// The shared state.
    pub state: AppState,
    writer_task: tokio::task::JoinHandle<()>,
    worker: Option<EmbeddedWorker>,
}

/// The replay worker running in the server's process.
struct EmbeddedWorker {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl EmbeddedWorker {
    fn spawn(worker: Worker) -> Self {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            worker
                .run(async {
                    let _ = stopped.await;
                })
                .await;
        });
        Self { stop, task }
    }
}

impl App {
    /// Loads the rules, opens and migrates the store, opens the snapshot storage, starts the
    /// writer and the embedded replay worker (unless `embedded_worker` is off).
    pub async fn start(config: Config, rules: RuleSet) -> anyhow::Result<Self> {
        let store = Store::open_and_migrate(&config.database, &store_options(&config))
            .await
            .with_context(|| format!("cannot open the knowledge base {}", redact_url(&config.database)))?;
        let snapshots = SnapshotStore::open(&config.snapshot_store, &config.database)?;
        tracing::info!(
            location = snapshots.location(),
            summary_only = config.snapshot_summary_only,
            embedded_worker = config.embedded_worker,
            "snapshot storage"
        );
        let (writer, writer_task) = Writer::spawn(store.clone(), config.write_batch);
        let csrf_key = store.server_secret("csrf").await?;
        let xids = xid_catalog(config.rules.as_deref())?;
        let mut state = AppState::new(rules, xids, store.clone(), writer, config);
        state.snapshots = snapshots.clone();
        state.csrf_key = CsrfKey::from_hex(&csrf_key).context("the stored CSRF key is not 64 hex digits")?;
        // The worker shares the uploads' snapshot memory budget.
        let worker = state.config.embedded_worker.then(|| {
            let options = WorkerOptions::from_config(&state.config);
            let worker = Worker::new(store, snapshots, options).with_budget(state.snapshot_memory.clone());
            EmbeddedWorker::spawn(worker)
        });
        Ok(Self {
            state,
            writer_task,
            worker,
        })
    }

    /// All routes: the API, the operational endpoints and the web pages.
    pub fn router(&self) -> Router {
        router(self.state.clone())
    }

    /// Serves on `listener` until `shutdown` resolves, then drains the writer and closes the store.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let options = ServerOptions::from_config(&self.state.config, server::open_file_limit());
        server::serve(listener, self.router(), options, shutdown).await;
        let App {
            state,
            writer_task,
            worker,
        } = self;
        // A job in flight is dropped: its lease expires and it runs again at the next start.
        if let Some(worker) = worker {
            let _ = worker.stop.send(());
            let _ = worker.task.await;
        }
        let store = state.store.clone();
        drop(state);
        // Every handle to the writer is gone: it commits what is queued, then ends.
        let _ = writer_task.await;
        store.close().await;
        Ok(())
    }
}

/// All routes over `state`, with the server-wide layers and the security headers.
pub fn router(state: AppState) -> Router {
    let routes = api::routes(state.clone())
        .merge(web::router(state.clone()))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed);
    layers::with_layers(routes, state).layer(axum::middleware::from_fn(web::security_headers))
}

/// A path no route serves: the API's JSON 404 under /api, the site's page elsewhere.
async fn not_found(uri: axum::http::Uri) -> axum::response::Response {
    use axum::response::IntoResponse;
    if uri.path().starts_with("/api/") {
        return api::not_found(uri).await.into_response();
    }
    web::not_found(&uri)
}

/// A known route asked with a method it does not take, answered by its face.
async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> axum::response::Response {
    use axum::response::IntoResponse;
    if uri.path().starts_with("/api/") {
        return api::method_not_allowed(method, uri).await.into_response();
    }
    web::method_not_allowed(&method, &uri)
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutting down: finishing requests in flight");
}
