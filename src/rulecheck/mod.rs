//! The rule base checked through the whole analysis: every rule's examples diagnosed as they
//! expect ([`examples`]), and lint for what a rule base can get wrong while still loading
//! ([`lint`]). Here, not in `rules`, because it runs `diagnose`, which uses `rules`: dependencies
//! point one way.

pub mod cost;
pub mod examples;
pub mod lint;
