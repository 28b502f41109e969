//! `[ring]`: the verdicts of targets other members probe. Each target keeps this replica's
//! own verdict while it probes the target and the verdicts other members stream; what
//! decides publication is their combination ([`crate::ring::combine`]), and the transitions
//! logged, counted and announced are the combined verdict's. This replica's own verdict
//! changes go out as [`Effect::Share`].

use std::sync::Arc;

use tracing::info;

use crate::hysteresis::{Health, Hysteresis, Transition};
use crate::ring::combine::{combine, Vantage};
use crate::ring::ownership::Ownership;

use super::super::index::TargetIx;
use super::state::Shared;
use super::{Clock, Effect, TrackerCore};

impl TrackerCore {
    /// Turns shared verdicts on (at start, before any observation): every target starts
    /// with no verdict, probed here as `ownership` says.
    pub fn share_verdicts(&mut self, ownership: Arc<Ownership>) {
        self.ring = Some(ownership);
        self.index_shared();
    }

    /// Gives every new target a [`Shared`] (probed here as the ownership says) and indexes
    /// targets by key (after a plan change).
    pub(super) fn index_shared(&mut self) {
        let Some(ownership) = &self.ring else {
            return;
        };
        for (t, target) in self.targets.iter_mut().zip(&self.plan.targets) {
            t.shared.get_or_insert_with(|| {
                let mut shared = Shared::new();
                shared.local = ownership.probes(&target.key());
                shared
            });
        }
        self.ids.index_keys(&self.plan);
    }

    /// Verdicts member `from` streamed: all it has (`full`: any target it does not list has
    /// no verdict of it any more) or changes (`Unknown`: it stopped probing the target).
    pub fn vantages(
        &mut self,
        from: &str,
        full: bool,
        verdicts: Vec<(String, Vantage)>,
        now: Clock,
        fx: &mut Vec<Effect>,
    ) {
        let member: Arc<str> = Arc::from(from);
        let mut touched: Vec<TargetIx> = Vec::new();
        if full {
            touched.extend(self.drop_member(from));
        }
        for (key, vantage) in verdicts {
            let Some(t) = self.ids.by_key(&key) else {
                continue;
            };
            let Some(shared) = self.targets[t.0].shared.as_mut() else {
                continue;
            };
            shared.peers.retain(|(m, _)| **m != *from);
            if vantage.health != Health::Unknown {
                shared.peers.push((member.clone(), vantage));
            }
            touched.push(t);
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
        for t in self.drop_member(member) {
            self.recombine_and_apply(t, &reason, now, fx);
        }
    }

    /// This replica started (`on`) or stopped probing these targets. Stopping forgets its
    /// own verdict (a later owner starts afresh) and tells the others.
    pub fn probing(&mut self, keys: &[String], on: bool, now: Clock, fx: &mut Vec<Effect>) {
        for key in keys {
            let Some(t) = self.ids.by_key(key) else {
                continue;
            };
            let state = &mut self.targets[t.0];
            let Some(shared) = state.shared.as_mut() else {
                continue;
            };
            shared.local = on;
            if !on {
                state.hysteresis = Hysteresis::new();
                fx.push(Effect::Share {
                    key: key.clone(),
                    health: Health::Unknown,
                });
                self.recombine_and_apply(t, "this replica stopped probing it", now, fx);
            }
        }
    }

    /// Removes `member`'s verdicts; the targets it had one for.
    fn drop_member(&mut self, member: &str) -> Vec<TargetIx> {
        let mut touched = Vec::new();
        for (i, t) in self.targets.iter_mut().enumerate() {
            if let Some(shared) = t.shared.as_mut() {
                let before = shared.peers.len();
                shared.peers.retain(|(m, _)| **m != *member);
                if shared.peers.len() != before {
                    touched.push(TargetIx(i));
                }
            }
        }
        touched
    }

    /// Recombines `target` and, if its effective health changed, re-decides its tenants.
    fn recombine_and_apply(&mut self, t: TargetIx, reason: &str, now: Clock, fx: &mut Vec<Effect>) {
        let before = self.targets[t.0].effective();
        self.recombine(t, reason, now);
        if self.targets[t.0].effective() != before {
            self.effective_changed(t, before, now, fx);
        }
    }

    /// Combines `target`'s verdicts; a change of the combined verdict is a transition.
    pub(super) fn recombine(&mut self, t: TargetIx, reason: &str, now: Clock) {
        let state = &mut self.targets[t.0];
        let own = state.hysteresis.state();
        let Some(shared) = state.shared.as_mut() else {
            return;
        };
        let local = shared.local.then_some(Vantage {
            health: own,
            impaired: false,
        });
        let peers = shared.peers.iter().map(|(_, v)| *v);
        let to = combine(peers.chain(local), shared.combined);
        let from = std::mem::replace(&mut shared.combined, to);
        let unowned = shared.peers.is_empty() && !shared.local && to != Health::Unknown;
        match (unowned, shared.unowned_since) {
            (true, None) => {
                info!(target = %self.plan.targets[t.0].key(), "no ring member probes the target: its last verdict stands until a new owner's first");
                shared.unowned_since = Some(now.wall);
            }
            (false, Some(_)) => shared.unowned_since = None,
            _ => {}
        }
        if from != to {
            self.on_transition(t, Transition { from, to }, reason.to_owned(), now);
        }
    }
}
