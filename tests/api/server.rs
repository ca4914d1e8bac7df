#![allow(dead_code)]
//! An in-process server on a loopback port, and a small blocking HTTP client for the tests.

use std::net::SocketAddr;
use std::thread::JoinHandle;

use faultline::app::App;
use faultline::config::Config;
use faultline::rules::RuleSet;

/// A running server; stopped (gracefully) on drop.
pub struct TestServer {
    pub base: String,
    pub token: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl TestServer {
    pub fn start(config: Config) -> Self {
        let (addr_tx, addr_rx) = std::sync::mpsc::channel::<(SocketAddr, String)>();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Runtime::new().unwrap_or_else(|e| panic!("{e}"));
            runtime.block_on(async move {
                let rules = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
                let app = App::start(config, rules)
                    .await
                    .unwrap_or_else(|e| panic!("{e:#}"));
                // The first server on a database names its token "tests"; a later one on the same
                // database (a test that restarts with other settings) gets a name of its own.
                let store = &app.state.store;
                let token = match store.create_token("tests").await {
                    Ok(token) => token,
                    Err(_) => store
                        .create_token(&format!("tests-{}", std::process::id() ^ server_nonce()))
                        .await
                        .unwrap_or_else(|e| panic!("{e}")),
                };
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
                let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
                let _ = addr_tx.send((addr, token));
                let shutdown = async {
                    let _ = stopped.await;
                };
                app.serve(listener, shutdown)
                    .await
                    .unwrap_or_else(|e| panic!("{e:#}"));
            });
        });
        let (addr, token) = addr_rx
            .recv()
            .unwrap_or_else(|e| panic!("the server did not start: {e}"));
        Self {
            base: format!("http://{addr}"),
            token,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A request; `token` adds the server's API token.
    pub fn call(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: &[u8],
        token: bool,
    ) -> Answer {
        call(
            &self.url(path),
            method,
            content_type,
            body,
            token.then_some(self.token.as_str()),
        )
    }

    pub fn get(&self, path: &str) -> Answer {
        self.call("GET", path, None, b"", false)
    }

    pub fn post_log(&self, path: &str, log: &str) -> Answer {
        self.call("POST", path, Some("text/plain"), log.as_bytes(), true)
    }

    /// A page's form as a browser sends it: with this site as its `Origin`.
    pub fn post_form(&self, path: &str, content_type: &str, body: &[u8]) -> Answer {
        let headers = [
            ("content-type", content_type.to_owned()),
            ("origin", self.base.clone()),
        ];
        request(&self.url(path), "POST", &headers, body).unwrap_or_else(|e| panic!("POST {path}: {e}"))
    }

    pub fn post_json(&self, path: &str, body: &serde_json::Value) -> Answer {
        self.call(
            "POST",
            path,
            Some("application/json"),
            body.to_string().as_bytes(),
            true,
        )
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A number that differs between servers started by one test process.
fn server_nonce() -> u32 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) << 16
}

/// A response.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub fn call(url: &str, method: &str, content_type: Option<&str>, body: &[u8], token: Option<&str>) -> Answer {
    try_call(url, method, content_type, body, token).unwrap_or_else(|e| panic!("{method} {url}: {e}"))
}

/// A request whose transport failure is an `Err` (a server killed mid-request).
pub fn try_call(
    url: &str,
    method: &str,
    content_type: Option<&str>,
    body: &[u8],
    token: Option<&str>,
) -> Result<Answer, ureq::Error> {
    let mut headers = Vec::new();
    if let Some(ct) = content_type {
        headers.push(("content-type", ct.to_owned()));
    }
    if let Some(t) = token {
        headers.push(("authorization", format!("Bearer {t}")));
    }
    request(url, method, &headers, body)
}

/// A request with the headers given.
pub fn request(
    url: &str,
    method: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> Result<Answer, ureq::Error> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut builder = ureq::http::Request::builder().method(method).uri(url);
    for (name, value) in headers {
        builder = builder.header(*name, value);
    }
    let request = builder.body(body.to_vec()).unwrap_or_else(|e| panic!("{e}"));
    let mut response = agent.run(request)?;
    let headers = response
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_owned()))
        .collect();
    let status = response.status().as_u16();
    let body = response
        .body_mut()
        .with_config()
        .limit(64 << 20)
        .read_to_string()?;
    Ok(Answer {
        status,
        headers,
        body,
    })
}
