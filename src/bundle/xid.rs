//! NVIDIA Xid events: the catalog (`rules/xid.toml`) of what each code means, whose fault it is
//! and what to do, and the kernel lines that report them.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use serde::Deserialize;

use crate::model::{XidAction, XidOrigin};
use crate::rules::class_matches;

/// Name of the catalog in a rules directory.
pub const CATALOG_FILE: &str = "xid.toml";

/// What one Xid code means.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct XidEntry {
    /// The code.
    pub code: u32,
    /// NVIDIA's short name.
    pub name: String,
    /// What it means, in a sentence.
    pub meaning: String,
    /// Whose fault it is.
    pub origin: XidOrigin,
    /// What to do, in order.
    pub actions: Vec<XidAction>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    sources: Vec<String>,
    application_classes: Vec<String>,
    xid: Vec<XidEntry>,
}

/// The Xid catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XidCatalog {
    entries: BTreeMap<u32, XidEntry>,
    /// Where the meanings come from.
    pub sources: Vec<String>,
    application_classes: Vec<String>,
}

/// Why the catalog could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    /// Not valid TOML, or not the catalog's shape.
    #[error("{file}: {message}")]
    Syntax {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// A code listed twice.
    #[error("{file}: Xid {code} is listed twice")]
    Duplicate {
        /// The file.
        file: String,
        /// The code.
        code: u32,
    },
    /// The build has no embedded catalog.
    #[error("the embedded rule base has no {CATALOG_FILE}")]
    Missing,
}

impl XidCatalog {
    /// Reads a catalog; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Self, CatalogError> {
        let parsed: CatalogFile = toml::from_str(text).map_err(|e| CatalogError::Syntax {
            file: file.to_owned(),
            message: e.to_string(),
        })?;
        let mut entries = BTreeMap::new();
        for entry in parsed.xid {
            let code = entry.code;
            if entries.insert(code, entry).is_some() {
                return Err(CatalogError::Duplicate {
                    file: file.to_owned(),
                    code,
                });
            }
        }
        Ok(Self {
            entries,
            sources: parsed.sources,
            application_classes: parsed.application_classes,
        })
    }

    /// The catalog built into the binary.
    pub fn embedded() -> Result<Self, CatalogError> {
        let text = crate::rules::embedded_catalog(CATALOG_FILE).ok_or(CatalogError::Missing)?;
        Self::parse(text, "rules/xid.toml")
    }

    /// What `code` means, when the catalog knows it.
    pub fn get(&self, code: u32) -> Option<&XidEntry> {
        self.entries.get(&code)
    }

    /// Whether a failure of `class` on a rank settles an ambiguous Xid on its GPU as the
    /// application's.
    pub fn settles_as_application(&self, class: &str) -> bool {
        self.application_classes
            .iter()
            .any(|glob| class_matches(glob, class))
    }
}

/// An Xid kernel line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XidLine {
    /// The code.
    pub code: u32,
    /// The GPU's PCI bus id, normalized (`0000:3b:00`).
    pub bus_id: Option<String>,
}

static XID: LazyLock<Regex> = LazyLock::new(|| {
    #[allow(clippy::expect_used)]
    Regex::new(r"NVRM: Xid \((?:PCI:)?(?P<bus>(?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?\): (?P<code>\d{1,4})\b")
        .expect("the Xid pattern compiles")
});

/// The Xid a kernel line reports, if it reports one.
pub fn parse_line(line: &str) -> Option<XidLine> {
    let c = XID.captures(line)?;
    Some(XidLine {
        code: c["code"].parse().ok()?,
        bus_id: normalize_bus_id(&c["bus"]),
    })
}

/// `00000000:3B:00.0`, `0000:3b:00`, `3b:00` → `0000:3b:00` (domain, bus, device; lower case).
pub fn normalize_bus_id(text: &str) -> Option<String> {
    let text = text.trim();
    let without_function = match text.rsplit_once('.') {
        Some((head, f)) if f.len() == 1 && f.bytes().all(|b| b.is_ascii_digit()) => head,
        _ => text,
    };
    let parts: Vec<&str> = without_function.split(':').collect();
    let (domain, bus, device) = match parts.as_slice() {
        [domain, bus, device] => (*domain, *bus, *device),
        [bus, device] => ("0", *bus, *device),
        _ => return None,
    };
    let hex =
        |s: &str, max: usize| !s.is_empty() && s.len() <= max && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !(hex(domain, 8) && hex(bus, 2) && hex(device, 2)) {
        return None;
    }
    let domain = u32::from_str_radix(domain, 16).ok()?;
    let bus = u32::from_str_radix(bus, 16).ok()?;
    let device = u32::from_str_radix(device, 16).ok()?;
    Some(format!("{domain:04x}:{bus:02x}:{device:02x}"))
}

/// NCCL's `busId 3b000` (hex of domain, bus, device and function) as a bus id.
pub fn bus_id_from_nccl(hex: &str) -> Option<String> {
    if hex.len() < 5 || hex.len() > 12 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let value = u64::from_str_radix(hex, 16).ok()?;
    let device = (value >> 4) & 0xff;
    let bus = (value >> 12) & 0xff;
    let domain = value >> 20;
    Some(format!("{domain:04x}:{bus:02x}:{device:02x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> XidCatalog {
        XidCatalog::embedded().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_embedded_catalog_reads_and_says_whose_fault_each_xid_is() {
        let c = catalog();
        assert_eq!(c.get(79).map(|e| e.origin), Some(XidOrigin::Hardware));
        assert_eq!(
            c.get(79).map(|e| e.actions.first().copied()),
            Some(Some(XidAction::DrainNode))
        );
        for ambiguous in [13, 31, 43] {
            assert_eq!(
                c.get(ambiguous).map(|e| e.origin),
                Some(XidOrigin::Ambiguous),
                "Xid {ambiguous}"
            );
        }
        assert!(c.get(4242).is_none());
        assert!(!c.sources.is_empty());
        assert!(c.settles_as_application("cuda.device_assert.index"));
        assert!(!c.settles_as_application("cuda.oom"));
    }

    #[test]
    fn a_code_listed_twice_or_an_unknown_field_is_an_error() {
        let twice = "sources = []\napplication_classes = []\n[[xid]]\ncode = 1\nname = 'a'\nmeaning = 'm'\norigin = 'driver'\nactions = []\n[[xid]]\ncode = 1\nname = 'b'\nmeaning = 'm'\norigin = 'driver'\nactions = []\n";
        assert!(matches!(
            XidCatalog::parse(twice, "x.toml"),
            Err(CatalogError::Duplicate { code: 1, .. })
        ));
        let bad_origin = "sources = []\napplication_classes = []\n[[xid]]\ncode = 1\nname = 'a'\nmeaning = 'm'\norigin = 'cosmic'\nactions = []\n";
        assert!(matches!(
            XidCatalog::parse(bad_origin, "x.toml"),
            Err(CatalogError::Syntax { .. })
        ));
    }

    #[test]
    fn xid_lines_give_their_code_and_bus_id() {
        let line = "[ 1234.5] NVRM: Xid (PCI:0000:3B:00): 79, pid=1234, GPU has fallen off the bus.";
        assert_eq!(
            parse_line(line),
            Some(XidLine {
                code: 79,
                bus_id: Some("0000:3b:00".into())
            })
        );
        assert_eq!(
            parse_line("NVRM: Xid (0000:01:00): 3, C 00000005").map(|x| x.code),
            Some(3)
        );
        assert_eq!(parse_line("NVRM: loading NVIDIA UNIX x86_64 Kernel Module"), None);
    }

    #[test]
    fn bus_ids_from_nvidia_smi_nccl_and_the_kernel_agree() {
        assert_eq!(
            normalize_bus_id("00000000:3B:00.0").as_deref(),
            Some("0000:3b:00")
        );
        assert_eq!(normalize_bus_id("3b:00").as_deref(), Some("0000:3b:00"));
        assert_eq!(bus_id_from_nccl("3b000").as_deref(), Some("0000:3b:00"));
        assert_eq!(bus_id_from_nccl("1b1000").as_deref(), Some("0001:b1:00"));
        assert_eq!(normalize_bus_id("zz:00"), None);
    }
}
