//! Replay check throughput (work in progress).

fn main() {}
