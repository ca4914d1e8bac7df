//! Version ranges (`">=1.13, <2.1"`) compared against versions printed in a log (`2.0.1+cu117`).

use std::cmp::Ordering;

/// A version as a list of numeric components (`2.0.1+cu117` → `[2, 0, 1]`).
#[derive(Debug, Clone)]
pub struct Version(Vec<u64>);

impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Version {}

impl Version {
    /// Reads the leading numeric components; `None` when the text does not start with a number.
    pub fn parse(text: &str) -> Option<Self> {
        let parts: Vec<u64> = text
            .trim()
            .trim_start_matches('v')
            .split('.')
            .map_while(|p| {
                let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
                digits.parse().ok()
            })
            .collect();
        (!parts.is_empty()).then_some(Self(parts))
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Version {
    /// Missing components count as 0: `2.1` == `2.1.0`.
    fn cmp(&self, other: &Self) -> Ordering {
        let len = self.0.len().max(other.0.len());
        (0..len)
            .map(|i| {
                let a = self.0.get(i).copied().unwrap_or(0);
                let b = other.0.get(i).copied().unwrap_or(0);
                a.cmp(&b)
            })
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
}

/// A conjunction of comparisons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionReq(Vec<(Op, Version)>);

/// What is wrong with a version range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad version range {0:?}: write comparisons like \">=1.13, <2.1\"")]
pub struct VersionReqError(String);

impl VersionReq {
    /// Parses `">=1.13, <2.1"`, `"==2.0"`, `"<12"`.
    pub fn parse(text: &str) -> Result<Self, VersionReqError> {
        let err = || VersionReqError(text.to_owned());
        let mut out = Vec::new();
        for part in text.split(',').map(str::trim) {
            let (op, rest) = [
                (">=", Op::Ge),
                ("<=", Op::Le),
                ("==", Op::Eq),
                (">", Op::Gt),
                ("<", Op::Lt),
                ("=", Op::Eq),
            ]
            .iter()
            .find_map(|(s, op)| part.strip_prefix(s).map(|rest| (*op, rest)))
            .ok_or_else(err)?;
            out.push((op, Version::parse(rest).ok_or_else(err)?));
        }
        if out.is_empty() {
            return Err(err());
        }
        Ok(Self(out))
    }

    /// Whether `version` satisfies every comparison.
    pub fn matches(&self, version: &Version) -> bool {
        self.0.iter().all(|(op, bound)| {
            let ord = version.cmp(bound);
            match op {
                Op::Lt => ord.is_lt(),
                Op::Le => ord.is_le(),
                Op::Gt => ord.is_gt(),
                Op::Ge => ord.is_ge(),
                Op::Eq => ord.is_eq(),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap_or_else(|| panic!("bad version {s}"))
    }

    #[test]
    fn local_suffixes_and_missing_components_are_ignored() {
        assert_eq!(v("2.0.1+cu117"), v("2.0.1"));
        assert_eq!(v("2.1"), v("2.1.0"));
        assert!(v("1.13.1") < v("2.0"));
        assert!(v("12.10") > v("12.9"));
        assert_eq!(Version::parse("Could not collect"), None);
    }

    #[test]
    fn ranges_are_conjunctions() {
        let r = VersionReq::parse(">=1.13, <2.1").unwrap_or_else(|e| panic!("{e}"));
        assert!(r.matches(&v("1.13.1")));
        assert!(r.matches(&v("2.0.1+cu118")));
        assert!(!r.matches(&v("2.1.0")));
        assert!(!r.matches(&v("1.12")));
    }

    #[test]
    fn malformed_ranges_are_errors() {
        assert!(VersionReq::parse("1.13").is_err());
        assert!(VersionReq::parse(">=abc").is_err());
        assert!(VersionReq::parse("").is_err());
    }
}
