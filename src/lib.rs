//! faultline: diagnoses PyTorch / CUDA / Hugging Face training failures from their logs.
//!
//! The core is pure and synchronous: [`scan`] streams a raw log and [`normalize`]s the lines worth
//! reading, [`parse`] turns them into typed [`model`] events, [`rules`] match them against the rule
//! base and [`diagnose`] ranks the findings into a diagnosis. IO lives at the edges ([`cli`]).

pub mod api;
pub mod app;
pub mod bundle;
pub mod cli;
pub mod config;
pub mod diagnose;
pub mod eval;
pub mod http;
pub mod kb;
pub mod metrics;
pub mod model;
pub mod normalize;
pub mod objects;
pub mod output;
pub mod parse;
pub mod replay;
pub mod rulecheck;
pub mod rules;
pub mod scan;
pub mod server;
pub mod service;
pub mod web;
pub mod worker;
