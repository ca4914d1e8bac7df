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
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Rhs {
    Scaled(f64, Figure),
    Bytes(f64),
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
    left: Figure,
    op: Op,
    right: Rhs,
}

/// What is wrong with a comparison.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "bad comparison {0:?}: write `FIGURE OP FIGURE`, `FIGURE OP NUMBER * FIGURE` or `FIGURE OP SIZE` with figures tried, total, allocated, free, reserved, reserved_unallocated, process and OP one of > >= < <="
)]
pub struct OomCompareError(String);

impl OomCompare {
    /// Parses one comparison.
    pub fn parse(text: &str) -> Result<Self, OomCompareError> {
        let err = || OomCompareError(text.to_owned());
        let (left, op, right) = [(">=", Op::Ge), ("<=", Op::Le), (">", Op::Gt), ("<", Op::Lt)]
            .iter()
            .find_map(|(s, op)| text.split_once(s).map(|(l, r)| (l.trim(), *op, r.trim())))
            .ok_or_else(err)?;
        let left = Figure::parse(left).ok_or_else(err)?;
        let right = if let Some((factor, figure)) = right.split_once('*') {
            let factor: f64 = factor.trim().parse().map_err(|_| err())?;
            Rhs::Scaled(factor, Figure::parse(figure.trim()).ok_or_else(err)?)
        } else if let Some(figure) = Figure::parse(right) {
            Rhs::Scaled(1.0, figure)
        } else {
            Rhs::Bytes(parse_size(right).ok_or_else(err)? as f64)
        };
        Ok(Self { left, op, right })
    }

    /// Whether the report satisfies the comparison; `false` when a figure is missing.
    pub fn holds(&self, oom: &OomReport) -> bool {
        let Some(left) = self.left.of(oom) else {
            return false;
        };
        let right = match self.right {
            Rhs::Scaled(factor, figure) => match figure.of(oom) {
                Some(v) => factor * v as f64,
                None => return false,
            },
            Rhs::Bytes(b) => b,
        };
        let left = left as f64;
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
