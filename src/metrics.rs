//! Counters for `GET /metrics`, in the Prometheus text format. Lock-free on the hot path.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds (seconds) of the analysis-duration histogram buckets.
const BUCKETS: [f64; 10] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2.5];

/// The server's counters.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Requests by (route, status).
    requests: Mutex<BTreeMap<(String, u16), u64>>,
    analyses: AtomicU64,
    analysis_buckets: [AtomicU64; BUCKETS.len()],
    analysis_micros: AtomicU64,
    analyzed_bytes: AtomicU64,
    undiagnosed: AtomicU64,
    incidents_stored: AtomicU64,
    rate_limited: AtomicU64,
}

impl Metrics {
    /// Counts a finished request.
    pub fn request(&self, route: &str, status: u16) {
        if let Ok(mut map) = self.requests.lock() {
            *map.entry((route.to_owned(), status)).or_default() += 1;
        }
    }

    /// Counts one analysis of `bytes` bytes that took `took`; `diagnosed`: a rule found a root
    /// cause or a symptom.
    pub fn analysis(&self, bytes: usize, took: Duration, diagnosed: bool) {
        self.analyses.fetch_add(1, Ordering::Relaxed);
        if !diagnosed {
            self.undiagnosed.fetch_add(1, Ordering::Relaxed);
        }
        self.analyzed_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        self.analysis_micros
            .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
        let secs = took.as_secs_f64();
        for (bound, bucket) in BUCKETS.iter().zip(&self.analysis_buckets) {
            if secs <= *bound {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Counts a stored incident.
    pub fn stored(&self) {
        self.incidents_stored.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a request refused by the rate limit.
    pub fn limited(&self) {
        self.rate_limited.fetch_add(1, Ordering::Relaxed);
    }

    /// The Prometheus exposition text; `gauges` are (name, help, value) read at scrape time.
    pub fn render(&self, gauges: &[(&str, &str, f64)]) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP faultline_http_requests_total HTTP requests by route and status."
        );
        let _ = writeln!(out, "# TYPE faultline_http_requests_total counter");
        if let Ok(map) = self.requests.lock() {
            for ((route, status), n) in map.iter() {
                let _ = writeln!(
                    out,
                    "faultline_http_requests_total{{route=\"{}\",status=\"{status}\"}} {n}",
                    route.replace('"', "")
                );
            }
        }
        let analyses = self.analyses.load(Ordering::Relaxed);
        let _ = writeln!(out, "# HELP faultline_analysis_seconds Time to analyze one log.");
        let _ = writeln!(out, "# TYPE faultline_analysis_seconds histogram");
        for (bound, bucket) in BUCKETS.iter().zip(&self.analysis_buckets) {
            let _ = writeln!(
                out,
                "faultline_analysis_seconds_bucket{{le=\"{bound}\"}} {}",
                bucket.load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(out, "faultline_analysis_seconds_bucket{{le=\"+Inf\"}} {analyses}");
        let _ = writeln!(
            out,
            "faultline_analysis_seconds_sum {}",
            self.analysis_micros.load(Ordering::Relaxed) as f64 / 1e6
        );
        let _ = writeln!(out, "faultline_analysis_seconds_count {analyses}");
        let counters = [
            (
                "faultline_analyzed_bytes_total",
                "Bytes of logs analyzed.",
                &self.analyzed_bytes,
            ),
            (
                "faultline_analyses_undiagnosed_total",
                "Analyses in which no rule found a root cause or a symptom (the rest of faultline_analysis_seconds_count was diagnosed).",
                &self.undiagnosed,
            ),
            (
                "faultline_incidents_stored_total",
                "Incidents committed to the knowledge base.",
                &self.incidents_stored,
            ),
            (
                "faultline_rate_limited_total",
                "Requests refused by the rate limit.",
                &self.rate_limited,
            ),
        ];
        for (name, help, value) in counters {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                value.load(Ordering::Relaxed)
            );
        }
        for (name, help, value) in gauges {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_has_counters_histogram_and_gauges() {
        let m = Metrics::default();
        m.request("/api/v1/analyze", 200);
        m.request("/api/v1/analyze", 200);
        m.analysis(4096, Duration::from_micros(300), true);
        m.analysis(100, Duration::from_secs(1), false);
        let text = m.render(&[("faultline_rules", "Rules loaded.", 138.0)]);
        assert!(text.contains("faultline_http_requests_total{route=\"/api/v1/analyze\",status=\"200\"} 2"));
        assert!(text.contains("faultline_analysis_seconds_bucket{le=\"0.0005\"} 1"));
        assert!(text.contains("faultline_analysis_seconds_count 2"));
        assert!(text.contains("faultline_analyses_undiagnosed_total 1"));
        assert!(text.contains("faultline_rules 138"));
    }
}
