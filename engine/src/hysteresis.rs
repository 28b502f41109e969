//! Hysteresis: turns a stream of probe results into a stable health verdict.
//!
//! The rule, exactly:
//! - A target starts [`Health::Unknown`].
//! - Results that agree with the current state reset both counters.
//! - A failure while up (or unknown) adds one to the failure count and resets the success
//!   count; the state becomes [`Health::Down`] when the failure count reaches `fall`
//!   (`>= fall`, so `fall = 2` means the second consecutive failure flips it).
//! - A success while down (or unknown) does the same with the success count and `rise`.
//!
//! The type holds no clock and does no I/O, so it is tested with plain `#[test]`s and
//! property tests (see the tests below).

use ho_config::Timing;
use serde::Serialize;

use crate::probe::ProbeResult;

/// The verdict about one target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    /// No verdict yet: not enough results since start.
    Unknown,
    /// Healthy: its address may be published.
    Up,
    /// Unhealthy: its address is withdrawn (unless a fail-open rule applies).
    Down,
}

impl Health {
    /// Lower-case name for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Health::Unknown => "unknown",
            Health::Up => "up",
            Health::Down => "down",
        }
    }

    /// Whether a probe result agrees with this state, i.e. needs no fast re-check.
    pub fn agrees_with(self, ok: bool) -> bool {
        matches!((self, ok), (Health::Up, true) | (Health::Down, false))
    }
}

/// A change of verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    /// State before.
    pub from: Health,
    /// State after.
    pub to: Health,
}

/// Consecutive-result counters and the current verdict of one target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hysteresis {
    state: Health,
    successes: u32,
    failures: u32,
}

impl Default for Hysteresis {
    fn default() -> Self {
        Self::new()
    }
}

impl Hysteresis {
    /// A target with no results yet.
    pub const fn new() -> Self {
        Self {
            state: Health::Unknown,
            successes: 0,
            failures: 0,
        }
    }

    /// The current verdict.
    pub fn state(&self) -> Health {
        self.state
    }

    /// Consecutive successes that disagree with the current state.
    pub fn successes(&self) -> u32 {
        self.successes
    }

    /// Consecutive failures that disagree with the current state.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Records one probe result; returns the transition if the verdict changed.
    /// `rise` and `fall` are at least 1 (validated in the config).
    pub fn record(&mut self, ok: bool, rise: u32, fall: u32) -> Option<Transition> {
        debug_assert!(rise >= 1 && fall >= 1);
        if self.state.agrees_with(ok) {
            self.successes = 0;
            self.failures = 0;
            return None;
        }
        let (count, threshold, target) = if ok {
            self.failures = 0;
            self.successes += 1;
            (self.successes, rise, Health::Up)
        } else {
            self.successes = 0;
            self.failures += 1;
            (self.failures, fall, Health::Down)
        };
        if count < threshold {
            return None;
        }
        let from = self.state;
        *self = Self {
            state: target,
            successes: 0,
            failures: 0,
        };
        debug_assert!(self.successes == 0 && self.failures == 0);
        Some(Transition { from, to: target })
    }
}

/// What one probe result did to a target's verdict (see [`Hysteresis::judge`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judgement {
    /// The result was caused by this machine (no descriptor, no port: see
    /// [`ProbeResult::counts`]) and says nothing about the endpoint: not counted.
    NotJudged,
    /// The result was counted; the transition if the verdict changed.
    Judged(Option<Transition>),
}

impl Hysteresis {
    /// Applies one probe result under `timing`'s rise and fall. The one place where the
    /// "local failures are not judged" rule lives: the tracker (whose verdict is published)
    /// and each prober's scheduling copy both call it, so they cannot disagree.
    pub fn judge(&mut self, result: &ProbeResult, timing: &Timing) -> Judgement {
        if result.counts() {
            Judgement::Judged(self.record(result.ok(), timing.rise, timing.fall))
        } else {
            Judgement::NotJudged
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn flips_down_at_fall_consecutive_failures() {
        let mut h = Hysteresis::new();
        assert_eq!(h.record(true, 2, 3), None);
        assert_eq!(
            h.record(true, 2, 3),
            Some(Transition {
                from: Health::Unknown,
                to: Health::Up
            })
        );
        assert_eq!(h.record(false, 2, 3), None);
        assert_eq!(h.record(false, 2, 3), None);
        assert_eq!(h.failures(), 2);
        assert_eq!(
            h.record(false, 2, 3),
            Some(Transition {
                from: Health::Up,
                to: Health::Down
            })
        );
        assert_eq!(h.state(), Health::Down);
    }

    #[test]
    fn an_agreeing_result_resets_the_count() {
        let mut h = Hysteresis::new();
        h.record(true, 1, 2);
        assert_eq!(h.record(false, 1, 2), None);
        assert_eq!(h.record(true, 1, 2), None);
        assert_eq!(h.failures(), 0);
        assert_eq!(h.record(false, 1, 2), None, "count restarted");
        assert!(h.record(false, 1, 2).is_some());
    }

    #[test]
    fn rise_one_fall_one_follows_every_result() {
        let mut h = Hysteresis::new();
        for ok in [true, false, true, false] {
            assert!(h.record(ok, 1, 1).is_some());
            assert_eq!(h.state(), if ok { Health::Up } else { Health::Down });
        }
    }

    /// Reference model: the state is decided by the latest run of equal results that
    /// reached its threshold.
    fn model(results: &[bool], rise: u32, fall: u32) -> Health {
        let mut state = Health::Unknown;
        let mut run = 0u32;
        let mut last = None;
        for &ok in results {
            run = if last == Some(ok) { run + 1 } else { 1 };
            last = Some(ok);
            if ok && run >= rise {
                state = Health::Up;
            }
            if !ok && run >= fall {
                state = Health::Down;
            }
        }
        state
    }

    proptest! {
        #[test]
        fn matches_the_reference_model(
            results in proptest::collection::vec(any::<bool>(), 0..200),
            rise in 1u32..6,
            fall in 1u32..6,
        ) {
            let mut h = Hysteresis::new();
            for &ok in &results {
                h.record(ok, rise, fall);
            }
            prop_assert_eq!(h.state(), model(&results, rise, fall));
        }

        #[test]
        fn transitions_only_after_enough_consecutive_results(
            results in proptest::collection::vec(any::<bool>(), 0..200),
            rise in 1u32..6,
            fall in 1u32..6,
        ) {
            let mut h = Hysteresis::new();
            for (i, &ok) in results.iter().enumerate() {
                if let Some(t) = h.record(ok, rise, fall) {
                    let need = if ok { rise } else { fall } as usize;
                    prop_assert!(i + 1 >= need);
                    prop_assert!(results[i + 1 - need..=i].iter().all(|&r| r == ok));
                    prop_assert_ne!(t.from, t.to);
                    prop_assert_eq!(t.to, if ok { Health::Up } else { Health::Down });
                }
            }
        }

        #[test]
        fn counters_never_reach_their_threshold(
            results in proptest::collection::vec(any::<bool>(), 0..200),
            rise in 1u32..6,
            fall in 1u32..6,
        ) {
            let mut h = Hysteresis::new();
            for &ok in &results {
                h.record(ok, rise, fall);
                prop_assert!(h.successes() < rise && h.failures() < fall);
                prop_assert!(h.successes() == 0 || h.failures() == 0);
            }
        }
    }
}
