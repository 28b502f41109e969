//! Exponential backoff with jitter for sink retries.

use std::time::Duration;

/// Delays `min · 2^(attempt-1)`, capped at `max`, each shortened by up to `jitter` (a share)
/// at random so that many sinks failing together do not retry together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExponentialBackoff {
    min: Duration,
    max: Duration,
    jitter: f64,
}

/// Why a backoff cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BackoffError {
    /// `min` is zero or above `max`.
    #[error("backoff min must be > 0 and <= max")]
    Range,
    /// `jitter` is outside 0.0–1.0.
    #[error("backoff jitter must be between 0.0 and 1.0")]
    Jitter,
}

impl ExponentialBackoff {
    /// Validates and builds.
    pub fn try_new(min: Duration, max: Duration, jitter: f64) -> Result<Self, BackoffError> {
        if min.is_zero() || min > max {
            return Err(BackoffError::Range);
        }
        if !(0.0..=1.0).contains(&jitter) {
            return Err(BackoffError::Jitter);
        }
        Ok(Self { min, max, jitter })
    }

    /// The delay before retry number `attempt` (1-based); `rand` in `[0, 1)`.
    pub fn delay(&self, attempt: u32, rand: f64) -> Duration {
        let exp = attempt.saturating_sub(1).min(31);
        let base = self.min.saturating_mul(1u32 << exp).min(self.max);
        base.mul_f64(1.0 - self.jitter * rand.clamp(0.0, 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap() {
        let b =
            ExponentialBackoff::try_new(Duration::from_millis(100), Duration::from_secs(1), 0.0)
                .unwrap();
        let delays: Vec<u128> = (1..=6).map(|a| b.delay(a, 0.5).as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(b.delay(u32::MAX, 0.0), Duration::from_secs(1));
    }

    #[test]
    fn jitter_only_shortens() {
        let b =
            ExponentialBackoff::try_new(Duration::from_millis(100), Duration::from_secs(1), 0.5)
                .unwrap();
        assert_eq!(b.delay(1, 0.0), Duration::from_millis(100));
        assert_eq!(b.delay(1, 1.0), Duration::from_millis(50));
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(ExponentialBackoff::try_new(Duration::ZERO, Duration::from_secs(1), 0.1).is_err());
        assert!(
            ExponentialBackoff::try_new(Duration::from_secs(2), Duration::from_secs(1), 0.1)
                .is_err()
        );
        assert!(
            ExponentialBackoff::try_new(Duration::from_secs(1), Duration::from_secs(1), 1.5)
                .is_err()
        );
    }
}
