//! `faultline analyze --server URL`: the CLI as a CI client of a faultline server.

use std::io::Read;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::api::snapshots::Accepted;
use crate::model::Diagnosis;

/// Where and how to submit.
#[derive(Debug, Clone)]
pub struct Submission<'a> {
    /// Server base URL (`http://faultline:8080`).
    pub server: &'a str,
    /// API token.
    pub token: Option<&'a str>,
    /// Project.
    pub project: Option<&'a str>,
    /// Store the incident (needs a token).
    pub store: bool,
}

/// What the server answered.
#[derive(Debug)]
pub struct Submitted {
    /// The diagnosis.
    pub diagnosis: Diagnosis,
    /// The incident id, when stored.
    pub incident_id: Option<i64>,
    /// Its group.
    pub group_id: Option<i64>,
    /// Whether the group is new.
    pub new_group: Option<bool>,
}

/// Sends the log and reads the diagnosis back.
pub fn submit(s: &Submission<'_>, mut log: impl Read) -> anyhow::Result<Submitted> {
    let mut body = Vec::new();
    log.read_to_end(&mut body).context("cannot read the log")?;
    let mut url = format!(
        "{}/api/v1/analyze?store={}",
        s.server.trim_end_matches('/'),
        s.store
    );
    if let Some(project) = s.project {
        url.push_str("&project=");
        url.push_str(&percent_encode(project));
    }
    let post = Post {
        url: &url,
        server: s.server,
        token: s.token,
        content_type: "text/plain; charset=utf-8",
        timeout: Duration::from_secs(120),
    };
    let text = post.send(&body).context("the server refused the log")?;
    let answer: crate::api::AnalyzeResponse =
        serde_json::from_str(&text).context("the server's answer is not a diagnosis")?;
    Ok(Submitted {
        diagnosis: answer.diagnosis,
        incident_id: answer.incident_id,
        group_id: answer.group_id,
        new_group: answer.new_group,
    })
}

/// Attaches a snapshot to a stored incident (raw body, its parameters in the query string) and
/// returns the replay job the server queued.
pub fn upload_snapshot(
    server: &str,
    token: Option<&str>,
    incident: i64,
    snapshot: &[u8],
    params: &[(String, String)],
) -> anyhow::Result<Accepted> {
    let mut url = format!(
        "{}/api/v1/incidents/{incident}/snapshots",
        server.trim_end_matches('/')
    );
    let query: Vec<String> = params
        .iter()
        .map(|(k, v)| format!("{}={}", percent_encode(k), percent_encode(v)))
        .collect();
    if !query.is_empty() {
        url.push('?');
        url.push_str(&query.join("&"));
    }
    let post = Post {
        url: &url,
        server,
        token,
        content_type: "application/octet-stream",
        timeout: Duration::from_secs(600),
    };
    let text = post.send(snapshot).context("the server refused the snapshot")?;
    serde_json::from_str(&text).context("the server's answer to the snapshot upload is not understood")
}

/// One POST to the server; a non-2xx answer becomes an error carrying the server's `detail`.
struct Post<'a> {
    url: &'a str,
    server: &'a str,
    token: Option<&'a str>,
    content_type: &'a str,
    timeout: Duration,
}

impl Post<'_> {
    fn send(&self, body: &[u8]) -> anyhow::Result<String> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(self.timeout))
            .build()
            .into();
        let mut request = agent.post(self.url).header("content-type", self.content_type);
        if let Some(token) = self.token {
            request = request.header("authorization", &format!("Bearer {token}"));
        }
        let mut response = request
            .send(body)
            .with_context(|| format!("cannot reach {}", self.server))?;
        let status = response.status();
        let text = response
            .body_mut()
            .with_config()
            .limit(64 << 20)
            .read_to_string()
            .context("cannot read the server's answer")?;
        if !status.is_success() {
            let detail = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v["detail"].as_str().map(str::to_owned))
                .unwrap_or(text);
            bail!("{status}: {detail}");
        }
        Ok(text)
    }
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(super::percent_encode("my proj/a&b"), "my%20proj%2Fa%26b");
    }
}
