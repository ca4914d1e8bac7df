//! Per-client rate limiting: a token bucket per API token (or per IP address for anonymous
//! requests), refilled continuously.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Buckets kept before idle ones are pruned.
const MAX_BUCKETS: usize = 10_000;
/// A bucket idle this long is forgotten.
const IDLE: Duration = Duration::from_secs(600);

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

/// The limiter.
#[derive(Debug)]
pub struct RateLimiter {
    per_second: f64,
    burst: f64,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl RateLimiter {
    /// `per_minute` requests a minute with bursts of `burst`; 0 per minute turns it off.
    pub fn new(per_minute: u32, burst: u32) -> Self {
        Self {
            per_second: f64::from(per_minute) / 60.0,
            burst: f64::from(burst.max(1)),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one request from `client`'s bucket; `Err(seconds)` until the next one is allowed.
    pub fn check(&self, client: &str, now: Instant) -> Result<(), u64> {
        self.take(client, now, true)
    }

    /// Whether `client`'s bucket holds a request, without taking it (`Err(seconds)` when empty).
    pub fn peek(&self, client: &str, now: Instant) -> Result<(), u64> {
        self.take(client, now, false)
    }

    fn take(&self, client: &str, now: Instant, consume: bool) -> Result<(), u64> {
        if self.per_second == 0.0 {
            return Ok(());
        }
        let Ok(mut buckets) = self.buckets.lock() else {
            return Ok(());
        };
        if buckets.len() > MAX_BUCKETS {
            buckets.retain(|_, b| now.duration_since(b.updated) < IDLE);
        }
        let bucket = buckets.entry(client.to_owned()).or_insert(Bucket {
            tokens: self.burst,
            updated: now,
        });
        let elapsed = now.duration_since(bucket.updated).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.per_second).min(self.burst);
        bucket.updated = now;
        if bucket.tokens >= 1.0 {
            if consume {
                bucket.tokens -= 1.0;
            }
            Ok(())
        } else {
            Err(((1.0 - bucket.tokens) / self.per_second).ceil().max(1.0) as u64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_allowed_then_requests_wait_for_the_refill() {
        let limiter = RateLimiter::new(60, 2);
        let t = Instant::now();
        assert_eq!(limiter.check("a", t), Ok(()));
        assert_eq!(limiter.check("a", t), Ok(()));
        assert_eq!(limiter.check("a", t), Err(1));
        assert_eq!(limiter.check("b", t), Ok(()), "clients have their own buckets");
        assert_eq!(limiter.check("a", t + Duration::from_secs(1)), Ok(()));
    }

    #[test]
    fn peeking_takes_nothing_from_the_bucket() {
        let limiter = RateLimiter::new(60, 1);
        let t = Instant::now();
        assert_eq!(limiter.peek("a", t), Ok(()));
        assert_eq!(limiter.peek("a", t), Ok(()));
        assert_eq!(limiter.check("a", t), Ok(()));
        assert_eq!(limiter.peek("a", t), Err(1));
    }

    #[test]
    fn zero_turns_the_limit_off() {
        let limiter = RateLimiter::new(0, 1);
        let t = Instant::now();
        for _ in 0..100 {
            assert_eq!(limiter.check("a", t), Ok(()));
        }
    }
}
