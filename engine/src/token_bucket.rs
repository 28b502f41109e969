//! A token bucket: the per-sink write rate limit. Pure, with the clock passed in.

use std::time::Duration;

use tokio::time::Instant;

/// Allows `burst` writes back to back, then `rate` per second.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket. `rate > 0` and `burst >= 1` are validated with the config.
    pub fn new(rate: f64, burst: u32, now: Instant) -> TokenBucket {
        TokenBucket {
            rate,
            burst: f64::from(burst),
            tokens: f64::from(burst),
            last: now,
        }
    }

    /// Takes a token, or says how long until one is available.
    pub fn try_take(&mut self, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.rate))
        }
    }

    /// Waits until a token is taken: how a sink paces its own API requests.
    pub async fn take(&mut self) {
        while let Err(wait) = self.try_take(Instant::now()) {
            tokio::time::sleep(wait.max(Duration::from_millis(1))).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allows_a_burst_then_the_rate() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(2.0, 3, t0);
        assert!(b.try_take(t0).is_ok());
        assert!(b.try_take(t0).is_ok());
        assert!(b.try_take(t0).is_ok());
        let wait = b.try_take(t0).unwrap_err();
        assert_eq!(wait, Duration::from_millis(500));
        assert!(b.try_take(t0 + Duration::from_millis(499)).is_err());
        assert!(b.try_take(t0 + Duration::from_millis(1000)).is_ok());
    }

    #[test]
    fn never_holds_more_than_the_burst() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(100.0, 2, t0);
        let later = t0 + Duration::from_secs(60);
        assert!(b.try_take(later).is_ok());
        assert!(b.try_take(later).is_ok());
        assert!(b.try_take(later).is_err());
    }
}
