//! The targets this replica probes: one [`Gate`] per target, open while the [`Assignment`]
//! says this replica probes it. The engine's prober pool follows the gates
//! ([`Ownership::follow`]): a target has a prober only while its gate is open, so a
//! replica of a ring of 4 at 200,000 targets holds 50,000 probers, not 200,000.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::time::Instant;

use super::handover::Assignment;
use super::members::Member;
use super::rendezvous::target_hash;

/// Whether this replica probes one target.
#[derive(Debug, Default)]
pub struct Gate {
    open: AtomicBool,
}

impl Gate {
    /// Whether the target is probed here now.
    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    fn set(&self, open: bool) -> bool {
        self.open.swap(open, Ordering::AcqRel) != open
    }
}

/// What follows the gates: called after gates moved, with no lock of the ownership held.
pub type Follower = Box<dyn Fn() + Send + Sync>;

/// The gates of every target, and the assignment that sets them.
pub struct Ownership {
    inner: Mutex<Inner>,
    follower: OnceLock<Follower>,
}

struct Inner {
    assignment: Assignment,
    /// Target hash ([`target_hash`]) -> its gate. Keyed by the hash, not the key: owners
    /// are chosen by the hash alone, so targets whose keys hash alike share their owners
    /// and may share a gate, and a replica keeps no copy of every target's key here.
    gates: HashMap<u64, Arc<Gate>>,
    /// How many targets each member owns, in member order, until the ring or the targets
    /// change: counting hashes every target, and the ring is judged at every Lease change.
    owned: Option<Vec<usize>>,
}

/// Gates a change opened and closed, by target hash ([`target_hash`]).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Moves {
    pub opened: Vec<u64>,
    pub closed: Vec<u64>,
}

impl Ownership {
    pub fn new(assignment: Assignment) -> Ownership {
        Ownership {
            inner: Mutex::new(Inner {
                assignment,
                gates: HashMap::new(),
                owned: None,
            }),
            follower: OnceLock::new(),
        }
    }

    /// Has `follower` called whenever [`Ownership::ring`] or [`Ownership::expire`] moved a
    /// gate (once: the engine's prober pool).
    pub fn follow(&self, follower: Follower) {
        let first = self.follower.set(follower).is_ok();
        assert!(first, "one prober pool follows an ownership");
    }

    fn moved(&self, moves: Moves) -> Moves {
        if !(moves.opened.is_empty() && moves.closed.is_empty()) {
            if let Some(follower) = self.follower.get() {
                follower();
            }
        }
        moves
    }

    /// The gate of the target with this key (made on first asking, open as the assignment
    /// says).
    pub fn gate(&self, key: &str) -> Arc<Gate> {
        let hash = target_hash(key);
        let mut inner = self.inner.lock().expect("not poisoned");
        if let Some(gate) = inner.gates.get(&hash) {
            return gate.clone();
        }
        let gate = Arc::new(Gate::default());
        gate.set(inner.assignment.probes(hash));
        inner.gates.insert(hash, gate.clone());
        inner.owned = None;
        gate
    }

    /// Fits the make-before-break grace to the targets' longest check interval.
    pub fn fit_grace(&self, longest_interval: std::time::Duration) {
        let mut inner = self.inner.lock().expect("not poisoned");
        inner.assignment.fit_grace(longest_interval);
    }

    /// Whether this replica probes the target with this key now.
    pub fn probes(&self, key: &str) -> bool {
        let inner = self.inner.lock().expect("not poisoned");
        inner.assignment.probes(target_hash(key))
    }

    /// Keeps only the gates of these target hashes (a reload removed the others' probers).
    pub fn retain(&self, hashes: &std::collections::HashSet<u64>) {
        let mut inner = self.inner.lock().expect("not poisoned");
        inner.gates.retain(|h, _| hashes.contains(h));
        inner.owned = None;
    }

    /// A new view of the live members; the gates it moved.
    pub fn ring(&self, live: Vec<Member>, now: Instant) -> Moves {
        let mut inner = self.inner.lock().expect("not poisoned");
        let moves = if inner.assignment.ring(live, now) {
            inner.owned = None;
            inner.reassign()
        } else {
            Moves::default()
        };
        drop(inner);
        self.moved(moves)
    }

    /// Ends the make-before-break grace of rings left long enough ago; the gates it closed.
    pub fn expire(&self, now: Instant) -> Moves {
        let mut inner = self.inner.lock().expect("not poisoned");
        let moves = if inner.assignment.expire(now) {
            inner.reassign()
        } else {
            Moves::default()
        };
        drop(inner);
        self.moved(moves)
    }

    /// When [`Ownership::expire`] has work next.
    pub fn next_expiry(&self) -> Option<Instant> {
        self.inner
            .lock()
            .expect("not poisoned")
            .assignment
            .next_expiry()
    }

    /// The live members, and how many of the known targets each owns.
    pub fn members(&self) -> Vec<(Member, usize)> {
        let mut inner = self.inner.lock().expect("not poisoned");
        let members = inner.assignment.members().to_vec();
        let counts = match inner.owned.take() {
            Some(counts) => counts,
            None => inner.count_owned(&members),
        };
        inner.owned = Some(counts.clone());
        members.into_iter().zip(counts).collect()
    }

    /// How many gates are open.
    pub fn probing_count(&self) -> usize {
        let inner = self.inner.lock().expect("not poisoned");
        inner.gates.values().filter(|g| g.is_open()).count()
    }
}

impl Inner {
    fn count_owned(&self, members: &[Member]) -> Vec<usize> {
        let mut counts = vec![0usize; members.len()];
        for hash in self.gates.keys() {
            for owner in self.assignment.owners(*hash) {
                if let Some(i) = members.iter().position(|m| m.hash == owner.hash) {
                    counts[i] += 1;
                }
            }
        }
        counts
    }

    fn reassign(&mut self) -> Moves {
        let mut moves = Moves::default();
        for (hash, gate) in &self.gates {
            let open = self.assignment.probes(*hash);
            if gate.set(open) {
                if open {
                    moves.opened.push(*hash);
                } else {
                    moves.closed.push(*hash);
                }
            }
        }
        moves
    }
}
