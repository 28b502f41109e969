//! Each target's verdict, and nothing about tenants: the hysteresis a probe result is
//! judged by, flap damping, the counts `/status` shows and, under `[ring]`, the other
//! members' verdicts combined with this replica's own. The core ([`super::TrackerCore`])
//! asks it what a result did to a target and decides what that means for the tenants.
//!
//! Targets are held by stable id ([`TargetIds`]), so a reload keeps the verdict of every
//! target it keeps.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use ho_config::{Endpoint, Plan, Timing};
use tokio::time::Instant;
use tracing::info;

use crate::composite::combine;
use crate::hysteresis::{Health, Hysteresis, Judgement, Transition};
use crate::observation::TargetId;
use crate::probe::ProbeResult;
use crate::ring::combine::Vantage;
use crate::ring::ownership::Ownership;

use super::index::{TargetIds, TargetIx};
use listing::Listings;

mod listing;
mod target;
mod wall;
pub(super) use target::{Latest, Shared, TargetState};

/// Every target's verdict, in plan order.
#[derive(Default)]
pub(super) struct Verdicts {
    /// Which target an observation, a timer or a ring stream names.
    ids: TargetIds,
    /// One per plan target, in the same order.
    targets: Vec<TargetState>,
    /// `[ring]`: which targets this replica probes; set, verdicts are shared.
    ring: Option<Arc<Ownership>>,
    /// `[ring]`: the identity of every member that streamed a verdict, named in targets'
    /// [`Shared`] verdicts by place. Never shrinks: a member that left may come back, and a
    /// ring sees few identities.
    members: Vec<Arc<str>>,
    /// `[ring]`: the whole states members are listing, in pieces.
    listings: Listings,
}

/// What one probe result did to its target.
pub(super) enum Judged {
    /// The result says more about this machine than about the target (see
    /// [`Judgement::NotJudged`]): kept as the latest, counted against nothing.
    NotJudged,
    /// The result counted.
    Counted(Counted),
}

/// A result that counted (see [`Verdicts::judge`]).
pub(super) struct Counted {
    /// The target's effective health before the result.
    pub(super) before: Health,
    /// An up target's first failure: what the prober's self-check counts.
    pub(super) starts_failing: bool,
    /// Its own verdict's change, if any.
    pub(super) transition: Option<Transition>,
    /// Flap damping started holding the target out, with this penalty.
    pub(super) hold: Option<f64>,
    /// The weight in effect changed.
    pub(super) reweighed: bool,
}

impl Verdicts {
    /// Makes `plan` (its targets numbered by `ids`) current: targets with a known id keep
    /// their state, new ones start `unknown`.
    pub(super) fn adopt(&mut self, plan: &Plan, ids: Vec<TargetId>, now: Instant) {
        let old_ids = std::mem::take(&mut self.ids).into_ids();
        let mut old: HashMap<TargetId, TargetState> =
            old_ids.into_iter().zip(self.targets.drain(..)).collect();
        self.targets = ids
            .iter()
            .zip(&plan.targets)
            .map(|(id, target)| {
                old.remove(id)
                    .unwrap_or_else(|| TargetState::new(target.check.timing.damping, now))
            })
            .collect();
        self.ids = TargetIds::of(ids);
        self.listings.clear();
        self.index_shared(plan);
    }

    /// Turns shared verdicts on (at start, before any observation): every target starts
    /// with no verdict, probed here as `ownership` says.
    pub(super) fn share(&mut self, ownership: Arc<Ownership>, plan: &Plan) {
        self.ring = Some(ownership);
        self.index_shared(plan);
    }

    /// Gives every new target a [`Shared`] (probed here as the ownership says) and indexes
    /// targets by key.
    fn index_shared(&mut self, plan: &Plan) {
        let Some(ownership) = &self.ring else {
            return;
        };
        for (t, target) in self.targets.iter_mut().zip(&plan.targets) {
            t.shared.get_or_insert_with(|| {
                let mut shared = Shared::new();
                shared.local = ownership.probes(&target.key());
                shared
            });
        }
        self.ids.index_keys(plan);
    }

    /// The target with stable id `id`.
    pub(super) fn index(&self, id: TargetId) -> Option<TargetIx> {
        self.ids.index(id)
    }

    /// The stable id of `target`.
    pub(super) fn id(&self, target: TargetIx) -> TargetId {
        self.ids.id(target)
    }

    /// What is known of `target`.
    pub(super) fn get(&self, target: TargetIx) -> &TargetState {
        &self.targets[target.0]
    }

    /// How many targets there are.
    pub(super) fn len(&self) -> usize {
        self.targets.len()
    }

    /// Whether every target has a verdict, this replica's own or (`[ring]`) an owner's.
    pub(super) fn all_known(&self) -> bool {
        self.targets.iter().all(TargetState::known)
    }

    /// How many targets have no verdict yet, neither this replica's nor an owner's.
    pub(super) fn unknown(&self) -> usize {
        self.targets.iter().filter(|t| !t.known()).count()
    }

    /// Targets failing: down, or failing now (a wave is judged on first failures, before
    /// verdicts change); results this machine caused are not the targets' failures.
    pub(super) fn failing(&self) -> usize {
        self.targets
            .iter()
            .filter(|t| t.effective() == Health::Down || t.failing > 0)
            .count()
    }

    /// The health of `target` that decides publication.
    pub(super) fn effective(&self, target: TargetIx) -> Health {
        self.targets[target.0].effective()
    }

    /// The verdict of endpoint `ep`: its check's effective health, or its checks' combined.
    pub(super) fn endpoint(&self, ep: &Endpoint) -> Health {
        combine(ep, |t| self.targets[t].effective())
    }

    /// [`Verdicts::endpoint`] had `target`'s effective health been `was`.
    pub(super) fn endpoint_before(&self, ep: &Endpoint, target: TargetIx, was: Health) -> Health {
        combine(ep, |t| match t == target.0 {
            true => was,
            false => self.targets[t].effective(),
        })
    }

    /// The weight `ep` reported through its check (the first of its checks that reports
    /// one), if any.
    pub(super) fn reported_weight(&self, ep: &Endpoint) -> Option<u32> {
        ep.targets().find_map(|t| self.targets[t].weight())
    }

    /// Whether `target`'s verdict is another member's now (`[ring]`: this replica stopped
    /// probing it): a probe of it finishing late counts for nothing.
    pub(super) fn probed_elsewhere(&self, target: TargetIx) -> bool {
        self.targets[target.0]
            .shared
            .as_ref()
            .is_some_and(|s| !s.local)
    }

    /// `[ring]`: the targets this replica probes and has a verdict of, with that verdict.
    pub(super) fn own(&self) -> impl Iterator<Item = (TargetIx, Health)> + '_ {
        self.targets.iter().enumerate().filter_map(|(i, t)| {
            let own = t.hysteresis.state();
            let probed = t.shared.as_ref().is_some_and(|s| s.local);
            (probed && own != Health::Unknown).then_some((TargetIx(i), own))
        })
    }

    /// Whether `target`'s verdicts are shared with the ring.
    pub(super) fn shared(&self, target: TargetIx) -> bool {
        self.targets[target.0].shared.is_some()
    }

    /// Judges `result` of `target`, arrived at `wall`, by its check's `timing`; it becomes
    /// the target's latest.
    pub(super) fn judge(
        &mut self,
        target: TargetIx,
        result: ProbeResult,
        timing: &Timing,
        now: (Instant, SystemTime),
    ) -> Judged {
        let state = &mut self.targets[target.0];
        let before = state.effective();
        // First among the results judged: one this machine caused (kept as the latest, not
        // judged) must not hide the real failure after it, or a busy machine turns the
        // self-check off.
        let starts_failing = !result.ok() && before == Health::Up && state.failing == 0;
        let transition = match state.hysteresis.judge(&result, timing) {
            Judgement::NotJudged => {
                state.last = Some(Latest::of(result, now.1));
                return Judged::NotJudged;
            }
            Judgement::Judged(transition) => transition,
        };
        let reweighed = state.count(&result, now.1);
        state.last = Some(Latest::of(result, now.1));
        let hold_starts = transition.is_some_and(|t| t.to == Health::Down)
            && state.damping.as_mut().is_some_and(|d| d.went_down(now.0));
        let hold = hold_starts.then(|| state.damping.as_ref().map_or(0.0, |d| d.penalty(now.0)));
        Judged::Counted(Counted {
            before,
            starts_failing,
            transition,
            hold,
            reweighed,
        })
    }

    /// Why `target`'s latest result is what it is (`ok`, or the failure).
    pub(super) fn latest_reason(&self, target: TargetIx) -> String {
        self.targets[target.0]
            .last
            .as_ref()
            .map_or_else(String::new, Latest::reason)
    }

    /// When flap damping's hold of `target` may end, from `now`.
    pub(super) fn release_due(
        &mut self,
        target: TargetIx,
        now: Instant,
    ) -> Option<std::time::Duration> {
        self.targets[target.0]
            .damping
            .as_mut()
            .and_then(|d| d.release_due(now))
    }

    /// Counts `target`'s verdict change `t` at `wall`; when it went down, since when the
    /// target has been failing.
    pub(super) fn record(
        &mut self,
        target: TargetIx,
        t: Transition,
        wall: SystemTime,
    ) -> Option<SystemTime> {
        self.targets[target.0].record(t, wall)
    }

    /// The place of member `identity` in the table of members, added if new.
    fn member(&mut self, identity: &str) -> u16 {
        if let Some(i) = self.place(identity) {
            return i;
        }
        self.members.push(Arc::from(identity));
        u16::try_from(self.members.len() - 1).expect("fewer than 65,536 ring members")
    }

    /// Member `from`'s verdicts, by target key (`Unknown`: it stopped probing the target)
    /// of `plan`'s targets, each counted as listed when `from` is listing its whole state;
    /// the targets they touched.
    pub(super) fn set_peer(
        &mut self,
        from: &str,
        verdicts: Vec<(String, Vantage)>,
        plan: &Plan,
    ) -> Vec<TargetIx> {
        let member = self.member(from);
        let mut touched = Vec::new();
        for (key, vantage) in verdicts {
            let Some(t) = self.ids.by_key(&key, plan) else {
                continue;
            };
            let Some(shared) = self.targets[t.0].shared.as_mut() else {
                continue;
            };
            shared.set_peer(member, vantage);
            self.listings.mark(member, t);
            touched.push(t);
        }
        touched
    }

    /// Member `from` starts listing its whole state (see [`Verdicts::end_listing`]).
    pub(super) fn begin_listing(&mut self, from: &str) {
        let member = self.member(from);
        self.listings.begin(member, self.targets.len());
    }

    /// Member `from` finished listing its whole state: its verdicts of targets it did not
    /// list are removed; the targets it had one for. A listing begun before a reload
    /// removes nothing (its marks named the old plan's targets): the member's changes
    /// correct what it still says, and its next whole state the rest.
    pub(super) fn end_listing(&mut self, from: &str) -> Vec<TargetIx> {
        let Some(member) = self.place(from) else {
            return Vec::new();
        };
        match self.listings.finish(member) {
            Some(listed) => self.drop_peer_where(member, |t| !listed.has(t)),
            None => Vec::new(),
        }
    }

    /// Removes `member`'s verdicts (and its listing under way); the targets it had one for.
    pub(super) fn drop_member(&mut self, member: &str) -> Vec<TargetIx> {
        let Some(member) = self.place(member) else {
            return Vec::new();
        };
        self.listings.forget(member);
        self.drop_peer_where(member, |_| true)
    }

    /// The place of member `identity` in the table of members, if it streamed before.
    fn place(&self, identity: &str) -> Option<u16> {
        let i = self.members.iter().position(|m| **m == *identity)?;
        Some(i as u16)
    }

    /// Removes `member`'s verdicts of the targets `drop` picks; the targets it had one for.
    fn drop_peer_where(&mut self, member: u16, drop: impl Fn(TargetIx) -> bool) -> Vec<TargetIx> {
        let mut touched = Vec::new();
        for (i, t) in self.targets.iter_mut().enumerate() {
            let Some(shared) = t.shared.as_mut() else {
                continue;
            };
            if drop(TargetIx(i)) && shared.drop_peer(member) {
                touched.push(TargetIx(i));
            }
        }
        touched
    }

    /// This replica started (`on`) or stopped probing the targets whose key hashes to
    /// `hash` (one, as a rule); those it stopped probing (their own verdict is forgotten: a
    /// later owner starts afresh).
    pub(super) fn set_local(&mut self, hash: u64, on: bool) -> Vec<TargetIx> {
        let found: Vec<TargetIx> = self.ids.by_hash(hash).collect();
        let mut stopped = Vec::new();
        for t in found {
            let state = &mut self.targets[t.0];
            let Some(shared) = state.shared.as_mut() else {
                continue;
            };
            shared.local = on;
            if !on {
                state.hysteresis = Hysteresis::new();
                stopped.push(t);
            }
        }
        stopped
    }

    /// Combines `target`'s verdicts (its key: `key`); the combined verdict's change, if any.
    pub(super) fn recombine(
        &mut self,
        t: TargetIx,
        key: impl FnOnce() -> String,
        wall: SystemTime,
    ) -> Option<Transition> {
        let state = &mut self.targets[t.0];
        let own = state.hysteresis.state();
        let shared = state.shared.as_mut()?;
        let local = shared.local.then_some(Vantage {
            health: own,
            impaired: false,
        });
        let peers = shared.peers();
        let to = crate::ring::combine::combine(peers.chain(local), shared.combined);
        let from = std::mem::replace(&mut shared.combined, to);
        let unowned = !shared.has_peers() && !shared.local && to != Health::Unknown;
        match (unowned, shared.unowned_since()) {
            (true, None) => {
                info!(target = %key(), "no ring member probes the target: its last verdict stands until a new owner's first");
                shared.set_unowned_since(Some(wall));
            }
            (false, Some(_)) => shared.set_unowned_since(None),
            _ => {}
        }
        (from != to).then_some(Transition { from, to })
    }
}
