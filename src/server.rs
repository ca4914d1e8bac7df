//! The HTTP server: our own accept loop over hyper-util's HTTP/1 and HTTP/2 connections, so that slow
//! or greedy clients cannot take the service down.
//!
//! It owns what happens to a connection before and around the routes: the cap on open connections
//! (the whole server's, kept well under the open-file limit, and each client address's), the header
//! read timeout, the [`ConnectInfo`] of each request, and graceful shutdown (stop accepting, finish
//! the requests in flight, then return). A connection over a cap is closed as soon as it is
//! accepted: it never holds a descriptor.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::pin::pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::ConnectInfo;
use axum::http::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tower::ServiceExt;

use crate::config::Config;

/// The open-file limit assumed where it cannot be read (the usual soft default).
const ASSUMED_FILE_LIMIT: u64 = 1024;

/// Time given to the requests in flight at shutdown beyond the longest request deadline.
const DRAIN_MARGIN: Duration = Duration::from_secs(5);

/// Refused connections are logged at most this often, so that an attack does not flood the log.
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(60);

/// How the server treats connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerOptions {
    /// A client that has not sent a whole request head within this time is disconnected (the first
    /// request of a connection, HTTP/1 or HTTP/2, and each later HTTP/1 request).
    pub header_read_timeout: Duration,
    /// Most connections open at once, all clients together.
    pub max_connections: usize,
    /// Most connections open at once from one IP address; 0: no such cap.
    pub max_connections_per_ip: usize,
    /// At shutdown, connections still open after this long are dropped (a client that does not
    /// read its response cannot hold the shutdown forever).
    pub drain_timeout: Duration,
}

impl ServerOptions {
    /// The options a configuration asks for, with the process's open-file limit (see
    /// [`open_file_limit`]). A connection cap above [`connection_ceiling`] is lowered to it.
    pub fn from_config(config: &Config, file_limit: Option<u64>) -> Self {
        let ceiling = connection_ceiling(file_limit);
        let max_connections = match config.max_client_connections {
            Some(asked) if asked > ceiling => {
                tracing::warn!(
                    asked,
                    ceiling,
                    "max_client_connections is over half the open-file limit: lowered (raise `ulimit -n` to allow more)"
                );
                ceiling
            }
            Some(asked) => asked.max(1),
            None => ceiling,
        };
        let longest_request =
            Duration::from_secs(config.request_timeout_secs.max(1)).max(crate::app::UPLOAD_TIMEOUT);
        Self {
            header_read_timeout: Duration::from_secs(config.header_read_timeout_secs.max(1)),
            max_connections,
            max_connections_per_ip: config.max_connections_per_ip,
            drain_timeout: longest_request + DRAIN_MARGIN,
        }
    }
}

/// The soft limit on this process's open files, from `/proc/self/limits`; `None` where that file
/// cannot be read (not Linux) or says `unlimited`.
pub fn open_file_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    parse_open_file_limit(&limits)
}

/// The soft `Max open files` of a `/proc/<pid>/limits` text.
pub fn parse_open_file_limit(limits: &str) -> Option<u64> {
    const ROW: &str = "Max open files";
    let row = limits.lines().find(|line| line.starts_with(ROW))?;
    row[ROW.len()..].split_whitespace().next()?.parse().ok()
}

/// The most client connections an open-file limit allows: half of it (1024 assumed when unknown),
/// the other half left to the database pool, snapshot files, the replay worker and the log.
pub fn connection_ceiling(file_limit: Option<u64>) -> usize {
    let half = file_limit.unwrap_or(ASSUMED_FILE_LIMIT) / 2;
    usize::try_from(half).unwrap_or(usize::MAX).max(1)
}

/// Why a connection was closed as soon as it was accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The server holds its most connections.
    #[error("the server holds its most connections ({0})")]
    ServerFull(usize),
    /// This client address holds its most connections.
    #[error("this client address holds its most connections ({0})")]
    ClientFull(usize),
}

/// The connections open, in all and per client address, against their caps.
#[derive(Debug)]
pub struct ConnectionCounts {
    max_total: usize,
    max_per_ip: usize,
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

/// One open connection, counted until it is dropped.
#[derive(Debug)]
pub struct ConnectionSlot {
    counts: Arc<ConnectionCounts>,
    ip: IpAddr,
}

impl ConnectionCounts {
    /// Counts under `max_total` connections in all and `max_per_ip` per address (0: no such cap).
    pub fn new(max_total: usize, max_per_ip: usize) -> Arc<Self> {
        Arc::new(Self {
            max_total,
            max_per_ip,
            open: Mutex::new(Open::default()),
        })
    }

    fn open(&self) -> std::sync::MutexGuard<'_, Open> {
        // The counts stay right even if a holder panicked: each change is one statement.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot for one more connection from `ip`, or why there is none.
    pub fn try_open(self: &Arc<Self>, ip: IpAddr) -> Result<ConnectionSlot, Refused> {
        // An IPv4 client of a socket bound to `[::]` shows as `::ffff:a.b.c.d`: one address either way.
        let ip = ip.to_canonical();
        let mut open = self.open();
        if open.total >= self.max_total {
            return Err(Refused::ServerFull(self.max_total));
        }
        if self.max_per_ip > 0 {
            let of_ip = open.per_ip.entry(ip).or_default();
            if *of_ip >= self.max_per_ip {
                return Err(Refused::ClientFull(self.max_per_ip));
            }
            *of_ip += 1;
        }
        open.total += 1;
        Ok(ConnectionSlot {
            counts: Arc::clone(self),
            ip,
        })
    }

    /// Connections open, all clients together.
    pub fn total(&self) -> usize {
        self.open().total
    }

    /// Connections open from `ip` (0 when there is no per-address cap).
    pub fn of(&self, ip: IpAddr) -> usize {
        self.open().per_ip.get(&ip.to_canonical()).copied().unwrap_or(0)
    }

    /// Addresses with a connection open (0 when there is no per-address cap).
    pub fn addresses(&self) -> usize {
        self.open().per_ip.len()
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut open = self.counts.open();
        open.total = open.total.saturating_sub(1);
        if let Some(of_ip) = open.per_ip.get_mut(&self.ip) {
            *of_ip = of_ip.saturating_sub(1);
            if *of_ip == 0 {
                open.per_ip.remove(&self.ip);
            }
        }
    }
}

/// Serves `router` on `listener` until `shutdown` resolves; then stops accepting, lets the
/// requests in flight finish (for at most `options.drain_timeout`) and returns.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    options: ServerOptions,
    shutdown: impl Future<Output = ()>,
) {
    tracing::info!(
        max_connections = options.max_connections,
        max_connections_per_ip = options.max_connections_per_ip,
        header_read_timeout_secs = options.header_read_timeout.as_secs(),
        "connection limits"
    );
    let counts = ConnectionCounts::new(options.max_connections, options.max_connections_per_ip);
    let builder = connection_builder(&options);
    let (stop, stopping) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut refusals = RefusalLog::default();
    let mut shutdown = pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(ended) = connections.join_next(), if !connections.is_empty() => {
                if let Err(e) = ended {
                    tracing::error!(error = %e, "a connection task failed");
                }
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, remote)) => match counts.try_open(remote.ip()) {
                    Ok(slot) => {
                        let connection = Connection {
                            builder: builder.clone(),
                            router: router.clone(),
                            remote,
                            header_read_timeout: options.header_read_timeout,
                            stopping: stopping.clone(),
                            _slot: slot,
                        };
                        connections.spawn(connection.serve(stream));
                    }
                    Err(refused) => {
                        drop(stream);
                        refusals.note(refused, remote);
                    }
                },
                Err(error) => accept_failed(error).await,
            },
        }
    }
    drop(listener);
    let _ = stop.send(true);
    let drained = tokio::time::timeout(options.drain_timeout, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            open = connections.len(),
            "connections still open {} s after shutdown began: dropped",
            options.drain_timeout.as_secs()
        );
        connections.shutdown().await;
    }
}

/// HTTP/1 and HTTP/2 (by its preface), as `axum::serve` has them, with the timeouts of `options`.
fn connection_builder(options: &ServerOptions) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout);
    // A peer that stops answering pings is disconnected.
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(options.header_read_timeout)
        .keep_alive_timeout(options.header_read_timeout);
    builder
}

/// An accept that failed. A connection reset before it was accepted is nothing; anything else
/// (out of descriptors above all) is logged, and the loop waits a moment for connections to close.
async fn accept_failed(error: std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        error.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return;
    }
    tracing::error!(%error, "cannot accept a connection");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// Connections refused since the last log line.
#[derive(Default)]
struct RefusalLog {
    last: Option<Instant>,
    unlogged: u64,
}

impl RefusalLog {
    fn note(&mut self, refused: Refused, remote: SocketAddr) {
        self.unlogged += 1;
        if self.last.is_none_or(|at| at.elapsed() >= REFUSAL_LOG_EVERY) {
            tracing::warn!(
                %remote,
                refused = self.unlogged,
                "{refused}: connection closed (logged at most once a minute)"
            );
            self.last = Some(Instant::now());
            self.unlogged = 0;
        }
    }
}

/// One accepted connection and what it needs to be served.
struct Connection {
    builder: Builder<TokioExecutor>,
    router: Router,
    remote: SocketAddr,
    header_read_timeout: Duration,
    stopping: watch::Receiver<bool>,
    /// Counted as open until this is dropped with the connection.
    _slot: ConnectionSlot,
}

impl Connection {
    /// Serves requests until the client or the server closes the connection.
    ///
    /// Until its first request, the connection has `header_read_timeout` to send one: hyper's own
    /// timeout covers HTTP/1 request heads, not the bytes read to tell HTTP/1 from HTTP/2. A
    /// connection with no request yet is closed at once at shutdown; one with a request has it
    /// finished first.
    async fn serve(mut self, stream: TcpStream) {
        let remote = self.remote;
        let first_request = Arc::new(Notify::new());
        let service = {
            let first_request = Arc::clone(&first_request);
            self.router.map_request(move |mut req: Request<Incoming>| {
                first_request.notify_one();
                req.extensions_mut().insert(ConnectInfo(remote));
                req
            })
        };
        let connection = self
            .builder
            .serve_connection_with_upgrades(TokioIo::new(stream), TowerToHyperService::new(service));
        let mut connection = pin!(connection);
        let no_request = tokio::time::sleep(self.header_read_timeout);
        let mut no_request = pin!(no_request);
        let mut waiting = true;
        let mut shutting_down = false;
        loop {
            tokio::select! {
                ended = connection.as_mut() => {
                    if let Err(error) = ended {
                        tracing::debug!(%remote, %error, "connection ended");
                    }
                    return;
                }
                () = first_request.notified(), if waiting => waiting = false,
                () = &mut no_request, if waiting => {
                    tracing::debug!(%remote, "no request within the header read timeout: connection closed");
                    return;
                }
                _ = self.stopping.wait_for(|stop| *stop), if !shutting_down => {
                    if waiting {
                        return;
                    }
                    shutting_down = true;
                    connection.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    const LIMITS: &str = "Limit                     Soft Limit           Hard Limit           Units     \n\
        Max cpu time              unlimited            unlimited            seconds   \n\
        Max open files            20000                524288               files     \n\
        Max locked memory         8388608              8388608              bytes     \n";

    #[test]
    fn the_soft_open_file_limit_is_read_from_the_limits_table() {
        assert_eq!(parse_open_file_limit(LIMITS), Some(20000));
    }

    #[test]
    fn an_unlimited_or_missing_open_file_limit_is_unknown() {
        let unlimited = LIMITS.replace("20000    ", "unlimited");
        assert_eq!(parse_open_file_limit(&unlimited), None);
        assert_eq!(
            parse_open_file_limit("Max cpu time unlimited unlimited seconds"),
            None
        );
        assert_eq!(parse_open_file_limit(""), None);
    }

    #[test]
    fn this_process_has_a_readable_open_file_limit_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(open_file_limit().is_some_and(|n| n > 0));
        }
    }

    #[test]
    fn the_connection_ceiling_is_half_the_file_limit() {
        assert_eq!(connection_ceiling(Some(20000)), 10000);
        assert_eq!(connection_ceiling(Some(1)), 1);
        assert_eq!(connection_ceiling(None), 512);
    }

    #[test]
    fn the_default_cap_follows_the_file_limit_and_a_larger_one_is_lowered() {
        let config = Config::default();
        assert_eq!(
            ServerOptions::from_config(&config, Some(4096)).max_connections,
            2048
        );
        let asked = Config {
            max_client_connections: Some(100_000),
            ..Config::default()
        };
        assert_eq!(
            ServerOptions::from_config(&asked, Some(4096)).max_connections,
            2048
        );
        let modest = Config {
            max_client_connections: Some(300),
            ..Config::default()
        };
        assert_eq!(
            ServerOptions::from_config(&modest, Some(4096)).max_connections,
            300
        );
    }

    #[test]
    fn shutdown_waits_for_the_longest_request_and_no_longer() {
        let options = ServerOptions::from_config(&Config::default(), None);
        assert_eq!(options.drain_timeout, crate::app::UPLOAD_TIMEOUT + DRAIN_MARGIN);
        assert_eq!(options.header_read_timeout, Duration::from_secs(10));
    }

    #[test]
    fn a_client_over_its_cap_is_refused_while_others_are_served() {
        let counts = ConnectionCounts::new(100, 2);
        let first = counts.try_open(ip("127.0.0.2"));
        let second = counts.try_open(ip("127.0.0.2"));
        assert!(first.is_ok() && second.is_ok());
        assert_eq!(
            counts.try_open(ip("127.0.0.2")).err(),
            Some(Refused::ClientFull(2))
        );
        assert!(counts.try_open(ip("127.0.0.1")).is_ok());
        assert_eq!(counts.of(ip("127.0.0.2")), 2);
    }

    #[test]
    fn the_server_cap_counts_every_client() {
        let counts = ConnectionCounts::new(2, 0);
        let held: Vec<_> = ["10.0.0.1", "10.0.0.2"]
            .iter()
            .map(|a| counts.try_open(ip(a)))
            .collect();
        assert!(held.iter().all(Result::is_ok));
        assert_eq!(
            counts.try_open(ip("10.0.0.3")).err(),
            Some(Refused::ServerFull(2))
        );
        assert_eq!(counts.total(), 2);
    }

    #[test]
    fn a_closed_connection_gives_its_slot_back() {
        let counts = ConnectionCounts::new(1, 1);
        let slot = counts.try_open(ip("127.0.0.2"));
        assert!(counts.try_open(ip("127.0.0.2")).is_err());
        drop(slot);
        assert_eq!((counts.total(), counts.addresses()), (0, 0));
        assert!(counts.try_open(ip("127.0.0.2")).is_ok());
    }

    #[test]
    fn a_refused_connection_takes_no_slot() {
        let counts = ConnectionCounts::new(10, 1);
        let _held = counts.try_open(ip("127.0.0.2"));
        for _ in 0..5 {
            assert!(counts.try_open(ip("127.0.0.2")).is_err());
        }
        assert_eq!((counts.total(), counts.of(ip("127.0.0.2"))), (1, 1));
    }

    #[test]
    fn an_ipv4_client_seen_through_an_ipv6_socket_is_one_address() {
        let counts = ConnectionCounts::new(10, 1);
        let _held = counts.try_open(ip("192.0.2.7"));
        assert_eq!(
            counts.try_open(ip("::ffff:192.0.2.7")).err(),
            Some(Refused::ClientFull(1))
        );
    }

    #[test]
    fn without_a_per_address_cap_one_client_may_fill_the_server() {
        let counts = ConnectionCounts::new(3, 0);
        let held: Vec<_> = (0..3).map(|_| counts.try_open(ip("127.0.0.2"))).collect();
        assert!(held.iter().all(Result::is_ok));
        assert_eq!(counts.addresses(), 0);
        assert_eq!(
            counts.try_open(ip("127.0.0.2")).err(),
            Some(Refused::ServerFull(3))
        );
    }
}
