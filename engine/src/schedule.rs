//! When a target is probed: a fixed grid with a stable per-target phase, and fast re-checks
//! while a verdict is unsettled; on a lightly loaded thread, probes start on a tick.
//!
//! The phase comes from a hash of the target's key, so a restart or reload keeps every
//! target's slot and thousands of targets spread evenly over the interval instead of
//! firing together. The clock is passed in, so this is tested without time passing.
//!
//! The tick: at 2,000 probes/s a thread has about two probes due per millisecond, and each
//! timer wake-up of the thread (an `epoll_wait` return and a context switch) serves only
//! those. Starting every slot on the next 2 ms tick (origin + k x tick) gathers four, and
//! their connects and answers then tend to complete together too: -17 % CPU per probe at
//! 2,000 probes/s for +2 ms late p99 (bench/README.md). A busy thread already has many
//! probes per millisecond (tokio's timer wakes once per millisecond for all timers due in
//! it), so there the tick is zero: it bought nothing at 10,000 probes/s and cost lateness.
//! Lateness always counts from the exact slot.

use std::time::Duration;

use ho_config::Timing;
use tokio::time::Instant;

/// The tick of a thread that starts at most [`TICK_BELOW`] probes per second.
pub const LIGHT_TICK: Duration = Duration::from_millis(2);

/// Probes per second of a thread above which its probes start on their exact slot.
pub const TICK_BELOW: f64 = 5_000.0;

/// The tick for a thread that starts `per_second` probes a second.
pub fn tick_for(per_second: f64) -> Duration {
    if per_second <= TICK_BELOW {
        LIGHT_TICK
    } else {
        Duration::ZERO
    }
}

/// The probe schedule of one target.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    origin: Instant,
    phase: Duration,
    interval: Duration,
    fast_interval: Duration,
    tick: Duration,
}

/// FNV-1a: a stable hash (unlike `DefaultHasher`, fixed across Rust versions).
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl Schedule {
    /// The schedule of the target with key `key`, counted from `origin` (engine start),
    /// started on `tick` ([`tick_for`] its thread's load; zero: on the exact slot).
    pub fn new(key: &str, timing: &Timing, origin: Instant, tick: Duration) -> Schedule {
        let interval_ns = timing.interval.as_nanos().max(1) as u64;
        Schedule {
            origin,
            phase: Duration::from_nanos(fnv1a(key) % interval_ns),
            interval: timing.interval,
            fast_interval: timing.fast_interval,
            tick,
        }
    }

    /// The first slot: origin + phase.
    pub fn first(&self) -> Instant {
        self.origin + self.phase
    }

    /// The next grid slot strictly after `now`.
    pub fn next_slot(&self, now: Instant) -> Instant {
        let first = self.first();
        if now < first {
            return first;
        }
        let elapsed = now.duration_since(first).as_nanos();
        let k = elapsed / self.interval.as_nanos() + 1;
        first + Duration::from_nanos((k * self.interval.as_nanos()) as u64)
    }

    /// When a probe due at `slot` starts: the first tick at or after it.
    pub fn start_of(&self, slot: Instant) -> Instant {
        if self.tick.is_zero() {
            return slot;
        }
        let since = slot.saturating_duration_since(self.origin).as_nanos();
        let tick = self.tick.as_nanos();
        self.origin + Duration::from_nanos((since.div_ceil(tick) * tick) as u64)
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
        let s = Schedule::new("http://10.0.0.1:80/", &timing(1000), origin, Duration::ZERO);
        let first = s.first();
        assert!(first < origin + Duration::from_secs(1));
        assert_eq!(s.next_slot(origin), first);
        assert_eq!(s.next_slot(first), first + Duration::from_secs(1));
        let late = first + Duration::from_millis(1700);
        assert_eq!(s.next_slot(late), first + Duration::from_secs(2));
        assert_eq!(s.start_of(late), late, "no tick: the exact slot");
    }

    #[test]
    fn probes_start_on_the_next_tick() {
        let origin = Instant::now();
        let s = Schedule::new("http://10.0.0.1:80/", &timing(1000), origin, LIGHT_TICK);
        for ms in [0u64, 1, 2, 3, 999] {
            for extra_us in [0u64, 1, 1999] {
                let slot = origin + Duration::from_millis(ms) + Duration::from_micros(extra_us);
                let start = s.start_of(slot);
                assert!(
                    start >= slot && start - slot < LIGHT_TICK,
                    "{ms} ms + {extra_us} us"
                );
                let since = start.duration_since(origin).as_nanos();
                assert_eq!(since % LIGHT_TICK.as_nanos(), 0);
            }
        }
        assert_eq!(tick_for(2_000.0), LIGHT_TICK);
        assert_eq!(tick_for(10_000.0), Duration::ZERO);
    }

    #[test]
    fn phases_spread_over_the_interval() {
        let origin = Instant::now();
        let mut buckets = [0u32; 10];
        for i in 0..10_000 {
            let key = format!("http://127.1.{}.{}:8080/healthz", i / 250, i % 250 + 1);
            let s = Schedule::new(&key, &timing(1000), origin, Duration::ZERO);
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
        let s = Schedule::new("tcp://10.0.0.1:22", &timing(1000), origin, Duration::ZERO);
        let now = origin + Duration::from_millis(1234);
        assert_eq!(s.fast(now), now + Duration::from_millis(100));
    }
}
