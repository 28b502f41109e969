//! Which targets this replica probes, as rings change: make-before-break. A target it
//! gains is probed at its next slot (its own phase, so thousands gained at once are spread
//! like every probe, not a burst); a target it loses is probed on for the grace after the
//! change was seen: the Lease duration, or the longest check interval when that is longer,
//! by which time its new owner (which saw the same Leases) has probed it. So no target goes
//! unprobed while ownership moves, and for the grace a moved target has one vantage more
//! than the replication.

use std::time::Duration;

use tokio::time::Instant;

use super::members::Member;
use super::rendezvous::owners;

/// The ring now and the rings just left.
#[derive(Debug)]
pub struct Assignment {
    me: u64,
    replication: usize,
    /// The shortest grace: the Lease duration.
    lease: Duration,
    grace: Duration,
    current: Vec<Member>,
    hashes: Vec<u64>,
    /// Rings left within the grace, each with when its targets stop being probed here.
    leaving: Vec<(Vec<u64>, Instant)>,
}

impl Assignment {
    /// No ring yet (`me`: this replica's member hash): it probes nothing until the first
    /// listing of the Leases, which is not a change of owners (a replica starting among
    /// others must not probe everything for the grace).
    pub fn new(me: u64, replication: usize, lease: Duration) -> Assignment {
        Assignment {
            me,
            replication,
            lease,
            grace: lease,
            current: Vec::new(),
            hashes: Vec::new(),
            leaving: Vec::new(),
        }
    }

    /// The grace for targets probed every `longest_interval` at most: the Lease duration, or
    /// that interval when it is longer (a new owner's first probe may be an interval away).
    pub fn fit_grace(&mut self, longest_interval: Duration) {
        self.grace = self.lease.max(longest_interval);
    }

    /// The live members now; `true` when the ring changed (the caller re-assigns).
    pub fn ring(&mut self, live: Vec<Member>, now: Instant) -> bool {
        let hashes: Vec<u64> = live.iter().map(|m| m.hash).collect();
        if hashes == self.hashes {
            self.current = live;
            return false;
        }
        let old = std::mem::replace(&mut self.hashes, hashes);
        if !old.is_empty() {
            self.leaving.push((old, now + self.grace));
        }
        self.current = live;
        true
    }

    /// Forgets rings whose grace ended; `true` when one did (the caller re-assigns).
    pub fn expire(&mut self, now: Instant) -> bool {
        let before = self.leaving.len();
        self.leaving.retain(|(_, until)| *until > now);
        self.leaving.len() != before
    }

    /// When the next left ring's grace ends.
    pub fn next_expiry(&self) -> Option<Instant> {
        self.leaving.iter().map(|(_, until)| *until).min()
    }

    /// The live members.
    pub fn members(&self) -> &[Member] {
        &self.current
    }

    /// The members owning `target` (its [`super::rendezvous::target_hash`]), best first.
    pub fn owners(&self, target: u64) -> Vec<&Member> {
        owners(target, &self.hashes, self.replication)
            .into_iter()
            .map(|i| &self.current[i])
            .collect()
    }

    /// This replica's member hash, the current ring's member hashes and those of the rings
    /// it still probes for: what [`Assignment::probes`] reads.
    #[cfg(test)]
    pub fn rings(&self) -> (u64, impl Iterator<Item = &[u64]>) {
        let left = self.leaving.iter().map(|(ring, _)| ring.as_slice());
        (self.me, std::iter::once(self.hashes.as_slice()).chain(left))
    }

    /// Whether this replica owns `target` in the current ring.
    pub fn owns(&self, target: u64) -> bool {
        owners(target, &self.hashes, self.replication)
            .iter()
            .any(|i| self.hashes[*i] == self.me)
    }

    /// Whether this replica probes `target`: it owns it, or owned it in a ring left less
    /// than the grace ago.
    pub fn probes(&self, target: u64) -> bool {
        self.owns(target)
            || self.leaving.iter().any(|(ring, _)| {
                owners(target, ring, self.replication)
                    .iter()
                    .any(|i| ring[*i] == self.me)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::super::rendezvous::{member_hash, target_hash};
    use super::*;

    fn member(name: &str) -> Member {
        Member {
            identity: name.into(),
            hash: member_hash(name),
            peer: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_lost_target_is_probed_for_the_grace_then_dropped() {
        let t0 = Instant::now();
        let grace = Duration::from_secs(15);
        let a = member("a");
        let mut x = Assignment::new(a.hash, 1, grace);
        let keys: Vec<u64> = (0..200)
            .map(|i| target_hash(&format!("tcp://10.0.0.{i}:80")))
            .collect();
        assert!(keys.iter().all(|k| !x.probes(*k)), "no ring yet: nothing");
        assert!(x.ring(vec![a.clone()], t0));
        assert_eq!(x.next_expiry(), None, "the first ring is not a change");
        assert!(keys.iter().all(|k| x.owns(*k)), "alone, it owns everything");
        assert!(x.ring(vec![a.clone(), member("b")], t0));
        assert!(
            !x.ring(vec![a.clone(), member("b")], t0),
            "same ring: no change"
        );
        let lost: Vec<u64> = keys.iter().copied().filter(|k| !x.owns(*k)).collect();
        assert!(
            lost.len() > 60 && lost.len() < 140,
            "{} of 200 moved",
            lost.len()
        );
        assert!(lost.iter().all(|k| x.probes(*k)), "make before break");
        assert_eq!(x.next_expiry(), Some(t0 + grace));
        assert!(!x.expire(t0 + grace - Duration::from_millis(1)));
        assert!(x.expire(t0 + grace));
        assert!(lost.iter().all(|k| !x.probes(*k)));
        assert!(keys
            .iter()
            .filter(|k| !lost.contains(k))
            .all(|k| x.probes(*k)));
    }

    /// Checks every 80 s and a 15 s Lease: the new owner's first probe may be 80 s away, so
    /// the old owner probes on that long.
    #[tokio::test(start_paused = true)]
    async fn the_grace_covers_the_longest_interval() {
        let t0 = Instant::now();
        let a = member("a");
        let mut x = Assignment::new(a.hash, 1, Duration::from_secs(15));
        x.fit_grace(Duration::from_secs(80));
        x.ring(vec![a.clone()], t0);
        x.ring(vec![a, member("b")], t0);
        assert_eq!(x.next_expiry(), Some(t0 + Duration::from_secs(80)));
        x.fit_grace(Duration::from_secs(1));
        x.ring(vec![member("a")], t0);
        assert_eq!(
            x.next_expiry(),
            Some(t0 + Duration::from_secs(15)),
            "never shorter than the Lease: the newest ring's grace is the first to end"
        );
    }
}
