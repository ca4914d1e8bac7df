//! Slow and greedy clients cannot take the server down: an in-process server is attacked over
//! real sockets with stalled connections, trickled bodies and huge declared bodies.
//!
//! The attackers connect from 127.0.0.2 (Linux routes all of 127/8 to loopback), so that the
//! per-address cap applies to them and not to the well-behaved client on 127.0.0.1. Deadlines are
//! generous: they catch a hang, they do not measure speed.

#[path = "support/mod.rs"]
mod support;

#[path = "api/server.rs"]
mod server;

use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use faultline::config::Config;
use faultline::service::Access;
use server::TestServer;
use support::TempDb;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// The address the attacks come from.
const ATTACKER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
/// The address of the client that must still be served.
const CLIENT: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);
/// The most stalled connections opened at once (fewer where the open-file limit is low).
const ATTACKERS: usize = 2000;
/// The longest any single step may take before the test calls it a hang.
const HANG: Duration = Duration::from_secs(30);

const HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: faultline\r\nConnection: close\r\n\r\n";
/// One header line, then nothing.
const STALLED: &[u8] = b"GET /healthz HTTP/1.1\r\n";

/// An open server: the attacks here are on connections, whoever may read and write.
fn config(db: &TempDb) -> Config {
    Config {
        database: db.url(),
        access: Access::Open,
        ..Config::default()
    }
}

fn address_of(server: &TestServer) -> SocketAddr {
    let authority = server.base.trim_start_matches("http://");
    authority.parse().unwrap_or_else(|e| panic!("{authority}: {e}"))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// `future`, or a panic naming `what` if it takes longer than [`HANG`].
async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(HANG, future)
        .await
        .unwrap_or_else(|_| panic!("{what}: nothing after {} s", HANG.as_secs()))
}

/// A connection to `server` from `source`.
async fn connect_from(source: Ipv4Addr, server: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap_or_else(|e| panic!("{e}"));
    socket
        .bind(SocketAddr::from((source, 0)))
        .unwrap_or_else(|e| panic!("cannot bind {source}: {e}"));
    within("connecting", socket.connect(server))
        .await
        .unwrap_or_else(|e| panic!("cannot connect from {source}: {e}"))
}

/// What the server sends until it closes the connection (a reset closes it too).
async fn read_until_closed(stream: &mut TcpStream) -> String {
    let mut received = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return String::from_utf8_lossy(&received).into_owned(),
            Ok(n) => received.extend_from_slice(&buffer[..n]),
        }
    }
}

/// Sends `request` from `source` and returns what the server answers before it closes.
async fn exchange(source: Ipv4Addr, server: SocketAddr, request: &[u8]) -> String {
    let mut stream = connect_from(source, server).await;
    let _ = stream.write_all(request).await;
    within("an answer", read_until_closed(&mut stream)).await
}

/// The status code of an HTTP/1.1 answer.
fn status(answer: &str) -> Option<u16> {
    answer.split(' ').nth(1)?.parse().ok()
}

/// The body of an HTTP/1.1 answer sent with a `Content-Length`.
fn body(answer: &str) -> &str {
    answer.split_once("\r\n\r\n").map_or("", |(_, body)| body)
}

/// Whether the server has not closed `stream` (nor sent anything on it) yet.
fn is_open(stream: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(stream.try_read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// Connections from `source` that each send one header line and stop.
async fn stalled_connections(source: Ipv4Addr, server: SocketAddr, count: usize) -> Vec<TcpStream> {
    let mut stalled = Vec::with_capacity(count);
    for _ in 0..count {
        let mut stream = connect_from(source, server).await;
        // A connection over a cap may be closed already: the write may fail, as it should.
        let _ = stream.write_all(STALLED).await;
        stalled.push(stream);
    }
    stalled
}

/// Waits until at least `count` of `streams` are closed by the server.
async fn until_closed(streams: &[TcpStream], count: usize) {
    within("connections closed by the server", async {
        while streams.iter().filter(|s| !is_open(s)).count() < count {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

#[test]
fn stalled_connections_neither_starve_the_health_check_nor_outlive_the_header_timeout() {
    let db = TempDb::new("slow-clients-stalled");
    // The default header timeout (10 s): every attacker is still connected when /healthz is asked.
    let server = TestServer::start(config(&db));
    let address = address_of(&server);
    // The attack and the server share this process's descriptors: leave the server most of them.
    let attackers = faultline::server::open_file_limit().map_or(ATTACKERS, |limit| {
        ATTACKERS.min(usize::try_from(limit / 4).unwrap_or(ATTACKERS))
    });
    runtime().block_on(async {
        let stalled = stalled_connections(ATTACKER, address, attackers).await;
        let health = exchange(CLIENT, address, HEALTHZ).await;
        assert_eq!(
            status(&health),
            Some(200),
            "/healthz during the attack: {health:?}"
        );
        let held = stalled.iter().filter(|s| is_open(s)).count();
        assert!(
            held > 0,
            "the attack was still on (stalled connections held) when /healthz answered"
        );
        // Within the header timeout and a margin, or `until_closed` calls it a hang.
        until_closed(&stalled, stalled.len()).await;
    });
}

#[test]
fn a_client_over_its_connection_cap_is_turned_away_at_once_while_others_are_served() {
    let db = TempDb::new("slow-clients-per-ip");
    // A header timeout far beyond the test: only the cap can close a connection here.
    let server = TestServer::start(Config {
        max_connections_per_ip: 8,
        header_read_timeout_secs: 600,
        ..config(&db)
    });
    let address = address_of(&server);
    runtime().block_on(async {
        let stalled = stalled_connections(ATTACKER, address, 40).await;
        until_closed(&stalled, 32).await;
        let held = stalled.iter().filter(|s| is_open(s)).count();
        assert_eq!(
            held, 8,
            "the server holds as many connections from one address as its cap"
        );

        let health = exchange(CLIENT, address, HEALTHZ).await;
        assert_eq!(
            status(&health),
            Some(200),
            "another address is served: {health:?}"
        );
    });
}

#[test]
fn once_the_server_holds_its_most_connections_it_turns_everyone_away_until_one_closes() {
    let db = TempDb::new("slow-clients-server-cap");
    let server = TestServer::start(Config {
        max_client_connections: Some(4),
        max_connections_per_ip: 0,
        header_read_timeout_secs: 600,
        ..config(&db)
    });
    let address = address_of(&server);
    runtime().block_on(async {
        // Each idle keep-alive connection is known to be counted: it has had an answer.
        let mut idle = Vec::new();
        for _ in 0..4 {
            let mut stream = connect_from(ATTACKER, address).await;
            let _ = stream
                .write_all(b"GET /healthz HTTP/1.1\r\nHost: faultline\r\n\r\n")
                .await;
            let mut answer = [0u8; 512];
            let read = within("a kept-alive answer", stream.read(&mut answer)).await;
            assert!(read.is_ok_and(|n| n > 0), "each of the first four is served");
            idle.push(stream);
        }

        let refused = exchange(CLIENT, address, HEALTHZ).await;
        assert_eq!(refused, "", "a fifth connection is closed without an answer");

        drop(idle.pop());
        within("a slot given back", async {
            loop {
                if status(&exchange(CLIENT, address, HEALTHZ).await) == Some(200) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
    });
}

#[test]
fn a_huge_declared_body_is_refused_before_a_byte_of_it_is_sent() {
    let db = TempDb::new("slow-clients-length");
    let server = TestServer::start(config(&db));
    let address = address_of(&server);
    let token = server.token.clone();
    runtime().block_on(async {
        let api = format!(
            "POST /api/v1/analyze HTTP/1.1\r\nHost: faultline\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: text/plain\r\nContent-Length: 10000000000\r\n\r\n"
        );
        let answer = exchange(CLIENT, address, api.as_bytes()).await;
        assert_eq!(status(&answer), Some(413), "{answer:?}");
        let error: serde_json::Value = serde_json::from_str(body(&answer))
            .unwrap_or_else(|e| panic!("not the API's JSON error ({e}): {answer:?}"));
        assert_eq!(error["error"], "payload_too_large");

        let upload = format!(
            "POST /api/v1/incidents/1/snapshots HTTP/1.1\r\nHost: faultline\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/octet-stream\r\nContent-Length: 10000000000\r\n\r\n"
        );
        let answer = exchange(CLIENT, address, upload.as_bytes()).await;
        assert_eq!(status(&answer), Some(413), "{answer:?}");
        let limit = (512u64 << 20).to_string();
        assert!(
            body(&answer).contains(&limit),
            "a snapshot upload is held to snapshot_max_bytes: {answer:?}"
        );

        let page = b"POST /incidents/1/snapshots HTTP/1.1\r\nHost: faultline\r\n\
             Content-Type: multipart/form-data; boundary=x\r\nContent-Length: 10000000000\r\n\r\n";
        let answer = exchange(CLIENT, address, page).await;
        assert_eq!(status(&answer), Some(413), "{answer:?}");
        assert!(answer.contains("text/html"), "a page gets the error page: {answer:?}");
    });
}

#[test]
fn a_snapshot_upload_may_declare_more_than_an_ordinary_body() {
    let db = TempDb::new("slow-clients-snapshot-size");
    let server = TestServer::start(config(&db));
    let address = address_of(&server);
    runtime().block_on(async {
        // 20 MiB: over max_body_bytes (16 MiB), under snapshot_max_bytes (512 MiB). The server asks
        // for the body (100 Continue) instead of refusing it.
        let mut stream = connect_from(CLIENT, address).await;
        let _ = stream
            .write_all(
                b"POST /incidents/1/snapshots HTTP/1.1\r\nHost: faultline\r\nOrigin: http://faultline\r\nExpect: 100-continue\r\n\
                  Content-Type: multipart/form-data; boundary=x\r\nContent-Length: 20971520\r\n\r\n",
            )
            .await;
        let mut answer = [0u8; 64];
        let read = within("the interim answer", stream.read(&mut answer))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let answer = String::from_utf8_lossy(&answer[..read]);
        assert_eq!(status(&answer), Some(100), "{answer:?}");
    });
}

#[test]
fn a_trickled_body_is_cut_off_at_the_request_timeout() {
    let db = TempDb::new("slow-clients-trickle");
    let server = TestServer::start(Config {
        request_timeout_secs: 1,
        ..config(&db)
    });
    let address = address_of(&server);
    let token = server.token.clone();
    runtime().block_on(async {
        let request = format!(
            "POST /api/v1/analyze HTTP/1.1\r\nHost: faultline\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: text/plain\r\nContent-Length: 1000\r\n\r\nTraceback "
        );
        // Ten bytes of a thousand, then nothing: the server answers and closes the connection.
        let answer = exchange(CLIENT, address, request.as_bytes()).await;
        assert_eq!(status(&answer), Some(503), "{answer:?}");
    });
}

#[test]
fn the_rate_limit_tells_clients_apart_by_their_address() {
    let db = TempDb::new("slow-clients-connect-info");
    let server = TestServer::start(Config {
        rate_limit_per_minute: 1,
        rate_limit_burst: 2,
        ..config(&db)
    });
    let address = address_of(&server);
    let rules = b"GET /api/v1/rules HTTP/1.1\r\nHost: faultline\r\nConnection: close\r\n\r\n";
    runtime().block_on(async {
        let mut statuses = Vec::new();
        for _ in 0..3 {
            statuses.push(status(&exchange(ATTACKER, address, rules).await));
        }
        assert_eq!(statuses, [Some(200), Some(200), Some(429)]);
        let other = exchange(CLIENT, address, rules).await;
        assert_eq!(status(&other), Some(200), "another address has its own budget");
    });
}

#[test]
fn shutdown_waits_for_no_idle_or_stalled_connection() {
    let db = TempDb::new("slow-clients-shutdown");
    let server = TestServer::start(Config {
        header_read_timeout_secs: 600,
        ..config(&db)
    });
    let address = address_of(&server);
    let runtime = runtime();
    let (mut idle, mut stalled) = runtime.block_on(async {
        let mut idle = connect_from(CLIENT, address).await;
        let _ = idle
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: faultline\r\n\r\n")
            .await;
        let mut answer = [0u8; 512];
        let read = within("a kept-alive answer", idle.read(&mut answer)).await;
        assert!(read.is_ok_and(|n| n > 0));
        let stalled = stalled_connections(CLIENT, address, 1).await;
        (idle, stalled)
    });

    let (stopped, done) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(server);
        let _ = stopped.send(());
    });
    assert!(
        done.recv_timeout(HANG).is_ok(),
        "the server stopped with an idle and a stalled connection open"
    );
    runtime.block_on(async {
        within("the idle connection closed", read_until_closed(&mut idle)).await;
        for stream in &mut stalled {
            within("the stalled connection closed", read_until_closed(stream)).await;
        }
    });
}
