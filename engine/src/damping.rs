//! Flap damping: holds an endpoint that keeps going down and up out of DNS until it calms
//! down, as BGP route-flap damping (RFC 2439) does for routes.
//!
//! Hysteresis alone bounds how fast one verdict can change (`fall` failures, `rise`
//! successes); it does not bound how often an endpoint that fails every few seconds goes
//! out of and back into DNS, and every change costs resolvers a cache miss and clients a
//! retry. Damping bounds that: each down transition adds a penalty that halves every
//! half-life; above `suppress` the endpoint is held out until the penalty decays below
//! `reuse`. The penalty is capped so that a hold never lasts longer than `max_suppress`
//! after the last flap.
//!
//! Pure: the clock is passed in, so the rule is tested without waiting.

use std::time::Duration;

use ho_config::Damping;
use tokio::time::Instant;

/// One endpoint's flap history.
#[derive(Debug, Clone)]
pub struct FlapDamping {
    config: Damping,
    /// Penalty at `at`.
    penalty: f64,
    at: Instant,
    suppressed: bool,
}

impl FlapDamping {
    /// No flaps yet.
    pub fn new(config: Damping, now: Instant) -> FlapDamping {
        FlapDamping {
            config,
            penalty: 0.0,
            at: now,
            suppressed: false,
        }
    }

    /// The penalty now, decayed since the last update.
    pub fn penalty(&self, now: Instant) -> f64 {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.penalty * (-elapsed / self.config.half_life.as_secs_f64()).exp2()
    }

    /// Whether the endpoint is held out of DNS (as of the last call to [`Self::went_down`] or
    /// [`Self::release_due`]).
    pub fn suppressed(&self) -> bool {
        self.suppressed
    }

    /// Records a down transition; true when this starts a hold.
    pub fn went_down(&mut self, now: Instant) -> bool {
        let ceiling = f64::from(self.config.reuse)
            * (self.config.max_suppress.as_secs_f64() / self.config.half_life.as_secs_f64()).exp2();
        self.penalty = (self.penalty(now) + f64::from(self.config.penalty)).min(ceiling);
        self.at = now;
        let starts = !self.suppressed && self.penalty > f64::from(self.config.suppress);
        self.suppressed |= starts;
        starts
    }

    /// While held: `None` when the hold ends now (the endpoint is released), else how long
    /// until it may end. `None` as well when not held.
    pub fn release_due(&mut self, now: Instant) -> Option<Duration> {
        if !self.suppressed {
            return None;
        }
        let penalty = self.penalty(now);
        let reuse = f64::from(self.config.reuse);
        if penalty < reuse {
            self.suppressed = false;
            return None;
        }
        let halvings = (penalty / reuse).log2();
        // A millisecond past the crossing, so the check then finds it below `reuse`.
        Some(Duration::from_secs_f64(
            halvings * self.config.half_life.as_secs_f64() + 0.001,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Damping {
        Damping {
            half_life: Duration::from_secs(60),
            penalty: 1000,
            suppress: 2000,
            reuse: 750,
            max_suppress: Duration::from_secs(600),
        }
    }

    #[test]
    fn one_outage_is_never_held() {
        let t0 = Instant::now();
        let mut d = FlapDamping::new(config(), t0);
        assert!(!d.went_down(t0));
        assert!(!d.suppressed());
        assert_eq!(d.release_due(t0), None);
    }

    #[test]
    fn the_third_quick_down_holds_until_the_penalty_decays_below_reuse() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut d = FlapDamping::new(config(), t0);
        assert!(!d.went_down(t0));
        assert!(!d.went_down(t0 + s(5)));
        assert!(d.went_down(t0 + s(10)), "third down within 10 s");
        assert!(d.suppressed());
        // Penalty 891 + 944 + 1000 = 2835 at 10 s; below 750 after log2(2835/750) = 1.92
        // half-lives: 115 s.
        let wait = d.release_due(t0 + s(10)).expect("held");
        assert_eq!(wait.as_secs(), 115, "{wait:?}");
        assert!(d.release_due(t0 + s(10) + wait - s(1)).is_some());
        assert_eq!(d.release_due(t0 + s(10) + wait), None);
        assert!(!d.suppressed());
    }

    #[test]
    fn slow_flaps_decay_and_are_never_held() {
        let t0 = Instant::now();
        let mut d = FlapDamping::new(config(), t0);
        for i in 0..20 {
            // One down every two half-lives: the penalty settles near 1333, below 2000.
            assert!(!d.went_down(t0 + Duration::from_secs(120 * i)));
        }
        assert!(!d.suppressed());
    }

    #[test]
    fn a_hold_never_outlasts_max_suppress_after_the_last_flap() {
        let t0 = Instant::now();
        let mut d = FlapDamping::new(config(), t0);
        for i in 0..1000 {
            d.went_down(t0 + Duration::from_millis(10 * i));
        }
        let last = t0 + Duration::from_millis(10 * 999);
        let wait = d.release_due(last).expect("held");
        assert!(wait <= Duration::from_secs(601), "{wait:?}");
        assert!(wait >= Duration::from_secs(599), "{wait:?}");
    }
}
