//! A synthetic rule base of any size, for measuring rule compilation: each rule has distinct
//! literals in its patterns (so nothing is shared between rules), like a large real rule base.

use faultline::rules::RuleFile;

/// `count` rule files of a made-up area `synthetic`.
pub fn synthetic_rules(count: usize) -> Vec<RuleFile> {
    (0..count)
        .map(|i| {
            let text = format!(
                r#"
id = "synthetic.rule{i:04}"
class = "cuda.launch_failure"
title = "Synthetic failure {i}"
summary = "Component {{component|?}} failed with code {i}."
severity = "error"
priority = {priority}
role = "root"
confidence = "medium"
next_artifact = "The stderr of the failing step."

[match]
any = ['ERR{i:04}: (?P<component>\w+) failed at step \d+', 'fault code {i} in kernel \w+']
all = ['(?i)worker{i} exited']
not = ['^\s*#.*ERR{i:04}']
within = 50

[[cause]]
title = "Cause {i}"
detail = "Explained by {{component|the component}}."

[[fix]]
title = "Fix {i}"

[[example]]
name = "synthetic"
log = """
ERR{i:04}: loader failed at step 3
Worker{i} exited
"""
expect = {{ matched = true }}
"#,
                priority = 10 + (i % 80)
            );
            RuleFile {
                relative: format!("synthetic/rule{i:04}.toml"),
                display: format!("synthetic/rule{i:04}.toml"),
                text,
            }
        })
        .collect()
}
