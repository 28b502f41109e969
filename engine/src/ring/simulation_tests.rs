//! The membership and ownership core at the scale, in virtual time: 1,000,000
//! targets on 10 replicas that renew their Leases every 5 s and list the ring's Leases every
//! 2 s, each at its own phase, with a Lease duration of 15 s. Replicas join, leave (deleting
//! their Lease) and die (their Lease stops changing); the test checks balance, how many
//! owner slots move, that no target is ever left unprobed by a live replica while a single
//! replica dies, and that every view converges on the same ring of live replicas.
//!
//! Coverage is read from each replica's own [`Assignment`] (its current ring and the rings
//! it still probes for), with each distinct ring's owners computed once for all targets.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use tokio::time::Instant;

use super::handover::Assignment;
use super::members::{Members, Sighting};
use super::rendezvous::{member_hash, owners, target_hash};

const TARGETS: usize = 1_000_000;
const REPLICATION: usize = 2;
const LEASE: Duration = Duration::from_secs(15);
const RENEW: Duration = Duration::from_secs(5);
const LIST: Duration = Duration::from_secs(2);
const TICK: Duration = Duration::from_millis(100);

struct Replica {
    identity: String,
    members: Members,
    assignment: Assignment,
    alive: bool,
    /// Offset of its renewals and listings within their periods.
    phase: Duration,
}

/// Member hash -> the targets it owns, one bit per target.
type Owned = BTreeMap<u64, Vec<u64>>;

struct World {
    t0: Instant,
    now: Duration,
    /// Lease name -> (resourceVersion, renewed at).
    leases: BTreeMap<String, (u64, Duration)>,
    version: u64,
    replicas: Vec<Replica>,
    targets: Vec<u64>,
    /// Each distinct ring's targets per member, as bit sets over the target list.
    owners: HashMap<Vec<u64>, Owned>,
    /// Coverage is checked once the first ring formed, at each new set of views.
    checked: Option<Vec<(u64, Vec<Vec<u64>>)>>,
}

impl World {
    fn new(n: usize) -> World {
        let targets = (0..TARGETS)
            .map(|i| {
                let (a, b, c) = (i >> 16, (i >> 8) & 255, i & 255);
                target_hash(&format!("http://10.{a}.{b}.{c}:8080/healthz"))
            })
            .collect();
        let mut w = World {
            t0: Instant::now(),
            now: Duration::ZERO,
            leases: BTreeMap::new(),
            version: 0,
            replicas: Vec::new(),
            targets,
            owners: HashMap::new(),
            checked: None,
        };
        for i in 0..n {
            w.join(i);
        }
        w
    }

    fn join(&mut self, i: usize) {
        let identity = format!("ho-{i}");
        self.replicas.push(Replica {
            members: Members::new(identity.clone(), LEASE, RENEW),
            assignment: Assignment::new(member_hash(&identity), REPLICATION, LEASE),
            identity,
            alive: true,
            phase: Duration::from_millis(100 * (7 * i as u64 % 20)),
        });
    }

    /// Runs until `until`; returns the times (since start) at which any view changed.
    fn run(&mut self, until: Duration) -> Vec<Duration> {
        let mut changes = Vec::new();
        while self.now < until {
            self.now += TICK;
            let now = self.t0 + self.now;
            let mut changed = false;
            for r in 0..self.replicas.len() {
                if !self.replicas[r].alive {
                    continue;
                }
                let Some(local) = self.now.checked_sub(self.replicas[r].phase) else {
                    continue;
                };
                if local.as_millis() % RENEW.as_millis() == 0 {
                    self.version += 1;
                    let identity = self.replicas[r].identity.clone();
                    self.leases.insert(identity, (self.version, self.now));
                }
                if local.as_millis() % LIST.as_millis() == 0 {
                    let sightings = self.sightings();
                    let replica = &mut self.replicas[r];
                    replica.members.listed(sightings, now);
                    changed |= replica.assignment.ring(replica.members.live(now), now);
                }
                changed |= self.replicas[r].assignment.expire(now);
            }
            if changed {
                changes.push(self.now);
                if self.checked.is_some() {
                    self.check_coverage();
                }
            }
        }
        changes
    }

    fn sightings(&self) -> Vec<Sighting> {
        self.leases
            .iter()
            .map(|(identity, (version, renewed))| Sighting {
                identity: identity.clone(),
                peer: None,
                version: version.to_string(),
                renewed_ago: Some(self.now - *renewed),
            })
            .collect()
    }

    fn owners_of(&mut self, ring: &[u64]) -> &Owned {
        if !self.owners.contains_key(ring) {
            let mut owned: Owned = ring
                .iter()
                .map(|m| (*m, vec![0u64; TARGETS.div_ceil(64)]))
                .collect();
            for (t, hash) in self.targets.iter().enumerate() {
                for i in owners(*hash, ring, REPLICATION) {
                    owned.get_mut(&ring[i]).unwrap()[t / 64] |= 1 << (t % 64);
                }
            }
            self.owners.insert(ring.to_vec(), owned);
        }
        &self.owners[ring]
    }

    /// Every target is probed by at least one live replica (a replica with no ring yet
    /// probes nothing: it is not counted).
    fn check_coverage(&mut self) {
        let views: Vec<(u64, Vec<Vec<u64>>)> = self
            .replicas
            .iter()
            .filter(|r| r.alive)
            .map(|r| {
                let (me, rings) = r.assignment.rings();
                (
                    me,
                    rings
                        .filter(|r| !r.is_empty())
                        .map(<[u64]>::to_vec)
                        .collect(),
                )
            })
            .collect();
        if self.checked.as_ref() == Some(&views) {
            return;
        }
        for (_, rings) in &views {
            for ring in rings {
                self.owners_of(ring);
            }
        }
        let mut probed = vec![0u64; TARGETS.div_ceil(64)];
        for (me, rings) in &views {
            for ring in rings {
                for (word, mine) in probed.iter_mut().zip(&self.owners[ring][me]) {
                    *word |= mine;
                }
            }
        }
        let unprobed = TARGETS
            - probed
                .iter()
                .map(|w| w.count_ones() as usize)
                .sum::<usize>();
        assert_eq!(
            unprobed, 0,
            "at {:?}: {unprobed} targets unprobed",
            self.now
        );
        self.checked = Some(views);
    }

    /// The ring every live replica sees, asserting they agree.
    fn agreed_ring(&self) -> Vec<u64> {
        let rings: Vec<Vec<u64>> = self
            .replicas
            .iter()
            .filter(|r| r.alive)
            .map(|r| r.assignment.members().iter().map(|m| m.hash).collect())
            .collect();
        assert!(
            rings.windows(2).all(|w| w[0] == w[1]),
            "views differ at {:?}",
            self.now
        );
        rings[0].clone()
    }

    /// Owner slots that differ between two rings, as a share of all slots.
    fn moved(&mut self, a: &[u64], b: &[u64]) -> f64 {
        self.owners_of(a);
        self.owners_of(b);
        let (before, after) = (&self.owners[a], &self.owners[b]);
        let none = vec![0u64; TARGETS.div_ceil(64)];
        let moved: u32 = before
            .iter()
            .map(|(m, was)| {
                let now = after.get(m).unwrap_or(&none);
                was.iter()
                    .zip(now)
                    .map(|(w, n)| (w & !n).count_ones())
                    .sum::<u32>()
            })
            .sum();
        f64::from(moved) / (TARGETS * REPLICATION) as f64
    }
}

#[tokio::test(start_paused = true)]
async fn a_million_targets_on_ten_replicas_through_joins_leaves_and_deaths() {
    let mut w = World::new(10);
    // The ring forms (each replica starts alone and sees the others as they renew) and
    // the rings of its forming are left behind; coverage is checked from then on.
    w.run(Duration::from_secs(10) + LEASE + LIST);
    let ten = w.agreed_ring();
    assert_eq!(ten.len(), 10);
    w.check_coverage();

    // Balance: each replica owns 1/N of the slots within 10 %.
    let mean = (TARGETS * REPLICATION / 10) as f64;
    for (m, owned) in w.owners_of(&ten) {
        let n = f64::from(owned.iter().map(|w| w.count_ones()).sum::<u32>());
        eprintln!(
            "member {m:016x} owns {n} slots ({:+.2} % of 1/N)",
            100.0 * (n - mean) / mean
        );
        assert!((n - mean).abs() < 0.1 * mean, "member {m:x} owns {n}");
    }

    // A join moves about 1/N of the slots, all of them to the newcomer.
    w.join(10);
    let joined_at = w.now;
    w.run(joined_at + LEASE + LIST);
    let eleven = w.agreed_ring();
    assert_eq!(eleven.len(), 11);
    let moved = w.moved(&ten, &eleven);
    eprintln!(
        "a join moved {moved:.4} of the owner slots (1/N = {:.4})",
        1.0 / 11.0
    );
    assert!(
        moved <= 1.0 / 11.0 + 0.05,
        "a join moved {moved:.4} of the slots"
    );
    assert!(moved >= 1.0 / 11.0 - 0.01, "a join moved only {moved:.4}");

    // A leave (the Lease deleted at shutdown): seen at each replica's next listing.
    w.replicas[10].alive = false;
    w.leases.remove("ho-10");
    let left_at = w.now;
    let changes = w.run(left_at + LEASE + LIST);
    assert!(
        changes[0] - left_at <= LIST,
        "a leave is seen within one listing"
    );
    assert_eq!(w.agreed_ring(), ten);
    let moved = w.moved(&eleven, &ten);
    eprintln!("a leave moved {moved:.4} of the owner slots");
    assert!(
        moved <= 1.0 / 11.0 + 0.05,
        "a leave moved {moved:.4} of the slots"
    );

    // A death: ho-3's Lease stands still. Until every view drops it, its targets keep
    // their other owner (coverage is checked at every change); afterwards all views agree
    // on nine members and every target has two live owners again.
    w.replicas[3].alive = false;
    let killed_at = w.now;
    let changes = w.run(killed_at + LEASE + RENEW + 2 * LIST);
    let nine = w.agreed_ring();
    assert_eq!(nine.len(), 9);
    assert!(!nine.contains(&member_hash("ho-3")));
    let settled = *changes.first().unwrap() - killed_at;
    assert!(
        settled <= LEASE + RENEW + LIST,
        "the first view dropped the dead replica after {settled:?}"
    );
    let last = w.replicas.iter().filter(|r| r.alive).count();
    assert_eq!(last, 9);
    let owned = w.owners_of(&nine);
    let slots: u32 = owned.values().flatten().map(|w| w.count_ones()).sum();
    assert_eq!(slots as usize, 2 * TARGETS, "two live owners per target");
    let moved = w.moved(&ten, &nine);
    eprintln!(
        "a death moved {moved:.4}; first view dropped it after {settled:?}, the last after {:?}",
        *changes.last().unwrap() - killed_at
    );
    assert!(
        moved <= 1.0 / 10.0 + 0.05,
        "a death moved {moved:.4} of the slots"
    );
}
