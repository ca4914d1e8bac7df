//! From a parsed [`RuleSpec`] to a validated [`Rule`]: every regex compiled, every template,
//! version range and comparison parsed. Errors name the file, the rule and the field.

use std::collections::BTreeMap;

use super::pattern::Pattern;

use super::conditions::{
    AssertCond, CublasCond, EventConditions, ExceptionCond, FACT_KINDS, FrameCond, OomCond,
};
use super::oom_compare::OomCompare;
use super::spec::{CublasSpec, ExampleSpec, RuleSpec};
use super::template::Template;
use super::version::VersionReq;
use super::{LoadError, PatternTable};
use crate::model::{Confidence, EnvKey, FindingOrigin, MemoryKind, ReplaySpec, Role, Severity, Text};

/// A cause ready to render.
#[derive(Debug, Clone)]
pub struct CompiledCause {
    /// Title.
    pub title: Template,
    /// Explanation.
    pub detail: Template,
    /// Replay check: name and parameter templates.
    pub replay: Option<(String, BTreeMap<String, Template>)>,
}

impl CompiledCause {
    /// The replay spec with captured values filled in.
    pub fn replay_spec(&self, values: &BTreeMap<String, String>) -> Option<ReplaySpec> {
        self.replay.as_ref().map(|(check, params)| ReplaySpec {
            check: check.clone(),
            params: params
                .iter()
                .map(|(k, t)| (k.clone(), t.render(values)))
                .collect(),
        })
    }
}

/// A fix ready to render (its code is shown as written).
#[derive(Debug, Clone)]
pub struct CompiledFix {
    /// What to do.
    pub title: Template,
    /// Code.
    pub code: Option<Text>,
}

/// A validated rule. Line patterns are indices into the rule set's [`PatternTable`].
#[derive(Debug, Clone)]
pub struct Rule {
    /// Dotted id.
    pub id: String,
    /// File it came from, as given to the loader.
    pub file: String,
    /// Taxonomy class.
    pub class: String,
    /// A specific rule, or a class detector (`rules/detect/`: run only over logs no specific
    /// rule explains).
    pub origin: FindingOrigin,
    /// Title.
    pub title: Text,
    /// Summary template.
    pub summary: Template,
    /// Severity.
    pub severity: Severity,
    /// Priority.
    pub priority: i32,
    /// Role.
    pub role: Role,
    /// Base confidence.
    pub confidence: Confidence,
    /// Class globs this rule yields to.
    pub yields_to: Vec<String>,
    /// Tags.
    pub tags: Vec<String>,
    /// `match.any` patterns.
    pub any: Vec<usize>,
    /// `match.all` patterns.
    pub all: Vec<usize>,
    /// `match.same_line` patterns.
    pub same_line: Vec<usize>,
    /// `match.not` patterns.
    pub not: Vec<usize>,
    /// `match.within`.
    pub within: Option<u64>,
    /// `match.fatal_warning`: matched warning lines are the failure, not a warning about one.
    pub fatal_warning: bool,
    /// Event conditions.
    pub events: EventConditions,
    /// Version ranges.
    pub versions: Vec<(EnvKey, VersionReq, String)>,
    /// The versions must be printed in the log.
    pub require_versions: bool,
    /// Named extractions: name and pattern.
    pub extract: Vec<(String, usize)>,
    /// Causes.
    pub causes: Vec<CompiledCause>,
    /// Fixes.
    pub fixes: Vec<CompiledFix>,
    /// Next artifact.
    pub next_artifact: Option<Template>,
    /// Links.
    pub links: Vec<Text>,
    /// Examples.
    pub examples: Vec<ExampleSpec>,
}

impl Rule {
    /// Every line pattern the rule uses (any, all, not, extract).
    pub fn pattern_ids(&self) -> impl Iterator<Item = usize> + '_ {
        self.any
            .iter()
            .chain(&self.all)
            .chain(&self.same_line)
            .chain(&self.not)
            .copied()
            .chain(self.extract.iter().map(|(_, p)| *p))
    }
}

/// Collects the errors of one rule file.
pub(super) struct Errors<'a> {
    pub file: &'a str,
    pub rule: String,
    pub found: Vec<LoadError>,
}

impl Errors<'_> {
    fn push(&mut self, field: &str, message: impl Into<String>) {
        self.found.push(LoadError::Invalid {
            file: self.file.to_owned(),
            rule: self.rule.clone(),
            field: field.to_owned(),
            message: message.into(),
        });
    }

    fn regex(&mut self, field: &str, pattern: &str) -> Option<Pattern> {
        match Pattern::new(pattern) {
            Ok(pattern) => Some(pattern),
            Err(e) => {
                self.push(field, format!("invalid regex: {e}"));
                None
            }
        }
    }

    fn opt_regex(&mut self, field: &str, pattern: &Option<String>) -> Option<Pattern> {
        pattern.as_ref().and_then(|p| self.regex(field, p))
    }

    fn template(&mut self, field: &str, text: &str) -> Template {
        Template::parse(text).unwrap_or_else(|e| {
            self.push(field, e.to_string());
            Template::parse("").unwrap_or_else(|_| unreachable!("the empty template parses"))
        })
    }

    fn patterns(&mut self, field: &str, patterns: &[String], table: &mut PatternTable) -> Vec<usize> {
        patterns
            .iter()
            .enumerate()
            .filter_map(|(i, p)| match table.intern(p) {
                Ok(id) => Some(id),
                Err(e) => {
                    self.push(&format!("{field}[{i}]"), e);
                    None
                }
            })
            .collect()
    }
}

/// The id a rule file's path implies: `cuda/illegal_address.toml` → `cuda.illegal_address`.
pub fn id_from_path(relative: &str) -> String {
    relative.trim_end_matches(".toml").replace(['/', '\\'], ".")
}

/// The folder of the rules directory that holds the class detectors.
pub const DETECTOR_AREA: &str = "detect";

/// What a rule file is by its path: a class detector under `detect/`, a specific rule elsewhere.
pub fn origin_from_path(relative: &str) -> FindingOrigin {
    match relative.split_once(['/', '\\']) {
        Some((DETECTOR_AREA, _)) => FindingOrigin::Detector,
        _ => FindingOrigin::Rule,
    }
}

/// What a class detector may not be: it runs only over the lines of a log that no specific rule
/// explains, so it is never sure (never `high`), always a root cause, and reads lines only.
fn check_detector(e: &mut Errors<'_>, spec: &RuleSpec, has_events: bool) {
    if spec.confidence == Confidence::High {
        e.push(
            "confidence",
            "a class detector is never \"high\": it recognizes a class by its vocabulary, not a failure by its wording (write a specific rule for that)",
        );
    }
    if spec.role != Role::Root {
        e.push(
            "role",
            "a class detector is a \"root\" finding (it runs only where no root cause was found)",
        );
    }
    if has_events {
        e.push(
            "match",
            "a class detector reads lines only (any, all, same_line, not, within): event conditions belong in a specific rule",
        );
    }
}

/// Compiles one rule; problems are appended to `errors`.
pub(super) fn compile_rule(
    spec: RuleSpec,
    file: &str,
    relative: &str,
    classes: &[String],
    table: &mut PatternTable,
    errors: &mut Vec<LoadError>,
) -> Option<Rule> {
    let mut e = Errors {
        file,
        rule: spec.id.clone(),
        found: Vec::new(),
    };
    let origin = origin_from_path(relative);
    let expected_id = id_from_path(relative);
    if spec.id != expected_id {
        e.push("id", format!("must be {expected_id:?}, the id its path gives"));
    }
    if !classes.contains(&spec.class) {
        e.push(
            "class",
            format!(
                "unknown class {:?}: add it to rules/taxonomy.toml first",
                spec.class
            ),
        );
    }
    for glob in &spec.yields_to {
        if !classes.iter().any(|c| super::class_matches(glob, c)) {
            e.push(
                "yields_to",
                format!("{glob:?} matches no class of rules/taxonomy.toml (it takes classes or `prefix.*`, not rule ids)"),
            );
        }
    }
    let m = &spec.conditions;
    let any = e.patterns("match.any", &m.any, table);
    let all = e.patterns("match.all", &m.all, table);
    let same_line = e.patterns("match.same_line", &m.same_line, table);
    let not = e.patterns("match.not", &m.not, table);
    let events = compile_events(&mut e, &spec);
    if origin == FindingOrigin::Detector {
        check_detector(&mut e, &spec, !events.is_empty());
    }
    if m.any.is_empty() && m.all.is_empty() && events.is_empty() {
        e.push("match", "needs at least one of any, all or an event condition");
    }
    if m.within.is_some() && (m.any.is_empty() || m.all.is_empty()) {
        e.push("match.within", "needs both any and all");
    }
    if !m.same_line.is_empty() && m.any.is_empty() {
        e.push(
            "match.same_line",
            "needs any (the line they share is an `any` line)",
        );
    }
    let versions = compile_versions(&mut e, &m.versions);
    let extract = spec
        .extract
        .iter()
        .filter_map(|(name, pattern)| match table.intern(pattern) {
            Ok(id) => Some((name.clone(), id)),
            Err(msg) => {
                e.push(&format!("extract.{name}"), msg);
                None
            }
        })
        .collect();
    let causes = spec
        .causes
        .iter()
        .enumerate()
        .map(|(i, c)| CompiledCause {
            title: e.template(&format!("cause[{i}].title"), &c.title),
            detail: e.template(&format!("cause[{i}].detail"), &c.detail),
            replay: c.replay.as_ref().map(|r| {
                let params = r
                    .params
                    .iter()
                    .map(|(k, v)| (k.clone(), e.template(&format!("cause[{i}].replay.params.{k}"), v)))
                    .collect();
                (r.check.clone(), params)
            }),
        })
        .collect();
    if spec.causes.is_empty() && spec.role != Role::Context {
        e.push("cause", "a root or symptom rule needs at least one cause");
    }
    if spec.fixes.is_empty() && spec.role != Role::Context {
        e.push("fix", "a root or symptom rule needs at least one fix");
    }
    let fixes = spec
        .fixes
        .iter()
        .enumerate()
        .map(|(i, f)| CompiledFix {
            title: e.template(&format!("fix[{i}].title"), &f.title),
            code: f.code.as_deref().map(Text::shared),
        })
        .collect();
    let summary = e.template("summary", &spec.summary);
    let next_artifact = spec
        .next_artifact
        .as_deref()
        .map(|t| e.template("next_artifact", t));
    if spec.examples.iter().all(|x| !x.expect.matched) {
        e.push("example", "needs at least one example that the rule matches");
    }
    let ok = e.found.is_empty();
    errors.append(&mut e.found);
    ok.then(|| Rule {
        id: spec.id,
        file: file.to_owned(),
        class: spec.class,
        origin,
        title: Text::shared(&spec.title),
        summary,
        severity: spec.severity,
        priority: spec.priority,
        role: spec.role,
        confidence: spec.confidence,
        yields_to: spec.yields_to,
        tags: spec.tags,
        any,
        all,
        same_line,
        not,
        within: m.within,
        fatal_warning: m.fatal_warning,
        events,
        versions,
        require_versions: m.require_versions,
        extract,
        causes,
        fixes,
        next_artifact,
        links: spec.links.iter().map(|l| Text::shared(l)).collect(),
        examples: spec.examples,
    })
}

fn compile_events(e: &mut Errors<'_>, spec: &RuleSpec) -> EventConditions {
    let m = &spec.conditions;
    let exception = m.exception.as_ref().map(|x| ExceptionCond {
        type_name: e.opt_regex("match.exception.type", &x.type_name),
        message: e.opt_regex("match.exception.message", &x.message),
    });
    let cuda_assert = m.cuda_assert.as_ref().map(|a| AssertCond {
        file: e.opt_regex("match.cuda_assert.file", &a.file),
        expression: e.opt_regex("match.cuda_assert.expression", &a.expression),
        expression_unspaced: a
            .expression
            .as_ref()
            .filter(|p| p.contains(' '))
            .and_then(|p| e.regex("match.cuda_assert.expression", &p.replace(' ', ""))),
        function: e.opt_regex("match.cuda_assert.function", &a.function),
    });
    let oom = m.oom.as_ref().map(|o| OomCond {
        memory: match o.memory.as_deref() {
            None => None,
            Some("gpu") => Some(MemoryKind::Gpu),
            Some("host") => Some(MemoryKind::Host),
            Some("unspecified") => Some(MemoryKind::Unspecified),
            Some(other) => {
                e.push(
                    "match.oom.memory",
                    format!("{other:?} is not \"gpu\", \"host\" or \"unspecified\""),
                );
                None
            }
        },
        compare: o
            .compare
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                OomCompare::parse(c)
                    .map_err(|err| e.push(&format!("match.oom.compare[{i}]"), err.to_string()))
                    .ok()
            })
            .collect(),
    });
    let fact = m.fact.as_deref().and_then(|f| {
        let known = FACT_KINDS.iter().find(|k| **k == f).copied();
        if known.is_none() {
            e.push(
                "match.fact",
                format!("unknown fact {f:?}; known: {}", FACT_KINDS.join(", ")),
            );
        }
        known
    });
    let frame = m.frame.as_ref().map(|f| FrameCond {
        file: e.opt_regex("match.frame.file", &f.file),
        function: e.opt_regex("match.frame.function", &f.function),
    });
    EventConditions {
        frame,
        exception,
        cuda_assert,
        cuda_error: e.opt_regex("match.cuda_error", &m.cuda_error),
        cublas: m.cublas.as_ref().map(|c| match c {
            CublasSpec::Status(status) => CublasCond {
                status: e.regex("match.cublas", status),
                call: None,
                dtypes: None,
            },
            CublasSpec::Fields(f) => CublasCond {
                status: e.opt_regex("match.cublas.status", &f.status),
                call: e.opt_regex("match.cublas.call", &f.call),
                dtypes: e.opt_regex("match.cublas.dtypes", &f.dtypes),
            },
        }),
        cudnn: e.opt_regex("match.cudnn", &m.cudnn),
        nccl: e.opt_regex("match.nccl", &m.nccl),
        oom,
        fact,
    }
}

fn compile_versions(
    e: &mut Errors<'_>,
    versions: &BTreeMap<String, String>,
) -> Vec<(EnvKey, VersionReq, String)> {
    const KEYS: &[(&str, EnvKey)] = &[
        ("torch", EnvKey::Torch),
        ("cuda", EnvKey::Cuda),
        ("driver_cuda", EnvKey::DriverCuda),
        ("cudnn", EnvKey::Cudnn),
        ("driver", EnvKey::Driver),
        ("transformers", EnvKey::Transformers),
        ("python", EnvKey::Python),
        ("nccl", EnvKey::Nccl),
    ];
    versions
        .iter()
        .filter_map(|(name, range)| {
            let field = format!("match.versions.{name}");
            let Some((_, key)) = KEYS.iter().find(|(k, _)| k == name) else {
                e.push(&field, "unknown component; use torch, cuda, driver_cuda, cudnn, driver, transformers, python or nccl");
                return None;
            };
            match VersionReq::parse(range) {
                Ok(req) => Some((*key, req, range.clone())),
                Err(err) => {
                    e.push(&field, err.to_string());
                    None
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_under_detect_are_class_detectors() {
        assert_eq!(
            origin_from_path("detect/accelerator_memory.toml"),
            FindingOrigin::Detector
        );
        assert_eq!(
            origin_from_path("detect\\dtype_pair.toml"),
            FindingOrigin::Detector
        );
        assert_eq!(origin_from_path("oom/gpu_oom.toml"), FindingOrigin::Rule);
        assert_eq!(origin_from_path("detector/x.toml"), FindingOrigin::Rule);
    }

    #[test]
    fn ids_come_from_paths() {
        assert_eq!(id_from_path("cuda/illegal_address.toml"), "cuda.illegal_address");
        assert_eq!(id_from_path("nccl\\watchdog.toml"), "nccl.watchdog");
    }
}
