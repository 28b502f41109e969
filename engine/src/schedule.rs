//! When a target is probed: a fixed grid with a stable per-target phase, and fast re-checks
//! while a verdict is unsettled; probes start on a common tick.
//!
//! The phase comes from a hash of the target's key, so a restart or reload keeps every
//! target's slot and thousands of targets spread evenly over the interval instead of
//! firing together. The clock is passed in, so this is tested without time passing.
//!
//! The tick: each wake-up of a prober thread (an `epoll_wait` return and a context switch)
//! costs more than the probe it starts when probes are spread over every millisecond. So
//! phases lie on a grid (origin + k x tick) and every probe starts on a tick: the probes due
//! in one tick start together, one wake-up serves all of them, and their connects and
//! answers complete together too (HAProxy gathers its checks the same way, on coarser
//! slots). The tick is as long as lateness allows ([`tick_for`]): a tick's probes start one
//! after the other, so a busy thread gets a shorter one. Shared wake-ups are what make a
//! probe cheap at low load, where a timer per probe would wake the thread for each
//! (figures in bench/CHANGELOG.md). With an interval that is a multiple of
//! the tick every slot stays on the grid; otherwise, and for fast re-checks, a probe starts
//! on the first tick at or after its slot. Lateness counts from the slot.

use std::time::Duration;

use ho_config::Timing;
use tokio::time::Instant;

/// The tick of a thread that starts at most [`LONG_TICK_BELOW`] probes a second.
pub const LONG_TICK: Duration = Duration::from_millis(8);

/// The tick of a busier thread: 8 ms there put 80 probes in one tick and late p99 at 15 ms.
pub const SHORT_TICK: Duration = Duration::from_millis(4);

/// Probes per second of a thread above which it uses [`SHORT_TICK`].
pub const LONG_TICK_BELOW: f64 = 5_000.0;

/// The tick for a thread that starts `per_second` probes a second: at most ~40 probes
/// start in one tick, so the last of them is late by a few milliseconds at most.
pub fn tick_for(per_second: f64) -> Duration {
    if per_second <= LONG_TICK_BELOW {
        LONG_TICK
    } else {
        SHORT_TICK
    }
}

/// What every schedule of one engine shares: the origin slots count from and the tick
/// probes start on, both fixed at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    /// Where every phase counts from.
    pub origin: Instant,
    /// Probes start on multiples of it after the origin; zero: at their exact slots.
    pub tick: Duration,
}

impl Grid {
    /// `at` as the nanoseconds since the origin, as a prober keeps its slot between probes:
    /// 8 bytes instead of an instant's 16, exact (an instant is whole nanoseconds) for 584
    /// years. An instant before the origin, which no slot is, counts as the origin.
    pub fn offset(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.origin).as_nanos() as u64
    }

    /// The instant `offset` nanoseconds after the origin.
    pub fn at(&self, offset: u64) -> Instant {
        self.origin + Duration::from_nanos(offset)
    }
}

/// The probe schedule of one target.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    grid: Grid,
    phase: Duration,
    interval: Duration,
    fast_interval: Duration,
}

/// FNV-1a: a stable hash (unlike `DefaultHasher`, fixed across Rust versions).
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl Schedule {
    /// The schedule of the target with key `key`, counted from `origin` (engine start),
    /// with phases on and starts at `tick` ([`tick_for`] its thread's load; zero: the
    /// exact slot).
    pub fn new(key: &str, timing: &Timing, origin: Instant, tick: Duration) -> Schedule {
        let interval_ns = timing.interval.as_nanos().max(1) as u64;
        let phase = fnv1a(key) % interval_ns;
        let tick_ns = tick.as_nanos() as u64;
        let phase = if tick_ns > 0 && tick_ns <= interval_ns {
            phase - phase % tick_ns
        } else {
            phase
        };
        Schedule::on(Grid { origin, tick }, phase, timing)
    }

    /// The schedule with `phase` (nanoseconds, as [`Schedule::phase`] gave them) on `grid`:
    /// what a prober keeps is its phase, the rest is its thread's grid and its check's timing.
    pub fn on(grid: Grid, phase: u64, timing: &Timing) -> Schedule {
        Schedule {
            grid,
            phase: Duration::from_nanos(phase),
            interval: timing.interval,
            fast_interval: timing.fast_interval,
        }
    }

    /// The grid this schedule lies on.
    pub fn grid(&self) -> Grid {
        self.grid
    }

    /// The phase in nanoseconds after the origin: less than the interval.
    pub fn phase(&self) -> u64 {
        self.phase.as_nanos() as u64
    }

    /// The first slot: origin + phase.
    pub fn first(&self) -> Instant {
        self.grid.origin + self.phase
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
        let Grid { origin, tick } = self.grid;
        if tick.is_zero() {
            return slot;
        }
        let since = slot.saturating_duration_since(origin).as_nanos();
        let tick = tick.as_nanos();
        origin + Duration::from_nanos((since.div_ceil(tick) * tick) as u64)
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
        let s = Schedule::new("http://10.0.0.1:80/", &timing(1000), origin, LONG_TICK);
        for ms in [0u64, 1, 2, 3, 999] {
            for extra_us in [0u64, 1, 3999] {
                let slot = origin + Duration::from_millis(ms) + Duration::from_micros(extra_us);
                let start = s.start_of(slot);
                assert!(
                    start >= slot && start - slot < LONG_TICK,
                    "{ms} ms + {extra_us} us"
                );
                let since = start.duration_since(origin).as_nanos();
                assert_eq!(since % LONG_TICK.as_nanos(), 0);
            }
        }
    }

    #[test]
    fn a_busy_thread_gets_the_short_tick() {
        assert_eq!(tick_for(2_000.0), LONG_TICK);
        assert_eq!(tick_for(10_000.0), SHORT_TICK);
    }

    #[test]
    fn phases_lie_on_the_tick_grid_so_slots_start_on_time() {
        let origin = Instant::now();
        for i in 0..1000 {
            let key = format!("http://127.1.{}.{}:8080/healthz", i / 250, i % 250 + 1);
            let s = Schedule::new(&key, &timing(1000), origin, LONG_TICK);
            let slot = s.next_slot(origin + Duration::from_millis(2500));
            assert_eq!(
                s.start_of(slot),
                slot,
                "{key}: a slot of a 1 s interval is a tick"
            );
        }
        // An interval shorter than the tick keeps its exact phase.
        let s = Schedule::new("tcp://10.0.0.1:22", &timing(3), origin, LONG_TICK);
        assert!(s.first() < origin + Duration::from_millis(3));
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
