//! Bundle tests live in tests/bundle.rs (end to end); unit tests sit beside each part.
