//! Comparisons between the figures of an out-of-memory report: `"tried > free"`,
//! `"reserved_unallocated >= 0.2 * total"`, `"tried > 1 GiB"`.

use crate::model::OomReport;
use crate::parse::parse_size;

/// A figure of an OOM report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    /// Tried to allocate.
    Tried,
    /// Total capacity.
    Total,
    /// Allocated by PyTorch.
    Allocated,
    /// Free on the device.
    Free,
    /// Reserved by PyTorch.
    Reserved,
    /// Reserved but unallocated (fragmentation).
    ReservedUnallocated,
    /// Memory of the whole process.
    Process,
    /// The process's cap (a memory fraction).
    Allowed,
}

impl Figure {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "tried" => Self::Tried,
            "total" => Self::Total,
            "allocated" => Self::Allocated,
            "free" => Self::Free,
            "reserved" => Self::Reserved,
            "reserved_unallocated" => Self::ReservedUnallocated,
            "process" => Self::Process,
            "allowed" => Self::Allowed,
            _ => return None,
        })
    }

    fn of(self, oom: &OomReport) -> Option<u64> {
        match self {
            Self::Tried => oom.tried_bytes,
            Self::Total => oom.total_bytes,
            Self::Allocated => oom.allocated_bytes,
            Self::Free => oom.free_bytes,
            Self::Reserved => oom.reserved_bytes,
            Self::ReservedUnallocated => oom.reserved_unallocated_bytes,
            Self::Process => oom.process_bytes,
            Self::Allowed => oom.allowed_bytes,
        }
    }
}

/// One term of a sum: a scaled figure, or a fixed size in bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Term {
    Scaled(f64, Figure),
    Bytes(f64),
}

/// A sum of terms (`free + reserved_unallocated`, `0.5 * total`, `1 GiB`).
#[derive(Debug, Clone, PartialEq)]
struct Sum(Vec<Term>);

impl Sum {
    fn parse(text: &str) -> Option<Self> {
        let terms = text
            .split('+')
            .map(|term| {
                let term = term.trim();
                if let Some((factor, figure)) = term.split_once('*') {
                    Some(Term::Scaled(
                        factor.trim().parse().ok()?,
                        Figure::parse(figure.trim())?,
                    ))
                } else if let Some(figure) = Figure::parse(term) {
                    Some(Term::Scaled(1.0, figure))
                } else {
                    parse_size(term).map(|b| Term::Bytes(b as f64))
                }
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Self(terms))
    }

    /// The value, or `None` when a figure is missing from the report.
    fn value(&self, oom: &OomReport) -> Option<f64> {
        self.0.iter().try_fold(0.0, |sum, term| {
            Some(
                sum + match term {
                    Term::Scaled(factor, figure) => factor * figure.of(oom)? as f64,
                    Term::Bytes(b) => *b,
                },
            )
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Gt,
    Ge,
    Lt,
    Le,
}

/// One comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct OomCompare {
    left: Sum,
    op: Op,
    right: Sum,
}

/// What is wrong with a comparison.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "bad comparison {0:?}: write `SUM OP SUM`, each SUM made of `FIGURE`, `NUMBER * FIGURE` or `SIZE` terms joined by +, with figures tried, total, allocated, free, reserved, reserved_unallocated, process, allowed and OP one of > >= < <="
)]
pub struct OomCompareError(String);

impl OomCompare {
    /// Parses one comparison.
    pub fn parse(text: &str) -> Result<Self, OomCompareError> {
        let err = || OomCompareError(text.to_owned());
        let (left, op, right) = [(">=", Op::Ge), ("<=", Op::Le), (">", Op::Gt), ("<", Op::Lt)]
            .iter()
            .find_map(|(s, op)| text.split_once(s).map(|(l, r)| (l, *op, r)))
            .ok_or_else(err)?;
        Ok(Self {
            left: Sum::parse(left).ok_or_else(err)?,
            op,
            right: Sum::parse(right).ok_or_else(err)?,
        })
    }

    /// Whether the report satisfies the comparison; `false` when a figure is missing.
    pub fn holds(&self, oom: &OomReport) -> bool {
        let (Some(left), Some(right)) = (self.left.value(oom), self.right.value(oom)) else {
            return false;
        };
        match self.op {
            Op::Gt => left > right,
            Op::Ge => left >= right,
            Op::Lt => left < right,
            Op::Le => left <= right,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn report() -> OomReport {
        OomReport {
            tried_bytes: Some(2 * GIB),
            total_bytes: Some(80 * GIB),
            free_bytes: Some(GIB),
            reserved_unallocated_bytes: Some(30 * GIB),
            ..OomReport::default()
        }
    }

    fn holds(text: &str) -> bool {
        OomCompare::parse(text)
            .unwrap_or_else(|e| panic!("{e}"))
            .holds(&report())
    }

    #[test]
    fn figures_compare_with_figures_scaled_figures_and_sizes() {
        assert!(holds("tried > free"));
        assert!(!holds("tried > total"));
        assert!(holds("reserved_unallocated >= 0.25 * total"));
        assert!(holds("tried >= 2 GiB"));
        assert!(holds("free + 1 GiB <= tried"));
        assert!(!holds("free + reserved_unallocated < tried"));
        assert!(!holds("tried < 1.5 GiB"));
    }

    #[test]
    fn a_missing_figure_never_holds() {
        assert!(!holds("allocated > free"));
        assert!(!holds("free < 0.5 * reserved"));
    }

    #[test]
    fn malformed_comparisons_are_errors() {
        for bad in ["tried", "tried > lots", "memory > free", "tried > x * total"] {
            assert!(OomCompare::parse(bad).is_err(), "{bad}");
        }
    }
}
