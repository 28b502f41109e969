//! `[ring]`: the verdicts of targets other members probe. Each target keeps this replica's
//! own verdict while it probes the target and the verdicts other members stream; what
//! decides publication is their combination ([`crate::ring::combine`]), and the transitions
//! logged, counted and announced are the combined verdict's. This replica's own verdict
//! changes go out as [`Effect::Share`].

use std::sync::Arc;

use ho_config::Plan;

use crate::hysteresis::Health;
use crate::ring::combine::Vantage;
use crate::ring::ownership::Ownership;

use super::super::index::TargetIx;
use super::{Clock, Effect, TrackerCore};

impl TrackerCore {
    /// Turns shared verdicts on (at start, before any observation): every target starts
    /// with no verdict, probed here as `ownership` says.
    pub fn share_verdicts(&mut self, ownership: Arc<Ownership>) {
        self.verdicts.share(ownership, &self.plan);
    }

    /// Verdicts member `from` streamed, as `part` of its stream says (`Unknown`: it
    /// stopped probing the target).
    pub fn vantages(
        &mut self,
        from: &str,
        part: Part,
        verdicts: Vec<(String, Vantage)>,
        now: Clock,
        fx: &mut Vec<Effect>,
    ) {
        if let Part::Whole { first: true, .. } = part {
            self.verdicts.begin_listing(from);
        }
        let mut touched = self.verdicts.set_peer(from, verdicts, &self.plan);
        if let Part::Whole { last: true, .. } = part {
            touched.extend(self.verdicts.end_listing(from));
        }
        touched.sort_unstable_by_key(|t| t.0);
        touched.dedup();
        let reason = format!("verdict of ring member {from}");
        for t in touched {
            self.recombine_and_apply(t, &reason, now, fx);
        }
    }

    /// A member left the ring: its verdicts no longer count (a target it alone probed keeps
    /// its last verdict until its new owner's first).
    pub fn forget_member(&mut self, member: &str, now: Clock, fx: &mut Vec<Effect>) {
        let reason = format!("ring member {member} left");
        for t in self.verdicts.drop_member(member) {
            self.recombine_and_apply(t, &reason, now, fx);
        }
    }

    /// This replica started (`on`) or stopped probing these targets. Stopping forgets its
    /// own verdict (a later owner starts afresh) and tells the others.
    /// The targets are named by their keys' hashes, as the gates are.
    pub fn probing(&mut self, hashes: &[u64], on: bool, now: Clock, fx: &mut Vec<Effect>) {
        for &hash in hashes {
            for t in self.verdicts.set_local(hash, on) {
                fx.push(Effect::Share {
                    key: self.plan.targets[t.0].key(),
                    health: Health::Unknown,
                });
                self.recombine_and_apply(t, "this replica stopped probing it", now, fx);
            }
        }
    }

    /// This replica's own verdict of every target it probes and has judged: the whole
    /// state a member is sent when it connects, and again when the self-check changes its
    /// mind.
    pub fn own_verdicts(&self) -> OwnState {
        let mut verdicts = vec![Health::Unknown; self.plan.targets.len()];
        for (t, health) in self.verdicts.own() {
            verdicts[t.0] = health;
        }
        OwnState {
            plan: self.plan.clone(),
            verdicts,
        }
    }

    /// Recombines `target` and, if its effective health changed, re-decides its tenants.
    fn recombine_and_apply(&mut self, t: TargetIx, reason: &str, now: Clock, fx: &mut Vec<Effect>) {
        let before = self.verdicts.effective(t);
        self.recombine(t, reason, now);
        if self.verdicts.effective(t) != before {
            self.effective_changed(t, before, now, fx);
        }
    }

    /// Combines `target`'s verdicts; a change of the combined verdict is a transition.
    pub(super) fn recombine(&mut self, t: TargetIx, reason: &str, now: Clock) {
        let plan = &self.plan;
        let key = || plan.targets[t.0].key();
        if let Some(transition) = self.verdicts.recombine(t, key, now.wall) {
            self.on_transition(t, transition, reason.to_owned(), now);
        }
    }
}

/// Which part of a member's stream a batch of its verdicts is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Changes: a target it does not list keeps its verdict.
    Changes,
    /// A piece of its whole state: `first` begins it, `last` ends it, and a target none
    /// of the pieces lists has no verdict of that member any more.
    Whole { first: bool, last: bool },
}

#[cfg(test)]
impl Part {
    /// A whole state in one piece.
    pub const WHOLE: Part = Part::Whole {
        first: true,
        last: true,
    };
}

/// This replica's own verdicts at one moment: a byte a target in plan order (`Unknown`
/// where it has none of its own) beside the plan naming them, so a member that connects
/// is sent them in pieces whose keys are written as they go, not a copy of every key.
pub struct OwnState {
    plan: Arc<Plan>,
    verdicts: Vec<Health>,
}

impl OwnState {
    /// Each verdict with its target's key.
    pub fn iter(&self) -> impl Iterator<Item = (String, Health)> + '_ {
        self.verdicts
            .iter()
            .zip(&self.plan.targets)
            .filter(|(health, _)| **health != Health::Unknown)
            .map(|(health, target)| (target.key(), *health))
    }
}
