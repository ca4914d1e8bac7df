//! A minimal W3C WebDriver client over HTTP (chromedriver + headless Chromium), enough for the
//! end-to-end tests: navigate, find, type, click, read text, screenshots, alerts.
#![allow(dead_code)]

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Where Debian puts the browser and its driver.
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// The browser.
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// A browser session; the driver process is killed on drop.
pub struct Browser {
    driver: Child,
    base: String,
    session: String,
    profile: std::path::PathBuf,
}

/// Whether the browser can run here. In CI it must (CI installs it): its absence fails the test;
/// by hand it skips the test with a loud message.
pub fn available() -> bool {
    let present = std::path::Path::new(CHROMEDRIVER).exists() && std::path::Path::new(CHROMIUM).exists();
    if !present {
        super::skip_unless_ci(
            "browser tests",
            &format!(
                "{CHROMIUM} and {CHROMEDRIVER} (apt-get install chromium chromium-driver; .ci/run installs them)"
            ),
        );
    }
    present
}

fn request(method: &str, url: &str, body: Option<&Value>) -> Value {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into();
    let text = match (method, body) {
        ("GET", _) => agent.get(url).call(),
        ("DELETE", _) => agent.delete(url).call(),
        (_, Some(b)) => agent
            .post(url)
            .header("content-type", "application/json")
            .send(b.to_string().as_bytes()),
        (_, None) => agent
            .post(url)
            .header("content-type", "application/json")
            .send(b"{}".as_slice()),
    }
    .and_then(|mut r| r.body_mut().with_config().limit(64 << 20).read_to_string())
    .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method} {url}: not JSON ({e}): {text}"))
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session.
    pub fn start() -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or(9515);
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start chromedriver: {e}"));
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ready = ureq::get(&format!("{base}/status")).call().is_ok();
            if ready {
                break;
            }
            assert!(Instant::now() < deadline, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        let profile = std::env::temp_dir().join(format!("faultline-chrome-{}-{port}", std::process::id()));
        let caps = json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--disable-background-networking", "--disable-component-update", "--disable-sync",
                         "--no-first-run", "--disable-quic", "--window-size=1280,1600",
                         format!("--user-data-dir={}", profile.display())]
            }
        } } });
        let answer = request("POST", &format!("{base}/session"), Some(&caps));
        let session = answer["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {answer}"))
            .to_owned();
        Self {
            driver,
            base,
            session,
            profile,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}/session/{}{path}", self.base, self.session)
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let answer = request(method, &self.url(path), body.as_ref());
        answer["value"].clone()
    }

    /// Opens a URL.
    pub fn goto(&self, url: &str) {
        self.call("POST", "/url", Some(json!({ "url": url })));
    }

    /// The current URL.
    pub fn current_url(&self) -> String {
        let url = self.call("GET", "/url", None);
        url.as_str()
            .unwrap_or_else(|| panic!("expected the current URL as a string, got {url}"))
            .to_owned()
    }

    /// The first element matching a CSS selector.
    pub fn find(&self, css: &str) -> String {
        let v = self.call(
            "POST",
            "/element",
            Some(json!({ "using": "css selector", "value": css })),
        );
        v[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {v}"))
            .to_owned()
    }

    /// Types into an element (a file path for a file input).
    pub fn type_into(&self, css: &str, text: &str) {
        let el = self.find(css);
        self.call(
            "POST",
            &format!("/element/{el}/value"),
            Some(json!({ "text": text })),
        );
    }

    /// Sets a form field's value directly (long logs type slowly).
    pub fn set_value(&self, css: &str, text: &str) {
        let script = "document.querySelector(arguments[0]).value = arguments[1];";
        self.call(
            "POST",
            "/execute/sync",
            Some(json!({ "script": script, "args": [css, text] })),
        );
    }

    /// Runs a script in the page with `args` (`arguments[0]`, …) and returns what it returns.
    pub fn execute(&self, script: &str, args: Value) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            Some(json!({ "script": script, "args": args })),
        )
    }

    /// Clicks an element.
    pub fn click(&self, css: &str) {
        let el = self.find(css);
        self.call("POST", &format!("/element/{el}/click"), None);
    }

    /// The visible text of an element.
    pub fn text(&self, css: &str) -> String {
        let el = self.find(css);
        let text = self.call("GET", &format!("/element/{el}/text"), None);
        text.as_str()
            .unwrap_or_else(|| panic!("expected the text of {css} as a string, got {text}"))
            .to_owned()
    }

    /// The text of an open alert / confirm dialog, if one is open.
    pub fn alert(&self) -> Option<String> {
        let v = self.call("GET", "/alert/text", None);
        v.as_str().map(str::to_owned)
    }

    /// A PNG of the viewport.
    pub fn screenshot(&self) -> Vec<u8> {
        let v = self.call("GET", "/screenshot", None);
        decode_base64(
            v.as_str()
                .unwrap_or_else(|| panic!("expected a base64 screenshot, got {v}")),
        )
    }

    /// Waits until the URL contains `part`.
    pub fn wait_for_url(&self, part: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let url = self.current_url();
            if url.contains(part) {
                return url;
            }
            assert!(
                Instant::now() < deadline,
                "the browser never reached {part}; it is at {url}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = request("DELETE", &format!("{}/session/{}", self.base, self.session), None);
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

fn decode_base64(text: &str) -> Vec<u8> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let digits: Vec<u32> = text.bytes().filter_map(value).collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, d)| acc | d << (18 - 6 * i));
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..chunk.len().saturating_sub(1)]);
    }
    out
}
