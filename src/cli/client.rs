//! `faultline analyze --server URL`: the CLI as a CI client of a faultline server.

use std::io::Read;
use std::time::Duration;

use anyhow::{Context, bail};

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
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(120)))
        .build()
        .into();
    let mut request = agent
        .post(&url)
        .header("content-type", "text/plain; charset=utf-8");
    if let Some(token) = s.token {
        request = request.header("authorization", &format!("Bearer {token}"));
    }
    let mut response = request
        .send(&body[..])
        .with_context(|| format!("cannot reach {}", s.server))?;
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
        bail!("the server answered {status}: {detail}");
    }
    let answer: crate::api::AnalyzeResponse =
        serde_json::from_str(&text).context("the server's answer is not a diagnosis")?;
    Ok(Submitted {
        diagnosis: answer.diagnosis,
        incident_id: answer.incident_id,
        group_id: answer.group_id,
        new_group: answer.new_group,
    })
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
