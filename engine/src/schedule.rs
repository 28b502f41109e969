//! When a target is probed: a fixed grid with a stable per-target phase, small jitter, and
//! fast re-checks while a verdict is unsettled.
//!
//! The phase comes from a hash of the target's key, so a restart or reload keeps every
//! target's slot and thousands of targets spread evenly over the interval instead of
//! firing together. The clock is passed in, so this is tested without time passing.

use std::time::Duration;

use ho_config::Timing;
use tokio::time::Instant;

/// The probe schedule of one target.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    origin: Instant,
    phase: Duration,
    interval: Duration,
    fast_interval: Duration,
    jitter: Duration,
}

/// FNV-1a: a stable hash (unlike `DefaultHasher`, fixed across Rust versions).
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl Schedule {
    /// The schedule of the target with key `key`, counted from `origin` (engine start).
    /// Jitter is at most 1/50 of the interval, capped at 5 ms: enough to break lock-step
    /// between targets with nearby phases, small enough to keep probes on their slot.
    pub fn new(key: &str, timing: &Timing, origin: Instant) -> Schedule {
        let interval_ns = timing.interval.as_nanos().max(1) as u64;
        Schedule {
            origin,
            phase: Duration::from_nanos(fnv1a(key) % interval_ns),
            interval: timing.interval,
            fast_interval: timing.fast_interval,
            jitter: (timing.interval / 50).min(Duration::from_millis(5)),
        }
    }

    /// The first slot: origin + phase.
    pub fn first(&self) -> Instant {
        self.origin + self.phase
    }

    /// The next grid slot strictly after `now`, plus jitter scaled by `rand` in `[0, 1)`.
    pub fn next_slot(&self, now: Instant, rand: f64) -> Instant {
        let first = self.first();
        let slot = if now < first {
            first
        } else {
            let elapsed = now.duration_since(first).as_nanos();
            let k = elapsed / self.interval.as_nanos() + 1;
            first + Duration::from_nanos((k * self.interval.as_nanos()) as u64)
        };
        slot + self.jitter.mul_f64(rand.clamp(0.0, 1.0))
    }

    /// The re-check time while the verdict is unsettled.
    pub fn fast(&self, now: Instant) -> Instant {
        now + self.fast_interval
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(interval_ms: u64) -> Timing {
        Timing {
            interval: Duration::from_millis(interval_ms),
            timeout: Duration::from_millis(interval_ms / 2),
            fast_interval: Duration::from_millis(interval_ms / 10),
            rise: 1,
            fall: 2,
            damping: None,
        }
    }

    #[test]
    fn slots_stay_on_a_fixed_grid() {
        let origin = Instant::now();
        let s = Schedule::new("http://10.0.0.1:80/", &timing(1000), origin);
        let first = s.first();
        assert!(first < origin + Duration::from_secs(1));
        assert_eq!(s.next_slot(origin, 0.0), first);
        assert_eq!(s.next_slot(first, 0.0), first + Duration::from_secs(1));
        let late = first + Duration::from_millis(1700);
        assert_eq!(s.next_slot(late, 0.0), first + Duration::from_secs(2));
        let jittered = s.next_slot(late, 0.999);
        assert!(jittered > first + Duration::from_secs(2));
        assert!(jittered <= first + Duration::from_secs(2) + Duration::from_millis(5));
    }

    #[test]
    fn phases_spread_over_the_interval() {
        let origin = Instant::now();
        let mut buckets = [0u32; 10];
        for i in 0..10_000 {
            let key = format!("http://127.1.{}.{}:8080/healthz", i / 250, i % 250 + 1);
            let s = Schedule::new(&key, &timing(1000), origin);
            let ms = s.first().duration_since(origin).as_millis() as usize;
            buckets[ms / 100] += 1;
        }
        for b in buckets {
            assert!((800..1200).contains(&b), "uneven phases: {buckets:?}");
        }
    }

    #[test]
    fn fast_recheck_is_relative_to_now() {
        let origin = Instant::now();
        let s = Schedule::new("tcp://10.0.0.1:22", &timing(1000), origin);
        let now = origin + Duration::from_millis(1234);
        assert_eq!(s.fast(now), now + Duration::from_millis(100));
    }
}
