//! Nothing acknowledged is lost: clients submit incidents while the server is killed with SIGKILL;
//! after a restart on the same database, every incident that got a 2xx is there.

#[path = "api/server.rs"]
mod server;
mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use server::{call, try_call};

const LOG: &str = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.23 GiB is free.\n";

fn acknowledged_incidents_survive_a_kill(database: &str) {
    let token = support::create_token(database, "crash");

    let (mut child, base) = support::start_server(support::faultline(), database);
    let acked: Arc<Mutex<Vec<(i64, String)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..4)
        .map(|t| {
            let (acked, stop, base, token) = (acked.clone(), stop.clone(), base.clone(), token.clone());
            std::thread::spawn(move || {
                for i in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let commit = format!("c{t}-{i}");
                    let body = serde_json::json!({ "log": LOG, "commit": commit }).to_string();
                    let url = format!("{base}/api/v1/analyze");
                    // A request cut by the kill is not acknowledged: it may or may not be stored.
                    let answer = try_call(
                        &url,
                        "POST",
                        Some("application/json"),
                        body.as_bytes(),
                        Some(&token),
                    );
                    match answer {
                        Ok(a) if (200..300).contains(&a.status) => {
                            let id = support::json_i64(&a.json(), "incident_id");
                            acked.lock().unwrap_or_else(|e| e.into_inner()).push((id, commit));
                        }
                        _ => break,
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    child
        .kill()
        .unwrap_or_else(|e| panic!("cannot kill the server: {e}"));
    let _ = child.wait();
    stop.store(true, Ordering::Relaxed);
    // A client that panicked (an acknowledgement without an incident id) fails the test here
    // rather than leaving fewer acknowledgements behind.
    for c in clients {
        c.join()
            .unwrap_or_else(|_| panic!("a client thread panicked (see its message above)"));
    }
    let acked = acked.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(
        acked.len() > 20,
        "too few requests before the kill: {}",
        acked.len()
    );

    let (mut child, base) = support::start_server(support::faultline(), database);
    for (id, commit) in &acked {
        let answer = call(&format!("{base}/api/v1/incidents/{id}"), "GET", None, b"", None);
        assert_eq!(answer.status, 200, "acknowledged incident {id} is lost");
        assert_eq!(answer.json()["commit"], commit.as_str());
    }
    eprintln!("{} acknowledged incidents survived SIGKILL", acked.len());
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn acknowledged_incidents_survive_a_kill_on_sqlite() {
    let db = support::TempDb::new("crash");
    acknowledged_incidents_survive_a_kill(&db.url());
}

#[test]
fn acknowledged_incidents_survive_a_kill_on_postgres() {
    let runtime = tokio::runtime::Runtime::new().unwrap_or_else(|e| panic!("{e}"));
    let Some(url) = runtime.block_on(support::postgres_database("crash")) else {
        return;
    };
    acknowledged_incidents_survive_a_kill(&url);
}
