//! What the service does, whatever face asks: the API and the pages are adapters over it.
//!
//! [`policy`] decides who may do what, for both faces, in one place; [`backtest`] runs a
//! candidate rule over stored logs as a bounded job.

pub mod analyze;
pub mod auth;
pub mod backtest;
pub mod budget;
pub mod bundle;
pub mod csrf;
pub mod error;
pub mod limit;
pub mod policy;
pub mod rules;
pub mod snapshots;
mod state;

pub use error::{Error, Result};
pub use policy::{Access, Action, Denied, Policy, Requester};
pub use state::AppState;
