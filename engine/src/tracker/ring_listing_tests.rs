//! `[ring]`: other members' whole states arrive in pieces, interleaved with the other
//! members' changes, broken off when a connection is lost and begun again, and ended by a
//! member leaving. Seeded generated scripts against an oracle kept by the test: after
//! every batch the tracker's verdict of each target is what the members' verdicts so far
//! combine to, and a verdict changes (an event, a transition) only where the oracle's does.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;

use super::index::TargetIx;
use super::tests::{plan, Harness};
use super::Part;
use crate::events::Event;
use crate::hysteresis::Health;
use crate::ring::combine::Vantage;
use crate::ring::handover::Assignment;
use crate::ring::members::Member;
use crate::ring::ownership::Ownership;
use crate::ring::rendezvous::{member_hash, target_hash};

const TARGETS: usize = 60;
const MEMBERS: [&str; 3] = ["b", "c", "d"];

/// This replica in a ring, probing none of the targets: every verdict is the others'.
struct Script {
    h: Harness,
    events: UnboundedReceiver<Arc<Event>>,
    /// What each member's verdict of each target is, as the tracker should hold it.
    said: Vec<Vec<Option<Health>>>,
    /// What each target's combined verdict is: the oracle.
    combined: Vec<Health>,
    /// The targets each member's whole state under way has listed, if one is.
    listing: Vec<Option<Vec<bool>>>,
    rng: fastrand::Rng,
}

impl Script {
    fn new(seed: u64) -> Script {
        let mut h = Harness::new(plan(TARGETS, "", ""));
        let me = member_hash("me");
        let ownership = Arc::new(Ownership::new(Assignment::new(
            me,
            2,
            Duration::from_secs(2),
        )));
        let _ = ownership.ring(
            vec![Member {
                identity: "me".into(),
                hash: me,
                peer: None,
            }],
            Instant::now(),
        );
        h.core.share_verdicts(ownership);
        let hashes: Vec<u64> = (0..TARGETS).map(|t| target_hash(&key(&h, t))).collect();
        let mut fx = Vec::new();
        h.core.probing(&hashes, false, h.now, &mut fx);
        h.take(fx);
        let events = h.core.events.follow();
        Script {
            h,
            events,
            said: vec![vec![None; TARGETS]; MEMBERS.len()],
            combined: vec![Health::Unknown; TARGETS],
            listing: vec![None; MEMBERS.len()],
            rng: fastrand::Rng::with_seed(seed),
        }
    }

    fn verdict(&mut self) -> Health {
        [Health::Up, Health::Down, Health::Unknown][self.rng.usize(..3)]
    }

    /// Member `m` sends `verdicts` (target, verdict) as `part`; the oracle follows, and
    /// the tracker must agree with it on every target, with a transition exactly where the
    /// oracle's verdict changed.
    fn send(&mut self, m: usize, part: Part, verdicts: &[(usize, Health)]) {
        if let Part::Whole { first: true, .. } = part {
            self.listing[m] = Some(vec![false; TARGETS]);
        }
        for &(t, health) in verdicts {
            self.said[m][t] = (health != Health::Unknown).then_some(health);
            if let Some(listed) = &mut self.listing[m] {
                listed[t] = true;
            }
        }
        if let Part::Whole { last: true, .. } = part {
            let listed = self.listing[m].take().expect("a listing under way");
            for t in (0..TARGETS).filter(|&t| !listed[t]) {
                self.said[m][t] = None;
            }
        }
        let sent = verdicts
            .iter()
            .map(|&(t, health)| {
                let vantage = Vantage {
                    health,
                    impaired: false,
                };
                (key(&self.h, t), vantage)
            })
            .collect();
        let mut fx = Vec::new();
        let now = self.h.now;
        self.h.core.vantages(MEMBERS[m], part, sent, now, &mut fx);
        self.h.take(fx);
        self.check(&format!("{} sent {part:?}", MEMBERS[m]));
    }

    /// Member `m` leaves the ring.
    fn leaves(&mut self, m: usize) {
        self.said[m] = vec![None; TARGETS];
        self.listing[m] = None;
        let mut fx = Vec::new();
        let now = self.h.now;
        self.h.core.forget_member(MEMBERS[m], now, &mut fx);
        self.h.take(fx);
        self.check(&format!("{} left", MEMBERS[m]));
    }

    /// The oracle's combined verdicts brought up to date, then compared with the tracker's.
    fn check(&mut self, step: &str) {
        let mut changed = 0;
        for t in 0..TARGETS {
            let said = self.said.iter().filter_map(|m| m[t]);
            let to = if said.clone().any(|h| h == Health::Down) {
                Health::Down
            } else if said.clone().any(|h| h == Health::Up) {
                Health::Up
            } else {
                self.combined[t]
            };
            changed += usize::from(to != self.combined[t]);
            self.combined[t] = to;
            let got = self.h.core.verdicts.effective(TargetIx(t));
            assert_eq!(got, to, "target {t} after {step}");
        }
        let mut transitions = 0;
        while let Ok(event) = self.events.try_recv() {
            transitions += usize::from(matches!(*event, Event::Transition { .. }));
        }
        assert_eq!(transitions, changed, "transitions after {step}");
    }

    /// A new whole state of a member: a verdict of some targets, in plan order.
    fn whole_state(&mut self) -> Vec<(usize, Health)> {
        let mut state = Vec::new();
        for t in 0..TARGETS {
            if self.rng.u8(..4) != 0 {
                let health = [Health::Up, Health::Down][self.rng.usize(..2)];
                state.push((t, health));
            }
        }
        state
    }

    /// Member `m` sends `state` in pieces of random sizes; another member's changes come
    /// between them; with `broken`, it stops after some pieces (its connection lost).
    fn listing(&mut self, m: usize, state: &[(usize, Health)], broken: bool) {
        let pieces = split(&mut self.rng, state);
        let stop = if broken {
            self.rng.usize(..pieces.len())
        } else {
            pieces.len()
        };
        for (i, piece) in pieces.iter().enumerate().take(stop) {
            let part = Part::Whole {
                first: i == 0,
                last: i + 1 == pieces.len(),
            };
            self.send(m, part, piece);
            if self.rng.bool() {
                let other = (m + 1 + self.rng.usize(..MEMBERS.len() - 1)) % MEMBERS.len();
                self.changes(other);
            }
        }
    }

    /// Member `m` sends a few changes.
    fn changes(&mut self, m: usize) {
        let n = self.rng.usize(1..6);
        let changes: Vec<(usize, Health)> = (0..n)
            .map(|_| (self.rng.usize(..TARGETS), self.verdict()))
            .collect();
        self.send(m, Part::Changes, &changes);
    }
}

fn key(h: &Harness, target: usize) -> String {
    h.core.plan.targets[target].key()
}

/// `state` in pieces of 1 to 20, at least one (empty for an empty state).
fn split(rng: &mut fastrand::Rng, state: &[(usize, Health)]) -> Vec<Vec<(usize, Health)>> {
    let mut pieces = Vec::new();
    let mut rest = state;
    loop {
        let n = rng.usize(1..=20).min(rest.len());
        pieces.push(rest[..n].to_vec());
        rest = &rest[n..];
        if rest.is_empty() {
            return pieces;
        }
    }
}

#[test]
fn whole_states_in_pieces_agree_with_the_oracle_at_every_piece() {
    for seed in 0..40 {
        let mut s = Script::new(seed);
        for _ in 0..30 {
            let m = s.rng.usize(..MEMBERS.len());
            match s.rng.u8(..10) {
                0..=3 => {
                    let state = s.whole_state();
                    let broken = s.rng.u8(..4) == 0;
                    s.listing(m, &state, broken);
                }
                4..=8 => s.changes(m),
                _ => s.leaves(m),
            }
        }
    }
}

/// A member sending again the state the tracker already holds (a reconnection, the
/// self-check changing its mind) changes nothing while its pieces arrive: not even where
/// its down verdict stands against another member's up.
#[test]
fn the_same_state_again_in_pieces_moves_no_verdict() {
    for seed in 0..20 {
        let mut s = Script::new(seed);
        let other = s.whole_state();
        s.listing(1, &other, false);
        let state = s.whole_state();
        s.listing(0, &state, false);
        let pieces = split(&mut s.rng, &state);
        let before = s.combined.clone();
        for (i, piece) in pieces.iter().enumerate() {
            let part = Part::Whole {
                first: i == 0,
                last: i + 1 == pieces.len(),
            };
            s.send(0, part, piece);
            assert_eq!(s.combined, before, "seed {seed}, piece {i}");
        }
    }
}
