//! What the service does, whatever face asks: the API and the pages are adapters over it.
//!
//! [`policy`] decides who may do what, for both faces, in one place; [`backtest`] runs a
//! candidate rule over stored logs as a bounded job.

pub mod backtest;
pub mod policy;

pub use policy::{Access, Action, Denied, Policy, Requester};
