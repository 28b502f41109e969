//! The record's times, kept as nanosecond offsets on its thread's grid, against instants
//! computed here: a seeded run of targets with their own intervals, fast re-checks and
//! ticks, each taking settled and unsettled results at random moments (some days after the
//! origin), must land on the very instants the grid's arithmetic gives, to the nanosecond.

use std::sync::Arc;
use std::time::Duration;

use ho_config::{CheckOverrides, CheckSpec, Target};
use tokio::time::Instant;

use super::Prober;
use crate::probe::{Probe, ProbeContext, BUILT_IN};
use crate::schedule::{Grid, Schedule, LONG_TICK, SHORT_TICK};

/// A target of a `tcp` check with `interval` and `fast_interval`.
fn target(rng: &mut fastrand::Rng, interval: Duration, fast_interval: Duration) -> Target {
    let check = CheckOverrides {
        port: Some(rng.u16(1..)),
        ..CheckOverrides::of_kind("tcp")
    };
    let mut spec: CheckSpec = ho_config::resolve_standalone_check(&check, &BUILT_IN).unwrap();
    spec.timing.interval = interval;
    spec.timing.fast_interval = fast_interval;
    Target {
        address: [10, rng.u8(..), rng.u8(..), rng.u8(1..)].into(),
        check: Arc::new(spec),
    }
}

/// A duration of `ms` milliseconds give or take up to a millisecond, in nanoseconds.
fn uneven(rng: &mut fastrand::Rng, ms: std::ops::RangeInclusive<u64>) -> Duration {
    Duration::from_nanos(rng.u64(ms) * 1_000_000 + rng.u64(..1_000_000))
}

/// The first grid slot (`origin + phase + k x interval`) strictly after `now`, or the first.
fn grid_slot_after(origin: Instant, phase: u128, interval: u128, now: Instant) -> Instant {
    let first = phase;
    let since = now.duration_since(origin).as_nanos();
    let k = if since < first {
        0
    } else {
        (since - first) / interval + 1
    };
    origin + Duration::from_nanos((first + k * interval) as u64)
}

/// The first multiple of `tick` after `origin` at or after `slot`.
fn tick_at_or_after(origin: Instant, tick: Duration, slot: Instant) -> Instant {
    if tick.is_zero() {
        return slot;
    }
    let since = slot.duration_since(origin).as_nanos();
    let ticks = since.div_ceil(tick.as_nanos());
    origin + Duration::from_nanos((ticks * tick.as_nanos()) as u64)
}

#[test]
fn slots_kept_as_offsets_land_on_the_exact_instants() {
    let mut rng = fastrand::Rng::with_seed(0x5107);
    let origin = Instant::now();
    for case in 0..200 {
        let tick = [Duration::ZERO, SHORT_TICK, LONG_TICK][rng.usize(..3)];
        let grid = Grid { origin, tick };
        let interval = uneven(&mut rng, 1..=20_000);
        let fast = uneven(&mut rng, 0..=2_000);
        let t = target(&mut rng, interval, fast);
        let schedule = Schedule::new(&t.key(), &t.check.timing, origin, tick);
        let phase = schedule.first().duration_since(origin).as_nanos();
        let probe = Probe::new(&t, &mut ProbeContext::default()).unwrap();
        let mut prober = Prober::new(
            0,
            probe,
            (schedule, schedule.first()),
            t.check.clone(),
            None,
        );
        let mut slot = origin + Duration::from_nanos(phase as u64);
        let mut now = origin + Duration::from_secs(rng.u64(..3 * 86_400));
        for step in 0..50 {
            let what = format!("case {case} step {step}");
            assert_eq!(grid.at(prober.slot), slot, "{what}: slot");
            assert_eq!(
                prober.starts_at(grid),
                tick_at_or_after(origin, tick, slot),
                "{what}: start"
            );
            now += Duration::from_nanos(rng.u64(..3 * interval.as_nanos() as u64));
            let settled = rng.bool();
            prober.next_slot(settled, now, grid);
            slot = if settled {
                grid_slot_after(origin, phase, interval.as_nanos(), now)
            } else {
                now + fast
            };
        }
    }
}
