//! Which rule patterns make the most lines of a generated noisy log prefilter candidates.
#[path = "../benches/support/noisy_log.rs"]
#[allow(dead_code)]
mod noisy_log;
fn main() {
    let rules = faultline::rules::RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let mut log = Vec::new();
    let _ = noisy_log::generate(5 << 20, 42, &mut log);
    let text = String::from_utf8_lossy(&log);
    let lines: Vec<&str> = text.lines().collect();
    let mut counts = Vec::new();
    for id in 0..rules.patterns().len() {
        let src = rules.patterns().source(id);
        let relaxed = faultline::scan::relax(&format!("(?-u:{src})")).unwrap_or_default();
        let re = regex::bytes::RegexBuilder::new(&relaxed).unicode(false).build();
        let Ok(re) = re else { continue };
        let n = lines.iter().filter(|l| re.is_match(l.as_bytes())).count();
        counts.push((n, src.to_owned()));
    }
    for t in faultline::parse::trigger_patterns() {
        let relaxed = faultline::scan::relax(&t).unwrap_or_default();
        if let Ok(re) = regex::bytes::Regex::new(&relaxed) {
            let n = lines.iter().filter(|l| re.is_match(l.as_bytes())).count();
            counts.push((n, format!("PARSER {t}")));
        }
    }
    counts.sort_by_key(|c| std::cmp::Reverse(c.0));
    println!("{} lines", lines.len());
    for (n, p) in counts.iter().take(25) {
        println!("{n:>8}  {}", &p[..p.len().min(150)]);
    }
}
