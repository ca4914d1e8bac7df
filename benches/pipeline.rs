//! Placeholder replaced by the pipeline benchmark.
fn main() {}
