//! `[ring]`: a replica holds, of a target it does not probe, only its owners' verdicts. When
//! a member dies (SIGKILL: its stream stops, then its Lease lapses and the ring is listed
//! without it) the replica takes over some of its targets: it answers them from the
//! surviving owner's verdict until its own first probe, with no gap and no target coming
//! back before an owner says so, and its own verdicts count (and go to the others) from then
//! on. As members join, leave and die, every answer is what the owners' verdicts say.
//! Seeded rings and verdicts; the expected answers are the script's.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use super::tests::{plan, Harness};
use super::Part;
use crate::hysteresis::Health;
use crate::observation::TargetId;
use crate::ring::combine::Vantage;
use crate::ring::handover::Assignment;
use crate::ring::members::Member;
use crate::ring::ownership::Ownership;
use crate::ring::rendezvous::{member_hash, owners, target_hash};

const REPLICATION: usize = 2;

fn member(name: &str) -> Member {
    Member {
        identity: name.into(),
        hash: member_hash(name),
        peer: None,
    }
}

/// One replica (`me`, the first of `ring`) and the script it is shown.
struct Replica {
    h: Harness,
    keys: Vec<String>,
    ownership: Arc<Ownership>,
}

impl Replica {
    fn new(n: usize, ring: &[Member]) -> Replica {
        let h = Harness::new(plan(n, "", ""));
        let keys: Vec<String> = h.core.plan.targets.iter().map(|t| t.key()).collect();
        let ownership = Arc::new(Ownership::new(Assignment::new(
            ring[0].hash,
            REPLICATION,
            Duration::from_secs(2),
        )));
        for key in &keys {
            ownership.gate(key);
        }
        let mut r = Replica { h, keys, ownership };
        let _ = r.ownership.ring(ring.to_vec(), r.h.now.mono);
        r.h.core.share_verdicts(r.ownership.clone());
        r
    }

    /// The targets member `m` (a place in `ring`) owns in `ring`.
    fn owned(&self, ring: &[Member], m: usize) -> BTreeSet<usize> {
        let hashes: Vec<u64> = ring.iter().map(|m| m.hash).collect();
        (0..self.keys.len())
            .filter(|&t| owners(target_hash(&self.keys[t]), &hashes, REPLICATION).contains(&m))
            .collect()
    }

    /// Every other member of `ring` streams its whole state in pieces of `piece`: its
    /// verdict of each target it owns, as `down` says.
    fn streams(&mut self, ring: &[Member], down: &[bool], piece: usize) {
        for m in 1..ring.len() {
            let owned: Vec<usize> = self.owned(ring, m).into_iter().collect();
            let pieces: Vec<&[usize]> = if owned.is_empty() {
                vec![&[]]
            } else {
                owned.chunks(piece).collect()
            };
            for (i, targets) in pieces.iter().enumerate() {
                let verdicts = targets
                    .iter()
                    .map(|&t| {
                        let health = if down[t] { Health::Down } else { Health::Up };
                        let vantage = Vantage {
                            health,
                            impaired: false,
                        };
                        (self.keys[t].clone(), vantage)
                    })
                    .collect();
                let part = Part::Whole {
                    first: i == 0,
                    last: i + 1 == pieces.len(),
                };
                let mut fx = Vec::new();
                let now = self.h.now;
                self.h
                    .core
                    .vantages(&ring[m].identity, part, verdicts, now, &mut fx);
                self.h.take(fx);
            }
        }
    }

    /// This replica probes `targets` twice (`fall` is 2), as `down` says.
    fn probes(&mut self, targets: &BTreeSet<usize>, down: &[bool]) {
        for _ in 0..2 {
            let results: Vec<(TargetId, bool)> =
                targets.iter().map(|&t| (t as TargetId, !down[t])).collect();
            self.h.observe(&results);
            self.h.advance(Duration::from_millis(100));
        }
    }

    /// Member `victim` of `ring` dies: its Lease lapses and the ring is listed without it,
    /// so it leaves and this replica (owning `mine` before) gains some of its targets. The
    /// gates that open are exactly those; none closes (make before break). The survivors
    /// and the targets gained.
    fn dies(
        &mut self,
        ring: &[Member],
        victim: usize,
        mine: &BTreeSet<usize>,
    ) -> (Vec<Member>, BTreeSet<usize>) {
        let survivors: Vec<Member> = (0..ring.len())
            .filter(|&m| m != victim)
            .map(|m| ring[m].clone())
            .collect();
        let moves = self.ownership.ring(survivors.clone(), self.h.now.mono);
        let gained: BTreeSet<usize> = self
            .owned(&survivors, 0)
            .difference(mine)
            .copied()
            .collect();
        let opened: BTreeSet<u64> = moves.opened.iter().copied().collect();
        let gained_hashes = gained.iter().map(|&t| target_hash(&self.keys[t])).collect();
        assert_eq!(opened, gained_hashes, "the gates opened");
        assert!(moves.closed.is_empty(), "make before break");
        let mut fx = Vec::new();
        let now = self.h.now;
        self.h
            .core
            .forget_member(&ring[victim].identity, now, &mut fx);
        self.h.core.probing(&moves.opened, true, now, &mut fx);
        self.h.take(fx);
        (survivors, gained)
    }

    fn own(&self) -> BTreeSet<String> {
        self.h.core.own_verdicts().iter().map(|(k, _)| k).collect()
    }

    fn keys_of(&self, targets: &BTreeSet<usize>) -> BTreeSet<String> {
        targets.iter().map(|&t| self.keys[t].clone()).collect()
    }
}

/// The answer the script expects: every endpoint whose target is not down.
fn expected(down: &[bool]) -> Vec<u8> {
    (0..down.len())
        .filter(|&t| !down[t])
        .map(|t| t as u8 + 1)
        .collect()
}

#[test]
fn a_replica_takes_over_a_dead_members_targets_without_a_gap() {
    for seed in 1..=16u64 {
        let mut dice = fastrand::Rng::with_seed(
            0x9e37_79b9_7f4a_7c15 ^ seed.wrapping_mul(0x2545_f491_4f6c_dd1d),
        );
        let n = 16 + dice.u64(..40) as usize;
        let ring: Vec<Member> = ["me", "b", "c", "d"].into_iter().map(member).collect();
        let mut r = Replica::new(n, &ring);
        let down: Vec<bool> = (0..n).map(|_| dice.u64(..10) == 0).collect();

        let mine = r.owned(&ring, 0);
        r.streams(&ring, &down, usize::MAX);
        r.probes(&mine, &down);
        assert!(r.h.core.ready(), "seed {seed}");
        assert_eq!(
            r.h.hosts(),
            expected(&down),
            "seed {seed}: before the death"
        );
        assert_eq!(
            r.own(),
            r.keys_of(&mine),
            "seed {seed}: own verdicts, no others"
        );

        let victim = 1 + dice.u64(..3) as usize;
        let (survivors, gained) = r.dies(&ring, victim, &mine);
        r.h.advance(Duration::from_millis(100));
        assert_eq!(
            r.h.hosts(),
            expected(&down),
            "seed {seed}: no gap while the gained targets are unprobed here"
        );

        // Verdicts change; the survivors stream theirs at once, this replica answers with
        // them before its own first probe of what it gained...
        let later: Vec<bool> = down.iter().map(|&d| d ^ (dice.u64(..5) == 0)).collect();
        r.streams(&survivors, &later, 1 + dice.u64(..8) as usize);
        r.h.advance(Duration::from_millis(100));
        let not_mine = |hosts: Vec<u8>| -> Vec<u8> {
            let mine_before = |a: &u8| mine.contains(&(usize::from(*a) - 1));
            hosts.into_iter().filter(|a| !mine_before(a)).collect()
        };
        assert_eq!(
            not_mine(r.h.hosts()),
            not_mine(expected(&later)),
            "seed {seed}: the owners' verdicts decide"
        );
        // ...then probes them itself: its verdicts count and go to the others.
        let shared_before = r.h.shared.len();
        let now_mine: BTreeSet<usize> = mine.union(&gained).copied().collect();
        r.probes(&now_mine, &later);
        assert_eq!(
            r.h.hosts(),
            expected(&later),
            "seed {seed}: after the take-over"
        );
        assert_eq!(r.own(), r.keys_of(&now_mine), "seed {seed}");
        let told: BTreeSet<String> = r.h.shared[shared_before..]
            .iter()
            .map(|(k, _)| k.clone())
            .collect();
        assert!(
            r.keys_of(&gained).is_subset(&told),
            "seed {seed}: its first verdicts of gained targets are streamed"
        );
    }
}

/// Members join, leave and die (this replica stays, probing nothing itself) while verdicts
/// change; after each change of the ring its owners stream their whole states, in pieces.
/// Every answer is what the owners' verdicts say, no answer is empty, and a verdict changes
/// only where the script changed it: no target comes and goes while its owners move.
#[test]
fn as_ownership_moves_every_answer_is_the_owners_verdicts() {
    let names = ["me", "b", "c", "d", "e", "f"];
    for seed in 1..=16u64 {
        let mut dice = fastrand::Rng::with_seed(
            0x2545_f491_4f6c_dd1d ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15),
        );
        let n = 16 + dice.u64(..40) as usize;
        let mut ring: Vec<Member> = names[..3].iter().copied().map(member).collect();
        let mut r = Replica::new(n, &ring);
        let mut events = r.h.core.events.follow();
        let mut down: Vec<bool> = (0..n).map(|t| t > 0 && dice.u64(..10) == 0).collect();
        r.streams(&ring, &down, 1 + dice.u64(..8) as usize);
        let mut changed = n;
        for step in 0..20 {
            let others: Vec<usize> = (1..names.len())
                .filter(|&i| !ring.iter().any(|m| m.identity == names[i]))
                .collect();
            if ring.len() > 2 && (others.is_empty() || dice.u64(..2) == 0) {
                let gone = ring.remove(1 + dice.u64(..ring.len() as u64 - 1) as usize);
                r.ring_is(&ring, Some(&gone.identity));
            } else {
                ring.push(member(
                    names[others[dice.u64(..others.len() as u64) as usize]],
                ));
                r.ring_is(&ring, None);
            }
            // The first target stays up: an answer is never empty by the script.
            for d in down.iter_mut().skip(1) {
                if dice.u64(..5) == 0 {
                    *d = !*d;
                    changed += 1;
                }
            }
            r.streams(&ring, &down, 1 + dice.u64(..8) as usize);
            r.h.advance(Duration::from_millis(100));
            let at = format!("seed {seed}, step {step}");
            assert_eq!(r.h.hosts(), expected(&down), "{at}");
            let mut transitions = 0;
            while let Ok(event) = events.try_recv() {
                transitions +=
                    usize::from(matches!(*event, crate::events::Event::Transition { .. }));
            }
            assert_eq!(transitions, changed, "{at}: transitions");
            changed = 0;
        }
    }
}

impl Replica {
    /// The ring is listed as `ring` (`gone` left it): the tracker forgets the member that
    /// left and is told which gates opened and closed.
    fn ring_is(&mut self, ring: &[Member], gone: Option<&str>) {
        let now = self.h.now;
        let moves = self.ownership.ring(ring.to_vec(), now.mono);
        let mut fx = Vec::new();
        if let Some(gone) = gone {
            self.h.core.forget_member(gone, now, &mut fx);
        }
        self.h.core.probing(&moves.opened, true, now, &mut fx);
        self.h.core.probing(&moves.closed, false, now, &mut fx);
        self.h.take(fx);
    }
}
