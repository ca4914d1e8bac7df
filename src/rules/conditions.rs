//! Conditions on parsed events, and the values a matching event offers as captures.

use std::collections::BTreeMap;

use super::pattern::Pattern;

use super::oom_compare::OomCompare;
use crate::model::{Event, EventKind, Fact, MemoryKind, NcclKind, OomReport};

/// Condition on a traceback's exception.
#[derive(Debug, Clone)]
pub struct ExceptionCond {
    /// Pattern on the type name.
    pub type_name: Option<Pattern>,
    /// Pattern on the message.
    pub message: Option<Pattern>,
}

/// Condition on a CUDA assertion.
#[derive(Debug, Clone)]
pub struct AssertCond {
    /// Pattern on the kernel file.
    pub file: Option<Pattern>,
    /// Pattern on the expression.
    pub expression: Option<Pattern>,
    /// The expression pattern without its spaces, tried on the expression without its spaces
    /// when the pattern does not match: a line wrapped by a terminal and joined again with a space
    /// splits a name (`srcSelectDimSiz e`).
    pub expression_unspaced: Option<Pattern>,
    /// Pattern on the kernel function.
    pub function: Option<Pattern>,
}

/// Condition on a cuBLAS event.
#[derive(Debug, Clone)]
pub struct CublasCond {
    /// Regex on the status.
    pub status: Option<Pattern>,
    /// Regex on the call.
    pub call: Option<Pattern>,
    /// Regex on the comma-joined data types.
    pub dtypes: Option<Pattern>,
}

/// Condition on a traceback frame.
#[derive(Debug, Clone)]
pub struct FrameCond {
    /// Pattern on the file.
    pub file: Option<Pattern>,
    /// Pattern on the function.
    pub function: Option<Pattern>,
}

/// Condition on an OOM report.
#[derive(Debug, Clone)]
pub struct OomCond {
    /// Which memory, when it matters.
    pub memory: Option<MemoryKind>,
    /// Comparisons that must all hold.
    pub compare: Vec<OomCompare>,
}

/// The kinds of [`Fact`], by their snake_case names.
pub const FACT_KINDS: &[&str] = &[
    "matmul_shapes",
    "broadcast_sizes",
    "target_input_shapes",
    "dtypes",
    "devices",
    "checkpoint_size_mismatch",
    "index_out_of_bounds",
];

/// The kinds of event condition, in the order they are checked.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Exception,
    Assert,
    CudaError,
    Cublas,
    Cudnn,
    Nccl,
    Oom,
    Fact,
    Frame,
}

impl Kind {
    const ALL: [Kind; 9] = [
        Kind::Exception,
        Kind::Assert,
        Kind::CudaError,
        Kind::Cublas,
        Kind::Cudnn,
        Kind::Nccl,
        Kind::Oom,
        Kind::Fact,
        Kind::Frame,
    ];

    /// The condition kinds that can be met by an event of `kind`.
    fn reading(kind: &EventKind) -> &'static [Kind] {
        match kind {
            EventKind::Traceback(_) => &[Kind::Exception, Kind::Frame],
            EventKind::CudaAssert(_) => &[Kind::Assert],
            EventKind::CudaError(_) => &[Kind::CudaError],
            EventKind::Cublas(_) => &[Kind::Cublas],
            EventKind::Cudnn(_) => &[Kind::Cudnn],
            EventKind::Nccl(_) => &[Kind::Nccl],
            EventKind::Oom(_) => &[Kind::Oom],
            EventKind::Fact(_) => &[Kind::Fact],
            _ => &[],
        }
    }
}

/// A log's events sorted by the kind of condition that can read them, in log order within each:
/// built once per analysis, so that a rule's condition looks only at the events it could match
/// (most conditions find no event of their kind at all).
#[derive(Debug, Default)]
pub struct EventIndex<'e> {
    by_kind: [Vec<&'e Event>; Kind::ALL.len()],
}

impl<'e> EventIndex<'e> {
    /// The index of `events`.
    pub fn new(events: &'e [Event]) -> Self {
        let mut index = Self::default();
        for event in events {
            for &kind in Kind::reading(&event.kind) {
                index.by_kind[kind as usize].push(event);
            }
        }
        index
    }

    fn of(&self, kind: Kind) -> &[&'e Event] {
        &self.by_kind[kind as usize]
    }
}

/// Every event condition of a rule; each one given must be met by at least one event.
#[derive(Debug, Clone, Default)]
pub struct EventConditions {
    /// Exception condition.
    pub exception: Option<ExceptionCond>,
    /// CUDA assertion condition.
    pub cuda_assert: Option<AssertCond>,
    /// Pattern on `name message` of a CUDA error.
    pub cuda_error: Option<Pattern>,
    /// cuBLAS condition.
    pub cublas: Option<CublasCond>,
    /// Pattern on a cuDNN status or message.
    pub cudnn: Option<Pattern>,
    /// Pattern on `watchdog_timeout`, `warn` or an NCCL error code.
    pub nccl: Option<Pattern>,
    /// OOM condition.
    pub oom: Option<OomCond>,
    /// A fact kind.
    pub fact: Option<&'static str>,
    /// Frame condition.
    pub frame: Option<FrameCond>,
}

impl EventConditions {
    /// Whether the rule has any event condition.
    pub fn is_empty(&self) -> bool {
        !Kind::ALL.into_iter().any(|k| self.has(k))
    }

    /// For each condition given, the events meeting it; `None` when one condition has none.
    pub fn matching<'e>(&self, events: &EventIndex<'e>) -> Option<Vec<&'e Event>> {
        let mut found = Vec::new();
        for kind in Kind::ALL {
            if !self.has(kind) {
                continue;
            }
            let before = found.len();
            found.extend(events.of(kind).iter().copied().filter(|e| self.meets(kind, e)));
            if found.len() == before {
                return None;
            }
        }
        Some(found)
    }

    fn has(&self, kind: Kind) -> bool {
        match kind {
            Kind::Exception => self.exception.is_some(),
            Kind::Assert => self.cuda_assert.is_some(),
            Kind::CudaError => self.cuda_error.is_some(),
            Kind::Cublas => self.cublas.is_some(),
            Kind::Cudnn => self.cudnn.is_some(),
            Kind::Nccl => self.nccl.is_some(),
            Kind::Oom => self.oom.is_some(),
            Kind::Fact => self.fact.is_some(),
            Kind::Frame => self.frame.is_some(),
        }
    }

    fn meets(&self, kind: Kind, event: &Event) -> bool {
        match kind {
            Kind::Exception => self.exception_matches(event),
            Kind::Assert => self.assert_matches(event),
            Kind::CudaError => self.cuda_error_matches(event),
            Kind::Cublas => self.cublas_matches(event),
            Kind::Cudnn => self.cudnn_matches(event),
            Kind::Nccl => self.nccl_matches(event),
            Kind::Oom => self.oom_matches(event),
            Kind::Fact => matches!(&event.kind, EventKind::Fact(f) if Some(fact_kind(f)) == self.fact),
            Kind::Frame => self.frame_matches(event),
        }
    }

    fn exception_matches(&self, event: &Event) -> bool {
        let (Some(cond), EventKind::Traceback(t)) = (&self.exception, &event.kind) else {
            return false;
        };
        t.exceptions().any(|e| {
            cond.type_name.as_ref().is_none_or(|re| re.is_match(&e.type_name))
                && cond.message.as_ref().is_none_or(|re| re.is_match(&e.message))
        })
    }

    fn cublas_matches(&self, event: &Event) -> bool {
        let (Some(cond), EventKind::Cublas(c)) = (&self.cublas, &event.kind) else {
            return false;
        };
        let opt = |re: &Option<Pattern>, value: Option<&str>| {
            re.as_ref().is_none_or(|re| value.is_some_and(|v| re.is_match(v)))
        };
        opt(&cond.status, Some(&c.status))
            && opt(&cond.call, c.call.as_deref())
            && opt(&cond.dtypes, Some(&c.dtypes.join(", ")))
    }

    fn frame_matches(&self, event: &Event) -> bool {
        let (Some(cond), EventKind::Traceback(t)) = (&self.frame, &event.kind) else {
            return false;
        };
        t.chain.iter().flat_map(|c| &c.frames).any(|f| {
            cond.file.as_ref().is_none_or(|re| re.is_match(&f.file))
                && cond.function.as_ref().is_none_or(|re| re.is_match(&f.function))
        })
    }

    fn assert_matches(&self, event: &Event) -> bool {
        let (Some(cond), EventKind::CudaAssert(a)) = (&self.cuda_assert, &event.kind) else {
            return false;
        };
        let opt = |re: &Option<Pattern>, value: Option<&str>| {
            re.as_ref().is_none_or(|re| value.is_some_and(|v| re.is_match(v)))
        };
        let expression = opt(&cond.expression, Some(&a.expression))
            || cond
                .expression_unspaced
                .as_ref()
                .is_some_and(|re| re.is_match(&a.expression.replace(' ', "")));
        opt(&cond.file, a.file.as_deref()) && opt(&cond.function, a.function.as_deref()) && expression
    }

    fn cuda_error_matches(&self, event: &Event) -> bool {
        let (Some(re), EventKind::CudaError(e)) = (&self.cuda_error, &event.kind) else {
            return false;
        };
        re.is_match(&format!("{} {}", e.name.as_deref().unwrap_or(""), e.message))
    }

    fn cudnn_matches(&self, event: &Event) -> bool {
        let (Some(re), EventKind::Cudnn(c)) = (&self.cudnn, &event.kind) else {
            return false;
        };
        c.status.as_deref().is_some_and(|s| re.is_match(s)) || re.is_match(&c.message)
    }

    fn nccl_matches(&self, event: &Event) -> bool {
        let (Some(re), EventKind::Nccl(n)) = (&self.nccl, &event.kind) else {
            return false;
        };
        let label = match &n.kind {
            NcclKind::WatchdogTimeout { .. } => "watchdog_timeout",
            NcclKind::Warn => "warn",
            NcclKind::Error { code } => code,
        };
        re.is_match(label)
    }

    fn oom_matches(&self, event: &Event) -> bool {
        let (Some(cond), EventKind::Oom(o)) = (&self.oom, &event.kind) else {
            return false;
        };
        cond.memory.is_none_or(|m| o.memory == Some(m)) && cond.compare.iter().all(|c| c.holds(o))
    }
}

/// The snake_case name of a fact's kind.
pub fn fact_kind(fact: &Fact) -> &'static str {
    match fact {
        Fact::MatmulShapes { .. } => "matmul_shapes",
        Fact::BroadcastSizes { .. } => "broadcast_sizes",
        Fact::TargetInputShapes { .. } => "target_input_shapes",
        Fact::Dtypes { .. } => "dtypes",
        Fact::Devices { .. } => "devices",
        Fact::CheckpointSizeMismatch { .. } => "checkpoint_size_mismatch",
        Fact::IndexOutOfBounds { .. } => "index_out_of_bounds",
    }
}

/// `1.95 GiB` from a byte count.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.2} {}", UNITS[unit])
    }
}

fn shape(dims: &[u64]) -> String {
    format!(
        "[{}]",
        dims.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
    )
}

/// The values an event offers to a finding's captures.
pub fn event_captures(event: &Event, out: &mut BTreeMap<String, String>) {
    let mut put = |k: &str, v: String| {
        out.entry(k.to_owned()).or_insert(v);
    };
    match &event.kind {
        EventKind::Traceback(t) => {
            if let Some(e) = t.final_exception() {
                put("exception_type", e.type_name.clone());
                put(
                    "exception_message",
                    e.message.lines().next().unwrap_or("").to_owned(),
                );
            }
        }
        EventKind::CudaAssert(a) => {
            put("assert_expression", a.expression.clone());
            if let Some(f) = &a.file {
                put("assert_file", f.clone());
            }
            if let Some(f) = &a.function {
                put("assert_function", f.clone());
            }
            put("assert_lines", a.occurrences.to_string());
            put("assert_threads", a.threads.to_string());
        }
        EventKind::CudaError(e) => {
            put("cuda_error", e.message.clone());
            if let Some(n) = &e.name {
                put("cuda_error_name", n.clone());
            }
            if let Some(c) = e.code {
                put("cuda_error_code", c.to_string());
            }
        }
        EventKind::Cublas(c) => {
            put("cublas_status", format!("CUBLAS_STATUS_{}", c.status));
            if let Some(call) = &c.call {
                put("cublas_call", call.clone());
            }
            if !c.dtypes.is_empty() {
                put("cublas_dtypes", c.dtypes.join(", "));
            }
            if let Some(p) = c.illegal_parameter {
                put("cublas_parameter", p.to_string());
            }
        }
        EventKind::Cudnn(c) => {
            if let Some(s) = &c.status {
                put("cudnn_status", format!("CUDNN_STATUS_{s}"));
            }
        }
        EventKind::Nccl(n) => nccl_captures(&n.kind, &mut put),
        EventKind::Oom(o) => oom_captures(o, &mut put),
        EventKind::Fact(f) => fact_captures(f, &mut put),
        _ => {}
    }
}

fn nccl_captures(kind: &NcclKind, put: &mut impl FnMut(&str, String)) {
    match kind {
        NcclKind::WatchdogTimeout {
            seq,
            op,
            numel_in,
            timeout_ms,
            ran_ms,
            ..
        } => {
            let fields = [
                ("nccl_seq", *seq),
                ("nccl_numel", *numel_in),
                ("nccl_timeout_ms", *timeout_ms),
                ("nccl_ran_ms", *ran_ms),
            ];
            for (k, v) in fields {
                if let Some(v) = v {
                    put(k, v.to_string());
                }
            }
            if let Some(op) = op {
                put("nccl_op", op.clone());
            }
        }
        NcclKind::Error { code } => put("nccl_code", code.clone()),
        NcclKind::Warn => {}
    }
}

fn oom_captures(o: &OomReport, put: &mut impl FnMut(&str, String)) {
    let figures = [
        ("oom_tried", o.tried_bytes),
        ("oom_total", o.total_bytes),
        ("oom_free", o.free_bytes),
        ("oom_allocated", o.allocated_bytes),
        ("oom_reserved", o.reserved_bytes),
        ("oom_reserved_unallocated", o.reserved_unallocated_bytes),
        ("oom_process", o.process_bytes),
        ("oom_allowed", o.allowed_bytes),
    ];
    for (k, v) in figures {
        if let Some(v) = v {
            put(k, human_size(v));
        }
    }
    if let Some(g) = o.gpu {
        put("oom_gpu", g.to_string());
    }
}

fn fact_captures(fact: &Fact, put: &mut impl FnMut(&str, String)) {
    match fact {
        Fact::MatmulShapes { left, right } => {
            put("left_shape", shape(left));
            put("right_shape", shape(right));
        }
        Fact::BroadcastSizes { a, b, dim } => {
            put("size_a", a.to_string());
            put("size_b", b.to_string());
            put("dim", dim.to_string());
        }
        Fact::TargetInputShapes { target, input } => {
            put("target_shape", shape(target));
            put("input_shape", shape(input));
        }
        Fact::Dtypes { expected, found } => {
            put("dtype_expected", expected.clone());
            put("dtype_found", found.clone());
        }
        Fact::Devices { first, second } => {
            put("device_a", first.clone());
            put("device_b", second.clone());
        }
        Fact::CheckpointSizeMismatch {
            parameter,
            checkpoint,
            model,
        } => {
            put("parameter", parameter.clone());
            put("checkpoint_shape", shape(checkpoint));
            // Empty when the line was cut before it.
            if !model.is_empty() {
                put("model_shape", shape(model));
            }
        }
        Fact::IndexOutOfBounds { value, size, dim } => {
            if let Some(v) = value {
                put("index", v.to_string());
            }
            if let Some(s) = size {
                put("size", s.to_string());
            }
            if let Some(d) = dim {
                put("dim", d.to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_torch_prints_them() {
        assert_eq!(human_size(512), "512 B");
        assert_eq!(human_size(20 << 20), "20.00 MiB");
        assert_eq!(human_size((1.95 * (1u64 << 30) as f64) as u64), "1.95 GiB");
    }

    #[test]
    fn every_fact_kind_has_a_name_in_the_list() {
        let facts = [
            Fact::MatmulShapes {
                left: vec![],
                right: vec![],
            },
            Fact::BroadcastSizes { a: 1, b: 2, dim: 0 },
            Fact::TargetInputShapes {
                target: vec![],
                input: vec![],
            },
            Fact::Dtypes {
                expected: String::new(),
                found: String::new(),
            },
            Fact::Devices {
                first: String::new(),
                second: String::new(),
            },
            Fact::CheckpointSizeMismatch {
                parameter: String::new(),
                checkpoint: vec![],
                model: vec![],
            },
            Fact::IndexOutOfBounds {
                value: None,
                size: None,
                dim: None,
            },
        ];
        for f in &facts {
            assert!(FACT_KINDS.contains(&fact_kind(f)));
        }
        assert_eq!(facts.len(), FACT_KINDS.len());
    }
}
