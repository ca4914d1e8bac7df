//! faultline: diagnoses PyTorch / CUDA / Hugging Face training failures from their logs.
//!
//! The core is pure and synchronous: [`scan`] streams a raw log and [`normalize`]s the lines worth
//! reading, [`parse`] turns them into typed [`model`] events. IO lives at the edges ([`cli`]).

pub mod cli;
pub mod model;
pub mod normalize;
pub mod parse;
pub mod scan;
