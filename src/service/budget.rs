//! The memory budget of snapshots in one server process: the uploads in flight (the bytes each
//! buffers) and the embedded replay worker (the file and the inflated tensors of its job) take
//! their share of one semaphore of MiB permits, so that together they never hold more than the
//! configured bytes (`snapshot_memory_budget_bytes`).
//!
//! An upload asks without waiting ([`MemoryBudget::try_reserve`]: none left, the server answers
//! 503 with `Retry-After`); the worker waits for its share ([`MemoryBudget::reserve`]). A share
//! larger than the whole budget takes the whole budget: it runs alone rather than never.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

const MIB: u64 = 1 << 20;

/// A budget of bytes, counted in MiB; clones share it.
#[derive(Debug, Clone)]
pub struct MemoryBudget {
    permits: Arc<Semaphore>,
    total_mib: u32,
}

/// A share of a [`MemoryBudget`], given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    _permits: Option<OwnedSemaphorePermit>,
}

impl MemoryBudget {
    /// A budget of `bytes` (rounded up to whole MiB, at least one).
    pub fn new(bytes: u64) -> Self {
        let total_mib = u32::try_from(bytes.div_ceil(MIB))
            .unwrap_or(u32::MAX)
            .clamp(1, Semaphore::MAX_PERMITS.min(u32::MAX as usize) as u32);
        Self {
            permits: Arc::new(Semaphore::new(total_mib as usize)),
            total_mib,
        }
    }

    /// The whole budget, in bytes.
    pub fn total_bytes(&self) -> u64 {
        u64::from(self.total_mib) * MIB
    }

    /// What is not reserved now, in bytes.
    pub fn available_bytes(&self) -> u64 {
        self.permits.available_permits() as u64 * MIB
    }

    /// A share of `bytes` now, or `None` when the budget has not that much left.
    pub fn try_reserve(&self, bytes: u64) -> Option<Reservation> {
        let permits = self
            .permits
            .clone()
            .try_acquire_many_owned(self.mib(bytes))
            .ok()?;
        Some(Reservation {
            _permits: Some(permits),
        })
    }

    /// A share of `bytes`, once the budget has that much left (waiting in turn with the others).
    pub async fn reserve(&self, bytes: u64) -> Reservation {
        let permits = self.permits.clone().acquire_many_owned(self.mib(bytes)).await;
        // The semaphore is private and never closed, so the share is always given; were it
        // closed, the work would go on unaccounted rather than never.
        Reservation {
            _permits: permits.ok(),
        }
    }

    /// Whole MiB for `bytes`: at least one, at most the whole budget.
    fn mib(&self, bytes: u64) -> u32 {
        u32::try_from(bytes.div_ceil(MIB))
            .unwrap_or(u32::MAX)
            .clamp(1, self.total_mib)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_counted_in_whole_mib_and_given_back_when_dropped() {
        let budget = MemoryBudget::new(3 * MIB);
        let first = budget.try_reserve(MIB + 1);
        assert!(first.is_some());
        assert_eq!(budget.available_bytes(), MIB, "1 MiB and a byte take two");
        assert!(budget.try_reserve(2 * MIB).is_none(), "no more than is left");
        let second = budget.try_reserve(1);
        assert!(second.is_some(), "a byte takes one MiB");
        assert_eq!(budget.available_bytes(), 0);
        drop(first);
        assert_eq!(budget.available_bytes(), 2 * MIB);
    }

    #[test]
    fn a_share_larger_than_the_budget_takes_the_whole_budget() {
        let budget = MemoryBudget::new(2 * MIB);
        let all = budget.try_reserve(10 * MIB);
        assert!(all.is_some(), "it runs alone rather than never");
        assert!(budget.try_reserve(1).is_none());
    }

    #[tokio::test]
    async fn a_waiting_share_is_given_once_enough_is_back() {
        let budget = MemoryBudget::new(2 * MIB);
        let held = budget.try_reserve(2 * MIB);
        let waiting = tokio::spawn({
            let budget = budget.clone();
            async move { budget.reserve(MIB).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "it waits while the budget is spent");
        drop(held);
        let share = tokio::time::timeout(std::time::Duration::from_secs(5), waiting).await;
        assert!(matches!(share, Ok(Ok(_))), "{share:?}");
        assert_eq!(budget.available_bytes(), MIB);
    }
}
