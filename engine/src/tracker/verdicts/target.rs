//! What the tracker keeps per target: its verdict (hysteresis, flap damping, and under
//! `[ring]` the other members' verdicts), and the counts `/status` shows.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::damping::FlapDamping;
use crate::hysteresis::{Health, Hysteresis};
use crate::probe::ProbeResult;
use crate::ring::combine::Vantage;

/// What the tracker knows about one target.
pub(in crate::tracker) struct TargetState {
    pub(in crate::tracker) hysteresis: Hysteresis,
    /// Flap damping, when the target's check turns it on.
    pub(in crate::tracker) damping: Option<FlapDamping>,
    /// The latest result and when it arrived.
    pub(in crate::tracker) last: Option<(ProbeResult, SystemTime)>,
    /// When the verdict last changed.
    pub(in crate::tracker) since: Option<SystemTime>,
    pub(in crate::tracker) probes: u64,
    pub(in crate::tracker) failures: u64,
    /// Probes failed in a row up to the latest, whatever the verdict (the hysteresis
    /// counts only those that disagree with it).
    pub(in crate::tracker) failing: u32,
    /// When the first of those failures arrived: where a down verdict's harm began (the
    /// availability ledger counts a dead address served from here, not from the verdict).
    pub(in crate::tracker) failing_since: Option<SystemTime>,
    /// Verdict changes since start.
    pub(in crate::tracker) transitions: u64,
    /// Time spent down before the current verdict (the current down spell is added when
    /// shown).
    pub(in crate::tracker) downtime: Duration,
    /// The weight its last healthy answer reported (`reported_weight`); `None`: the
    /// configured weight.
    pub(in crate::tracker) weight: Option<u32>,
    /// With `[ring]`: the verdicts of every replica probing it, combined.
    pub(in crate::tracker) shared: Option<Box<Shared>>,
}

/// A target's verdicts with `[ring]`: this replica's own (its hysteresis, while it probes
/// the target) and the other probing members', combined by [`crate::ring::combine`].
#[derive(Debug)]
pub(in crate::tracker) struct Shared {
    /// Whether this replica probes it (its gate is open).
    pub(in crate::tracker) local: bool,
    /// Other members' verdicts, by member identity.
    pub(in crate::tracker) peers: Vec<(Arc<str>, Vantage)>,
    /// The combined verdict: what decides publication.
    pub(in crate::tracker) combined: Health,
    /// Since when no member probes it (its owners all left) while its last verdict stands.
    pub(in crate::tracker) unowned_since: Option<std::time::SystemTime>,
}

impl Shared {
    pub(in crate::tracker) fn new() -> Box<Shared> {
        Box::new(Shared {
            local: false,
            peers: Vec::new(),
            combined: Health::Unknown,
            unowned_since: None,
        })
    }
}

impl TargetState {
    pub(in crate::tracker) fn new(
        damping: Option<ho_config::Damping>,
        now: Instant,
    ) -> TargetState {
        TargetState {
            hysteresis: Hysteresis::new(),
            damping: damping.map(|d| FlapDamping::new(d, now)),
            last: None,
            since: None,
            probes: 0,
            failures: 0,
            failing: 0,
            failing_since: None,
            transitions: 0,
            downtime: Duration::ZERO,
            weight: None,
            shared: None,
        }
    }

    /// Whether the target has a verdict to answer with: this replica's own, or under
    /// `[ring]` the owners' combined. A replica joining a running ring answers every name
    /// from its peers' stream long before it probes anything, so it is ready then.
    pub(in crate::tracker) fn known(&self) -> bool {
        self.hysteresis.state() != Health::Unknown
            || self
                .shared
                .as_ref()
                .is_some_and(|s| s.combined != Health::Unknown)
    }

    /// The health that decides publication: the verdict, or down while flap damping holds
    /// the target out.
    pub(in crate::tracker) fn effective(&self) -> Health {
        if self.damped() {
            Health::Down
        } else if let Some(shared) = &self.shared {
            shared.combined
        } else {
            self.hysteresis.state()
        }
    }

    /// Counts a judged `result` that arrived at `wall`; whether it changed the weight in
    /// effect (a healthy answer says its damper's, or none: the configured one).
    pub(in crate::tracker) fn count(&mut self, result: &ProbeResult, wall: SystemTime) -> bool {
        self.probes += 1;
        if result.ok() {
            self.failing = 0;
            self.failing_since = None;
        } else {
            self.failures += 1;
            if self.failing == 0 {
                self.failing_since = Some(wall);
            }
            self.failing = self.failing.saturating_add(1);
        }
        let reweighed = result.ok() && self.weight != result.weight;
        if reweighed {
            self.weight = result.weight;
        }
        reweighed
    }

    /// Whether flap damping holds the target out of DNS now.
    pub(in crate::tracker) fn damped(&self) -> bool {
        self.damping.as_ref().is_some_and(FlapDamping::suppressed)
    }
}
