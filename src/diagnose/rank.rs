//! Ranking findings: root causes first, then symptoms, then context; within a role by priority,
//! then confidence, then earliest evidence. A root finding that yields to the class of another
//! root finding (the generic `device-side assert triggered` to the assertion that names the
//! kernel) becomes that finding's symptom.

use crate::model::{Finding, Role};
use crate::rules::class_matches;

/// Orders findings and resolves `yields_to`; `yields_to(rule_id)` gives a rule's class globs.
pub fn rank<'a>(mut findings: Vec<Finding>, yields_to: impl Fn(&str) -> &'a [String]) -> Vec<Finding> {
    sort(&mut findings);
    demote_yielding(&mut findings, yields_to);
    drop_redundant_symptoms(&mut findings);
    sort(&mut findings);
    findings
}

/// A symptom whose evidence lines all belong to its root cause's evidence says nothing new (a
/// catch-all assertion rule under the rule that knows that assertion): it is dropped.
fn drop_redundant_symptoms(findings: &mut Vec<Finding>) {
    let redundant: Vec<bool> = findings
        .iter()
        .map(|f| {
            let Some(root) = f
                .symptom_of
                .as_ref()
                .and_then(|r| findings.iter().find(|g| &g.rule == r))
            else {
                return false;
            };
            !f.evidence.is_empty()
                && f.evidence
                    .iter()
                    .all(|e| root.evidence.iter().any(|r| r.line == e.line))
        })
        .collect();
    let mut flags = redundant.into_iter();
    findings.retain(|_| !flags.next().unwrap_or(false));
}

fn sort(findings: &mut [Finding]) {
    findings.sort_by(|a, b| {
        a.role
            .cmp(&b.role)
            .then(b.priority.cmp(&a.priority))
            .then(b.confidence.cmp(&a.confidence))
            .then(first_line(a).cmp(&first_line(b)))
            .then(a.rule.cmp(&b.rule))
    });
}

fn first_line(f: &Finding) -> u64 {
    f.evidence.first().map_or(u64::MAX, |e| e.line)
}

/// From the lowest-ranked up, a root that yields to another root's class (its own class too: a
/// catch-all rule yields to the specific rule of the same class) becomes its symptom.
/// Going upwards means that of two rules yielding to each other, only the lower one yields.
fn demote_yielding<'a>(findings: &mut [Finding], yields_to: impl Fn(&str) -> &'a [String]) {
    for i in (0..findings.len()).rev() {
        let f = &findings[i];
        let globs = yields_to(&f.rule);
        if f.role != Role::Root || globs.is_empty() {
            continue;
        }
        let winner = findings
            .iter()
            .enumerate()
            .find(|(j, g)| {
                *j != i && g.role == Role::Root && globs.iter().any(|glob| class_matches(glob, &g.class))
            })
            .map(|(_, g)| (g.rule.clone(), g.title.clone()));
        if let Some((rule, title)) = winner {
            let f = &mut findings[i];
            f.role = Role::Symptom;
            f.confidence_reasons
                .push(format!("a consequence of the root cause found: {title}"));
            f.symptom_of = Some(rule);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Confidence, Severity};

    fn finding(rule: &str, class: &str, role: Role, priority: i32) -> Finding {
        Finding {
            rule: rule.into(),
            class: class.into(),
            title: rule.into(),
            summary: String::new(),
            severity: Severity::Error,
            role,
            origin: Default::default(),
            symptom_of: None,
            confidence: Confidence::High,
            confidence_reasons: vec![],
            tier: Default::default(),
            priority,
            evidence: vec![],
            captures: Default::default(),
            causes: vec![],
            fixes: vec![],
            next_artifact: None,
            links: vec![],
        }
    }

    fn order(findings: &[Finding]) -> Vec<(&str, Role)> {
        findings.iter().map(|f| (f.rule.as_str(), f.role)).collect()
    }

    #[test]
    fn roots_come_before_symptoms_and_context_whatever_their_priority() {
        let ranked = rank(
            vec![
                finding("ctx", "a", Role::Context, 100),
                finding("sym", "b", Role::Symptom, 90),
                finding("root", "c", Role::Root, 10),
            ],
            |_| &[],
        );
        assert_eq!(
            order(&ranked),
            vec![
                ("root", Role::Root),
                ("sym", Role::Symptom),
                ("ctx", Role::Context)
            ]
        );
    }

    #[test]
    fn a_generic_error_yields_to_the_specific_root_cause() {
        let yields = vec![
            "cuda.device_assert.index".to_owned(),
            "cuda.device_assert.target".to_owned(),
        ];
        let ranked = rank(
            vec![
                finding("generic", "cuda.device_assert.unknown", Role::Root, 50),
                finding("assert", "cuda.device_assert.index", Role::Root, 90),
            ],
            |id| if id == "generic" { &yields } else { &[] },
        );
        assert_eq!(
            order(&ranked),
            vec![("assert", Role::Root), ("generic", Role::Symptom)]
        );
        assert_eq!(ranked[1].symptom_of.as_deref(), Some("assert"));
    }

    #[test]
    fn of_two_rules_yielding_to_each_other_only_the_lower_one_yields() {
        let star = vec!["*".to_owned()];
        let ranked = rank(
            vec![
                finding("a", "x", Role::Root, 10),
                finding("b", "y", Role::Root, 20),
            ],
            |_| &star,
        );
        assert_eq!(order(&ranked), vec![("b", Role::Root), ("a", Role::Symptom)]);
    }

    #[test]
    fn a_symptom_with_nothing_but_its_roots_evidence_is_dropped() {
        let line = |n: u64| crate::model::EvidenceLine {
            line: n,
            text: String::new(),
            rank: None,
            repeats: None,
        };
        let mut root = finding("specific", "cuda.device_assert.index", Role::Root, 96);
        root.evidence = vec![line(1)];
        let mut catch_all = finding("catch_all", "cuda.device_assert.unknown", Role::Root, 60);
        catch_all.evidence = vec![line(1)];
        let mut generic = finding("generic", "cuda.device_assert.unknown", Role::Root, 55);
        generic.evidence = vec![line(2)];
        let star = vec!["cuda.device_assert.*".to_owned()];
        let ranked = rank(vec![generic, catch_all, root], |id| {
            if id == "specific" { &[] } else { &star }
        });
        assert_eq!(
            order(&ranked),
            vec![("specific", Role::Root), ("generic", Role::Symptom)]
        );
    }

    #[test]
    fn class_globs() {
        assert!(class_matches("cuda.*", "cuda.oom"));
        assert!(class_matches("*", "nccl.error"));
        assert!(!class_matches("cuda.oom", "cuda.oom2"));
    }
}
