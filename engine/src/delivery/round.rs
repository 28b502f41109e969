//! Whether a sink's reconcile rounds keep up with their interval.
//!
//! A round re-writes every idle tenant through the same `max_in_flight` places as changes:
//! 150 tenants, 2 places and 170 ms a write take about 13 s, so a 5 s interval is never
//! kept and drift waits longer than the operator asked. A round is late when its tenants
//! still wait for a place at the next tick; that is said once, until a round keeps up again.

use std::time::Duration;

use tokio::time::Instant;
use tracing::warn;

/// The round under way.
pub(super) struct Rounds {
    interval: Duration,
    /// When the round began and how many tenants it took; `None` before the first.
    current: Option<(Instant, usize)>,
    /// The late round was said; cleared when a round keeps up.
    warned: bool,
}

/// A round still waiting at the next tick: what the warning says.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Overrun {
    /// The tenants the round took.
    pub tenants: usize,
    /// Of those, still waiting for a place.
    pub waiting: usize,
    /// Since the round began.
    pub after: Duration,
    /// The reconcile interval.
    pub interval: Duration,
    /// `delivery.max_in_flight`.
    pub max_in_flight: usize,
}

impl Overrun {
    /// How long the whole round takes at the pace of its written share.
    pub(crate) fn round(&self) -> Option<Duration> {
        let done = self.tenants.checked_sub(self.waiting).filter(|&d| d > 0)?;
        Some(self.after.mul_f64(self.tenants as f64 / done as f64))
    }

    /// The warning, once for `sink`.
    pub(crate) fn warn(&self, sink: &str) {
        let round = self
            .round()
            .map_or_else(|| "more than that".to_owned(), |r| format!("about {r:.1?}"));
        warn!(
            sink,
            tenants = self.tenants,
            waiting = self.waiting,
            max_in_flight = self.max_in_flight,
            interval = ?self.interval,
            "a reconcile round of {} tenants takes longer than its {:?} interval: {} still wait \
             after {:.1?} with at most {} writes in flight, so a round takes {round}; raise \
             delivery.max_in_flight or delivery.reconcile_interval",
            self.tenants,
            self.interval,
            self.waiting,
            self.after,
            self.max_in_flight,
        );
    }
}

impl Rounds {
    pub(super) fn new(interval: Duration) -> Rounds {
        Rounds {
            interval,
            current: None,
            warned: false,
        }
    }

    /// A tick at `now`: `waiting` of the current round's tenants still wait for a place,
    /// and the tick takes `idle` tenants. A late round goes on (its tenants keep their
    /// places in the queue) and is reported the first time; else a new round begins.
    pub(super) fn tick(
        &mut self,
        now: Instant,
        waiting: usize,
        idle: usize,
        max_in_flight: usize,
    ) -> Option<Overrun> {
        match self.current {
            Some((began, tenants)) if waiting > 0 => {
                let first = !std::mem::replace(&mut self.warned, true);
                first.then(|| Overrun {
                    tenants,
                    waiting,
                    after: now.saturating_duration_since(began),
                    interval: self.interval,
                    max_in_flight,
                })
            }
            _ => {
                self.warned &= waiting > 0;
                self.current = (idle > 0).then_some((now, idle));
                None
            }
        }
    }
}
