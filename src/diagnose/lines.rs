//! The analysis's line sink: one pass of the rule base's line set over a line finds both the
//! rule patterns that match it (for the matcher) and the parser's triggers (for the parser).
//! Two sets, one per reader, cost two passes over every candidate line: on a noisy log that
//! second pass was ~15 % of the analysis thread's time.

use crate::normalize::Line;
use crate::parse::Parser;
use crate::rules::matcher::Matcher;
use crate::rules::{Automata, RuleSet};
use crate::scan::{LineSink, SetMatches};

/// Feeds each line to the parser and to the rule matcher.
#[derive(Debug)]
pub struct LineAnalyzer<'r> {
    parser: Parser,
    matcher: Matcher<'r>,
    /// The rule base's automata and the line set's matches on the current line; `None` when the
    /// rule base could not be built as a whole (the parser then finds its triggers itself).
    set: Option<(&'r Automata, SetMatches)>,
}

impl<'r> LineAnalyzer<'r> {
    /// A sink for one log, analyzed with `rules`.
    pub fn new(rules: &'r RuleSet) -> Self {
        Self {
            parser: Parser::new(),
            matcher: Matcher::new(rules),
            set: rules.automata().ok().map(|a| (a, a.set.new_matches())),
        }
    }

    /// The parser and the matcher, with what they read.
    pub fn into_parts(self) -> (Parser, Matcher<'r>) {
        (self.parser, self.matcher)
    }
}

impl LineSink for LineAnalyzer<'_> {
    fn wants_every_line(&self) -> bool {
        self.parser.wants_every_line()
    }

    fn line(&mut self, line: &Line<'_>) {
        let Some((automata, matches)) = &mut self.set else {
            self.parser.line(line);
            return;
        };
        automata.set.matches(line.text.as_bytes(), matches);
        let (patterns, triggers) = automata.split(matches.as_slice());
        // The parser reads the line first: it knows whether the line is a traceback's code.
        self.parser.triggered_line(line, triggers);
        if !self.parser.read_code_context() {
            self.matcher.record(line, patterns);
        }
    }
}
