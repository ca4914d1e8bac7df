//! The failure summary torchrun prints with `ChildFailedError`:
//! `Failures:` / `Root Cause (first observed failure):` sections of `[N]:` entries.

use super::Collector;
use crate::model::{ChildFailure, EventKind, Span};
use crate::normalize::Line;

/// Lines that open a summary section, for the prefilter.
pub(super) const TRIGGERS: &[&str] = &[r"^\s*Failures:\s*$", r"Root Cause \(first observed failure\):"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    Failures,
    RootCause,
}

#[derive(Debug)]
struct Entry {
    lines: Span,
    rank: Option<u32>,
    failure: ChildFailure,
    /// The `exitcode : …` line, the entry's key line.
    text: Option<String>,
    /// Whether its `traceback :` field was read: the lines after it, up to the next entry or
    /// rule, are that traceback (torch 2 prints a whole Python traceback there).
    in_traceback: bool,
}

/// Builds `ChildFailure` events.
#[derive(Debug, Default)]
pub(super) struct ChildFailures {
    section: Option<Section>,
    entry: Option<Entry>,
}

impl ChildFailures {
    pub(super) fn wants_every_line(&self) -> bool {
        self.section.is_some()
    }

    /// Feeds a line; `may_start` says whether it matches a trigger of this parser.
    pub(super) fn line(&mut self, out: &mut Collector, line: &Line<'_>, may_start: bool) {
        if !may_start && self.section.is_none() {
            return;
        }
        let text = line.text.trim();
        if text.contains("Root Cause (first observed failure):") {
            self.flush(out);
            self.section = Some(Section::RootCause);
            return;
        }
        if text == "Failures:" {
            self.flush(out);
            self.section = Some(Section::Failures);
            return;
        }
        let Some(section) = self.section else {
            return;
        };
        if regex!(r"^\[\d+\]:$").is_match(text) {
            self.flush(out);
            self.entry = Some(Entry {
                lines: Span::line(line.number),
                rank: line.rank(),
                failure: ChildFailure {
                    root_cause: section == Section::RootCause,
                    ..ChildFailure::default()
                },
                text: None,
                in_traceback: false,
            });
        } else if let Some(c) =
            regex!(r"^(?P<k>time|host|rank|exitcode|error_file|traceback)\s*:\s*(?P<v>.*)$").captures(text)
        {
            if let Some(entry) = &mut self.entry {
                entry.lines.extend_to(line.number);
                set_field(&mut entry.failure, &c["k"], &c["v"]);
                if &c["k"] == "exitcode" {
                    entry.text = Some(text.to_owned());
                }
                entry.in_traceback = &c["k"] == "traceback";
            }
        } else if text == "<NO_OTHER_FAILURES>" || text.is_empty() {
        } else if text.starts_with("----------") {
            self.flush(out);
        } else if let Some(entry) = self
            .entry
            .as_mut()
            .filter(|e| e.in_traceback && !text.starts_with("====="))
        {
            entry.lines.extend_to(line.number);
        } else {
            // `=====` closes the summary; anything else means it was cut.
            self.flush(out);
            self.section = None;
        }
    }

    fn flush(&mut self, out: &mut Collector) {
        if let Some(entry) = self.entry.take() {
            out.emit_span(
                entry.lines,
                entry.rank,
                EventKind::ChildFailure(entry.failure),
                entry.text.as_deref(),
            );
        }
    }

    pub(super) fn finish(mut self, out: &mut Collector) {
        self.flush(out);
    }
}

fn set_field(failure: &mut ChildFailure, key: &str, value: &str) {
    match key {
        "host" => failure.host = Some(value.to_owned()),
        "rank" => {
            if let Some(c) = regex!(r"^(?P<g>\d+)(?: \(local_rank: (?P<l>\d+)\))?").captures(value) {
                failure.global_rank = c["g"].parse().ok();
                failure.local_rank = c.name("l").and_then(|m| m.as_str().parse().ok());
            }
        }
        "exitcode" => {
            if let Some(c) = regex!(r"^(?P<code>-?\d+)").captures(value) {
                failure.exitcode = c["code"].parse().ok();
                if failure.signal.is_none() {
                    failure.signal = failure.exitcode.and_then(signal_name).map(str::to_owned);
                }
            }
        }
        "traceback" => {
            if let Some(c) = regex!(r"Signal \d+ \((?P<s>SIG\w+)\)").captures(value) {
                failure.signal = Some(c["s"].to_owned());
            }
        }
        _ => {}
    }
}

/// A negative exit code from torch.multiprocessing is minus the signal number.
fn signal_name(exitcode: i32) -> Option<&'static str> {
    Some(match exitcode {
        -6 => "SIGABRT",
        -7 => "SIGBUS",
        -9 => "SIGKILL",
        -11 => "SIGSEGV",
        -15 => "SIGTERM",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use crate::model::{ChildFailure, EventKind};
    use crate::parse::parse_str;

    #[test]
    fn the_torchrun_summary_gives_one_event_per_failed_child() {
        let log = "\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2024-01-01_00:00:00
  host      : node2
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 1235)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 1235
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-01-01_00:00:00
  host      : node1
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 1234)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
";
        let failures: Vec<ChildFailure> = parse_str(log)
            .events
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::ChildFailure(c) => Some(c),
                _ => None,
            })
            .collect();
        assert_eq!(
            failures,
            vec![
                ChildFailure {
                    root_cause: false,
                    global_rank: Some(1),
                    local_rank: Some(1),
                    exitcode: Some(-9),
                    host: Some("node2".into()),
                    signal: Some("SIGKILL".into()),
                },
                ChildFailure {
                    root_cause: true,
                    global_rank: Some(0),
                    local_rank: Some(0),
                    exitcode: Some(1),
                    host: Some("node1".into()),
                    signal: None,
                },
            ]
        );
    }

    #[test]
    fn a_child_whose_traceback_spans_lines_does_not_end_the_summary() {
        let log = "\
Failures:
[1]:
  time      : 2026-11-27_05:58:29
  host      : host-b
  rank      : 7 (local_rank: 1)
  exitcode  : 1 (pid: 6508)
  error_file: /tmp/run/logs/job_fnz/attempt_0/1/error.json
  traceback : Traceback (most recent call last):
    File \"/venv/torch/distributed/distributed_c10d.py\", line 4181, in all_reduce
      work.wait()
  RuntimeError: Timed out waiting 22000ms for recv operation to complete

[2]:
  time      : 2026-11-27_05:58:29
  host      : host-b
  rank      : 9 (local_rank: 3)
  exitcode  : -15 (pid: 6523)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 6523
============================================================
";
        let ranks: Vec<(Option<u32>, Option<u32>)> = parse_str(log)
            .events
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::ChildFailure(c) => Some((c.global_rank, c.local_rank)),
                _ => None,
            })
            .collect();
        assert_eq!(ranks, vec![(Some(7), Some(1)), (Some(9), Some(3))]);
    }
}
