//! A token bucket: the per-sink write rate limit. Pure, with the clock passed in.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

/// One second: the window a back end counts requests in.
const SECOND: Duration = Duration::from_secs(1);

/// Allows `burst` writes back to back, then `rate` per second.
///
/// A bucket alone lets a full bucket and a second's refill through in one second (`burst +
/// rate`); a back end that counts requests in any one second sees that as a burst on top
/// of the rate. [`TokenBucket::within_any_second`] also remembers when its last takes were
/// granted and grants no more than the larger of `rate` and `burst` in any one second.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
    /// Takes allowed in any one second, with when each of the latest was granted, oldest
    /// first; `None`: the bucket alone decides.
    per_second: Option<(usize, VecDeque<Instant>)>,
}

impl TokenBucket {
    /// A full bucket. `rate > 0` and `burst >= 1` are validated with the config.
    pub fn new(rate: f64, burst: u32, now: Instant) -> TokenBucket {
        TokenBucket {
            rate,
            burst: f64::from(burst),
            tokens: f64::from(burst),
            last: now,
            per_second: None,
        }
    }

    /// A full bucket that never grants more than `rate` (its whole part) or `burst`,
    /// whichever is larger, in any one second: a burst above the rate only when configured.
    pub fn within_any_second(rate: f64, burst: u32, now: Instant) -> TokenBucket {
        let allowance = (rate.floor() as usize).max(burst as usize).max(1);
        TokenBucket {
            per_second: Some((allowance, VecDeque::with_capacity(allowance))),
            ..TokenBucket::new(rate, burst, now)
        }
    }

    /// Takes a token, or says how long until one is available.
    pub fn try_take(&mut self, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.last = now;
        let refill = match self.tokens >= 1.0 {
            true => Duration::ZERO,
            false => Duration::from_secs_f64((1.0 - self.tokens) / self.rate),
        };
        let wait = refill.max(self.window_wait(now));
        if !wait.is_zero() {
            return Err(wait);
        }
        self.tokens -= 1.0;
        if let Some((allowance, granted)) = &mut self.per_second {
            granted.push_back(now);
            if granted.len() > *allowance {
                granted.pop_front();
            }
        }
        Ok(())
    }

    /// How long until the oldest of a full second's takes leaves the second.
    fn window_wait(&self, now: Instant) -> Duration {
        match &self.per_second {
            Some((allowance, granted)) if granted.len() >= *allowance => {
                (granted[0] + SECOND).saturating_duration_since(now)
            }
            _ => Duration::ZERO,
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

    /// Takes tried at seeded times (bursts and quiet spells) against buckets of seeded
    /// rates and bursts: no window of one second holds more grants than the larger of the
    /// rate's whole part and the burst, and a bucket asked all the time grants at least
    /// its rate (2.5 a second with a burst of 1 paces as 2).
    #[test]
    fn no_second_holds_more_than_the_rate_or_the_configured_burst() {
        for seed in 0..300u64 {
            let mut rng = fastrand::Rng::with_seed(seed);
            let rate: f64 = [0.5, 1.0, 2.5, 5.0, 10.0, 40.0][rng.usize(..6)];
            let burst = [1u32, 3, 5, 10, 20][rng.usize(..5)];
            let allowance = (rate.floor() as usize).max(burst as usize);
            let t0 = Instant::now();
            let mut bucket = TokenBucket::within_any_second(rate, burst, t0);
            let (mut at, mut granted) = (t0, Vec::new());
            for _ in 0..400 {
                at += Duration::from_millis(match rng.u8(..10) {
                    0 => rng.u64(500..3000),
                    _ => rng.u64(0..40),
                });
                if bucket.try_take(at).is_ok() {
                    granted.push(at);
                }
            }
            for (i, &end) in granted.iter().enumerate() {
                let within = granted[..=i]
                    .iter()
                    .filter(|&&g| end.duration_since(g) < SECOND)
                    .count();
                assert!(
                    within <= allowance,
                    "seed {seed}: rate {rate}, burst {burst}: {within} in one second"
                );
            }
            let mut busy = TokenBucket::within_any_second(rate, burst, t0);
            let steps = 10_000;
            let taken = (1..=steps)
                .filter(|i| busy.try_take(t0 + Duration::from_millis(*i)).is_ok())
                .count();
            assert!(
                taken as f64 >= rate.min(allowance as f64) * 10.0 - 1.0,
                "seed {seed}: rate {rate}, burst {burst}: {taken} in 10 s"
            );
        }
    }

    #[test]
    fn a_full_bucket_does_not_add_a_seconds_refill_on_top() {
        let t0 = Instant::now();
        let mut b = TokenBucket::within_any_second(10.0, 5, t0);
        for _ in 0..5 {
            assert!(b.try_take(t0).is_ok());
        }
        // Refilled at 10 a second, the bucket alone would grant 10 more within the second.
        let granted = (1..1000)
            .filter(|ms| b.try_take(t0 + Duration::from_millis(*ms)).is_ok())
            .count();
        assert_eq!(granted, 5, "10 in the first second, burst included");
        assert!(b.try_take(t0 + Duration::from_millis(1000)).is_ok());
    }
}
