//! The rule base: loading and validating rule files, and the compiled [`RuleSet`] the matcher runs.
//!
//! Rules are TOML files under `rules/<area>/<name>.toml` (the path gives the id), with the classes
//! they may use in `rules/taxonomy.toml`. The default rule base is embedded in the binary; a
//! directory given with `--rules` replaces it. Loading never panics: every problem in every file is
//! reported, naming the file, the rule and the field.

mod compile;
pub mod conditions;
pub mod detectors;
pub mod matcher;
pub mod oom_compare;
pub mod pattern;
pub mod spec;
pub mod template;
pub mod version;

pub use compile::{CompiledCause, CompiledFix, DETECTOR_AREA, Rule, id_from_path, origin_from_path};
pub use detectors::DetectorAutomata;

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use std::sync::OnceLock;

use pattern::Pattern;
use regex_syntax::hir::Hir;

use crate::model::FindingOrigin;
use crate::scan::{LineSet, Prefilter};
use spec::{ClassSpec, RuleSpec, TaxonomySpec};

/// `cuda.device_assert.*` matches `cuda.device_assert.index`; `*` matches any class.
pub fn class_matches(glob: &str, class: &str) -> bool {
    match glob.strip_suffix('*') {
        Some(prefix) => class.starts_with(prefix),
        None => glob == class,
    }
}

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded_rules.rs"));
}

/// Name of the taxonomy file at the root of a rules directory.
pub const TAXONOMY_FILE: &str = "taxonomy.toml";

/// Files at the root of a rules directory that are catalogs other parts read, not rules
/// (`xid.toml`: what each NVIDIA Xid means, read by `bundle`). The loader skips them.
pub const CATALOG_FILES: &[&str] = &["xid.toml"];

/// The embedded copy of a catalog file (one of [`CATALOG_FILES`]).
pub fn embedded_catalog(name: &str) -> Option<&'static str> {
    embedded::EMBEDDED_RULES
        .iter()
        .find(|(relative, _)| *relative == name)
        .map(|(_, text)| *text)
}

/// A problem with the rule base.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// A file could not be read.
    #[error("{file}: cannot read: {message}")]
    Io {
        /// The file.
        file: String,
        /// Why.
        message: String,
    },
    /// A file is not valid TOML or does not have the rule format.
    #[error("{file}: {message}")]
    Syntax {
        /// The file.
        file: String,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A field of a rule is invalid.
    #[error("{file}: rule {rule}: {field}: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// The rule id.
        rule: String,
        /// The field (`match.any[2]`).
        field: String,
        /// What is wrong.
        message: String,
    },
    /// Two files define the same rule id.
    #[error("rule {id} is defined twice: {first} and {second}")]
    Duplicate {
        /// The id.
        id: String,
        /// First file.
        first: String,
        /// Second file.
        second: String,
    },
    /// The rules together cannot be compiled.
    #[error("the rule base does not compile as a whole: {0}")]
    Combined(String),
    /// No rule was found.
    #[error("no rule files in {0}")]
    Empty(String),
}

/// Every problem found while loading a rule base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadErrors(pub Vec<LoadError>);

impl fmt::Display for LoadErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} problem(s) in the rule base:", self.0.len())?;
        for e in &self.0 {
            writeln!(f, "  {e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for LoadErrors {}

impl From<LoadError> for LoadErrors {
    fn from(e: LoadError) -> Self {
        Self(vec![e])
    }
}

/// One rule file's text and where it came from.
#[derive(Debug, Clone)]
pub struct RuleFile {
    /// Path relative to the rules directory (`cuda/illegal_address.toml`): gives the id.
    pub relative: String,
    /// Path to show in messages.
    pub display: String,
    /// Contents.
    pub text: String,
}

/// Line patterns of all rules, each parsed (validated) at load and compiled once, at first use,
/// however many rules share it.
#[derive(Debug, Default, Clone)]
pub struct PatternTable {
    patterns: Vec<Pattern>,
    parsed: Vec<Hir>,
    index: HashMap<String, usize>,
}

impl PatternTable {
    /// The id of `pattern`, validating it the first time it is seen.
    pub fn intern(&mut self, pattern: &str) -> Result<usize, String> {
        if let Some(&id) = self.index.get(pattern) {
            return Ok(id);
        }
        let parsed = Pattern::parse(pattern).map_err(|e| format!("invalid regex: {e}"))?;
        let id = self.patterns.len();
        self.patterns.push(Pattern::parsed(pattern));
        self.parsed.push(parsed);
        self.index.insert(pattern.to_owned(), id);
        Ok(id)
    }

    /// The pattern (compiled when first asked to match).
    pub fn pattern(&self, id: usize) -> &Pattern {
        &self.patterns[id]
    }

    /// The pattern as parsed, which the line set is compiled from.
    pub fn hir(&self, id: usize) -> &Hir {
        &self.parsed[id]
    }

    /// Whether the pattern has capture groups (whether a hit has values to give).
    pub fn has_groups(&self, id: usize) -> bool {
        self.parsed[id].properties().explicit_captures_len() > 0
    }

    /// The pattern as written.
    pub fn source(&self, id: usize) -> &str {
        self.patterns[id].source()
    }

    /// Number of distinct patterns.
    pub fn len(&self) -> usize {
        self.patterns.len()
    }

    /// Whether there is no pattern.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }
}

/// The line set built from all rules together (every rule pattern and the parser's triggers):
/// one pass per line serves the matcher and the parser. Built once, at first analysis.
#[derive(Debug, Clone)]
pub struct Automata {
    /// Every line pattern (pattern `i` of the set is the table's pattern `i`), then the parser's
    /// triggers ([`crate::parse::trigger_patterns`]).
    pub set: LineSet,
    /// How many of the set's patterns are rule patterns.
    rule_patterns: usize,
}

impl Automata {
    /// Splits the set's matches on a line (ascending) into the rule patterns' ids and the
    /// parser triggers' (indices into [`crate::parse::trigger_patterns`]).
    pub fn split<'m>(&self, matched: &'m [usize]) -> (&'m [usize], impl Iterator<Item = usize> + Clone + 'm) {
        let rule_patterns = self.rule_patterns;
        let (patterns, triggers) = matched.split_at(matched.partition_point(|&p| p < rule_patterns));
        (patterns, triggers.iter().map(move |&t| t - rule_patterns))
    }
}

/// Parses every rule file, in order; the second half on a second core (reading the TOML is a
/// third of loading the rule base, which every `faultline analyze` waits for).
fn parse_all(files: &[RuleFile]) -> Vec<Result<RuleSpec, LoadError>> {
    let parse = |files: &[RuleFile]| -> Vec<Result<RuleSpec, LoadError>> {
        files
            .iter()
            .map(|file| {
                toml::from_str::<RuleSpec>(&file.text).map_err(|e| LoadError::Syntax {
                    file: file.display.clone(),
                    message: e.to_string(),
                })
            })
            .collect()
    };
    let (first, second) = files.split_at(files.len() / 2);
    std::thread::scope(|scope| {
        // Where no thread can be started, this one parses both halves.
        let helper = std::thread::Builder::new().spawn_scoped(scope, || parse(second));
        let mut specs = parse(first);
        let rest = match helper {
            Ok(helper) => helper
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Err(_) => parse(second),
        };
        specs.extend(rest);
        specs
    })
}

/// The parser's triggers ([`crate::parse::trigger_patterns`]), parsed as rule patterns are.
fn trigger_patterns() -> Result<Vec<Hir>, LoadError> {
    crate::parse::trigger_patterns()
        .map(|p| Pattern::parse(&p).map_err(|e| LoadError::Combined(format!("parser trigger {p:?}: {e}"))))
        .collect()
}

/// A compiled rule base.
#[derive(Debug, Clone)]
pub struct RuleSet {
    rules: Vec<Rule>,
    taxonomy_file: RuleFile,
    files: Vec<RuleFile>,
    /// Every rule's line patterns: the specific rules' first (ids below `specific_patterns`),
    /// then those only the class detectors use.
    patterns: PatternTable,
    specific_patterns: usize,
    automata: OnceLock<Result<Automata, LoadError>>,
    prefilter: OnceLock<Result<Prefilter, LoadError>>,
    detector_automata: OnceLock<Result<DetectorAutomata, LoadError>>,
    classes: Vec<ClassSpec>,
    origin: String,
}

impl RuleSet {
    /// The rule base embedded in the binary.
    pub fn embedded() -> Result<Self, LoadErrors> {
        let mut taxonomy = None;
        let mut files = Vec::new();
        for (relative, text) in embedded::EMBEDDED_RULES {
            let file = RuleFile {
                relative: (*relative).to_owned(),
                display: format!("rules/{relative}"),
                text: (*text).to_owned(),
            };
            if *relative == TAXONOMY_FILE {
                taxonomy = Some(file);
            } else if !CATALOG_FILES.contains(relative) {
                files.push(file);
            }
        }
        let taxonomy =
            taxonomy.ok_or_else(|| LoadError::Empty("the embedded rule base (no taxonomy.toml)".into()))?;
        Self::from_files(&taxonomy, &files, "embedded")
    }

    /// The rule base in `dir` (`taxonomy.toml` and `<area>/<name>.toml` files).
    pub fn load_dir(dir: &Path) -> Result<Self, LoadErrors> {
        let read = |path: &Path| {
            std::fs::read_to_string(path).map_err(|e| LoadError::Io {
                file: path.display().to_string(),
                message: e.to_string(),
            })
        };
        let taxonomy_path = dir.join(TAXONOMY_FILE);
        let taxonomy = RuleFile {
            relative: TAXONOMY_FILE.to_owned(),
            display: taxonomy_path.display().to_string(),
            text: read(&taxonomy_path)?,
        };
        let mut paths = Vec::new();
        collect_toml(dir, &mut paths).map_err(|e| LoadError::Io {
            file: dir.display().to_string(),
            message: e.to_string(),
        })?;
        paths.sort();
        let mut files = Vec::new();
        let mut errors = Vec::new();
        for path in paths {
            let relative = path
                .strip_prefix(dir)
                .unwrap_or(&path)
                .to_string_lossy()
                .replace('\\', "/");
            if relative == TAXONOMY_FILE || CATALOG_FILES.contains(&relative.as_str()) {
                continue;
            }
            match read(&path) {
                Ok(text) => files.push(RuleFile {
                    relative,
                    display: path.display().to_string(),
                    text,
                }),
                Err(e) => errors.push(e),
            }
        }
        if !errors.is_empty() {
            return Err(LoadErrors(errors));
        }
        Self::from_files(&taxonomy, &files, &dir.display().to_string())
    }

    /// Compiles rule files against a taxonomy.
    pub fn from_files(taxonomy: &RuleFile, files: &[RuleFile], origin: &str) -> Result<Self, LoadErrors> {
        let classes = toml::from_str::<TaxonomySpec>(&taxonomy.text)
            .map_err(|e| LoadError::Syntax {
                file: taxonomy.display.clone(),
                message: e.to_string(),
            })?
            .classes;
        let class_ids: Vec<String> = classes.iter().map(|c| c.id.clone()).collect();
        if files.is_empty() {
            return Err(LoadError::Empty(origin.to_owned()).into());
        }
        let mut errors = Vec::new();
        let mut patterns = PatternTable::default();
        let mut specific_patterns = 0;
        // (file index, rule): the specific rules are compiled first, so that their patterns take
        // the table's first ids (the line set every log runs); the detectors' come after.
        let mut rules: Vec<(usize, Rule)> = Vec::new();
        let mut parsed: Vec<Option<Result<RuleSpec, LoadError>>> =
            parse_all(files).into_iter().map(Some).collect();
        for pass in [FindingOrigin::Rule, FindingOrigin::Detector] {
            for (i, file) in files.iter().enumerate() {
                if origin_from_path(&file.relative) != pass {
                    continue;
                }
                let spec = match parsed.get_mut(i).and_then(Option::take) {
                    Some(Ok(spec)) => spec,
                    Some(Err(e)) => {
                        errors.push(e);
                        continue;
                    }
                    None => continue,
                };
                if let Some((_, first)) = rules.iter().find(|(_, r)| r.id == spec.id) {
                    errors.push(LoadError::Duplicate {
                        id: spec.id.clone(),
                        first: first.file.clone(),
                        second: file.display.clone(),
                    });
                    continue;
                }
                let compiled = compile::compile_rule(
                    spec,
                    &file.display,
                    &file.relative,
                    &class_ids,
                    &mut patterns,
                    &mut errors,
                );
                rules.extend(compiled.map(|rule| (i, rule)));
            }
            if pass == FindingOrigin::Rule {
                specific_patterns = patterns.len();
            }
        }
        if !errors.is_empty() {
            return Err(LoadErrors(errors));
        }
        rules.sort_by_key(|(i, _)| *i);
        Ok(Self {
            rules: rules.into_iter().map(|(_, rule)| rule).collect(),
            taxonomy_file: taxonomy.clone(),
            files: files.to_vec(),
            patterns,
            specific_patterns,
            automata: OnceLock::new(),
            prefilter: OnceLock::new(),
            detector_automata: OnceLock::new(),
            classes,
            origin: origin.to_owned(),
        })
    }

    /// This rule base with one more rule (or a new version of a rule with the same id), given as
    /// the text of its file: what a rule backtest runs.
    pub fn with_candidate(&self, text: &str) -> Result<Self, LoadErrors> {
        let spec: RuleSpec = toml::from_str(text).map_err(|e| LoadError::Syntax {
            file: "candidate rule".into(),
            message: e.to_string(),
        })?;
        let relative = format!("{}.toml", spec.id.replace('.', "/"));
        let mut files: Vec<RuleFile> = self
            .files
            .iter()
            .filter(|f| id_from_path(&f.relative) != spec.id)
            .cloned()
            .collect();
        files.push(RuleFile {
            relative,
            display: format!("candidate rule {}", spec.id),
            text: text.to_owned(),
        });
        Self::from_files(
            &self.taxonomy_file,
            &files,
            &format!("{} + candidate {}", self.origin, spec.id),
        )
    }

    /// The text of a rule's file.
    pub fn file_text(&self, id: &str) -> Option<&str> {
        self.files
            .iter()
            .find(|f| id_from_path(&f.relative) == id)
            .map(|f| f.text.as_str())
    }

    /// The rules, in load order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// A rule by id.
    pub fn rule(&self, id: &str) -> Option<&Rule> {
        self.rules.iter().find(|r| r.id == id)
    }

    /// The line patterns.
    pub fn patterns(&self) -> &PatternTable {
        &self.patterns
    }

    /// The line set, built on first use; an error only when the rule base as a whole exceeds the
    /// automaton size limit.
    pub fn automata(&self) -> Result<&Automata, &LoadError> {
        self.automata
            .get_or_init(|| {
                let triggers = trigger_patterns()?;
                let patterns: Vec<&Hir> = self.specific_hirs().iter().chain(&triggers).collect();
                let set = LineSet::from_hirs(&patterns).map_err(|e| LoadError::Combined(e.to_string()))?;
                Ok(Automata {
                    set,
                    rule_patterns: self.specific_patterns,
                })
            })
            .as_ref()
    }

    /// The raw-bytes prefilter of the rule patterns and the parser's triggers, built on first
    /// use: only inputs large enough to be worth prefiltering need it (a short log never pays
    /// for its build, a fifth of a `faultline analyze` of one).
    pub fn prefilter(&self) -> Result<&Prefilter, &LoadError> {
        self.prefilter
            .get_or_init(|| {
                let triggers = trigger_patterns()?;
                Prefilter::from_hirs(triggers.iter().chain(self.specific_hirs()))
                    .map_err(|e| LoadError::Combined(e.to_string()))
            })
            .as_ref()
    }

    /// The specific rules' patterns, as parsed at load.
    fn specific_hirs(&self) -> &[Hir] {
        self.patterns.parsed.get(..self.specific_patterns).unwrap_or(&[])
    }

    /// Whether the rule base has class detectors.
    pub fn has_detectors(&self) -> bool {
        self.rules.iter().any(|r| r.origin == FindingOrigin::Detector)
    }

    /// The class detectors' line set and prefilter, built on first use (the first log no
    /// specific rule explains); an error only when they exceed the automaton size limit.
    pub fn detector_automata(&self) -> Result<&DetectorAutomata, &LoadError> {
        self.detector_automata
            .get_or_init(|| {
                let detectors = || self.rules.iter().filter(|r| r.origin == FindingOrigin::Detector);
                let sorted = |mut ids: Vec<usize>| {
                    ids.sort_unstable();
                    ids.dedup();
                    ids
                };
                let own: Vec<Vec<usize>> = detectors().map(|r| sorted(r.pattern_ids().collect())).collect();
                let candidates = sorted(
                    detectors()
                        .flat_map(|r| r.pattern_ids().filter(|p| !r.same_line.contains(p)))
                        .collect(),
                );
                DetectorAutomata::build(&own, &candidates, &self.patterns.parsed)
                    .map_err(|e| LoadError::Combined(format!("the class detectors: {e}")))
            })
            .as_ref()
    }

    /// Builds the line set and the prefilter, if they are not built yet: the set on a second
    /// core, since they cost about the same and a large input needs both before its first line.
    pub fn prepare_for_large_inputs(&self) {
        if self.automata.get().is_none() && self.prefilter.get().is_none() {
            std::thread::scope(|scope| {
                // Where no thread can be started, the calls below build the set on this one.
                let _ = std::thread::Builder::new().spawn_scoped(scope, || {
                    let _ = self.automata();
                });
                let _ = self.prefilter();
            });
        }
        let _ = self.automata();
        let _ = self.prefilter();
    }

    /// The taxonomy.
    pub fn classes(&self) -> &[ClassSpec] {
        &self.classes
    }

    /// Whether `class` is a failure of the program's own tensors or data (the taxonomy's
    /// `program_error`).
    pub fn is_program_error(&self, class: &str) -> bool {
        self.classes.iter().any(|c| c.id == class && c.program_error)
    }

    /// Where the rules came from (`embedded` or a directory).
    pub fn origin(&self) -> &str {
        &self.origin
    }
}

fn collect_toml(dir: &Path, out: &mut Vec<std::path::PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_toml(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "toml") {
            out.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
