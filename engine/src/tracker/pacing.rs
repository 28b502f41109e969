//! Publish pacing: at most one decision per tenant per [`MIN_PUBLISH_GAP`].
//!
//! The first change after a quiet period is decided at once; a burst (a rack going down:
//! thousands of transitions in a second) is folded into at most one snapshot per gap
//! instead of one per transition. Pure: the caller passes the time.

use std::time::Duration;

use tokio::time::Instant;

/// Least time between two decisions for one tenant.
pub const MIN_PUBLISH_GAP: Duration = Duration::from_millis(20);

/// One tenant's pacing state.
#[derive(Debug, Default)]
pub struct Pacing {
    /// When the last decision was made.
    last_decided: Option<Instant>,
    /// Earliest health change not yet reflected in a decision; `Some` while a decision is
    /// scheduled.
    pending_cause: Option<Instant>,
}

/// What to do about a request for a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// Decide now.
    Now,
    /// Decide at this instant (call [`Pacing::due`] then).
    Later(Instant),
    /// A decision is already scheduled; it will carry this change too.
    Scheduled,
}

impl Pacing {
    /// A health change observed at `cause_at` asks for a decision at `now`.
    pub fn request(&mut self, cause_at: Instant, now: Instant) -> Pace {
        if let Some(pending) = self.pending_cause {
            self.pending_cause = Some(pending.min(cause_at));
            return Pace::Scheduled;
        }
        let wait = self.last_decided.map_or(Duration::ZERO, |at| {
            MIN_PUBLISH_GAP.saturating_sub(now.saturating_duration_since(at))
        });
        if wait.is_zero() {
            Pace::Now
        } else {
            self.pending_cause = Some(cause_at);
            Pace::Later(now + wait)
        }
    }

    /// The scheduled decision is due: the earliest change it carries, or `None` when a
    /// reload already made it.
    pub fn due(&mut self) -> Option<Instant> {
        self.pending_cause.take()
    }

    /// A decision was made at `now`.
    pub fn decided(&mut self, now: Instant) {
        self.last_decided = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_change_goes_at_once_a_burst_waits_for_the_gap() {
        let t0 = Instant::now();
        let mut p = Pacing::default();
        assert_eq!(p.request(t0, t0), Pace::Now);
        p.decided(t0);
        let t1 = t0 + Duration::from_millis(5);
        assert_eq!(p.request(t1, t1), Pace::Later(t0 + MIN_PUBLISH_GAP));
        let t2 = t0 + Duration::from_millis(8);
        assert_eq!(p.request(t2, t2), Pace::Scheduled);
        assert_eq!(p.due(), Some(t1), "the earliest cause is carried");
        assert_eq!(p.due(), None);
        let later = t0 + Duration::from_secs(1);
        assert_eq!(p.request(later, later), Pace::Now);
    }
}
