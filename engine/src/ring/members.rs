//! Who is in the ring: every replica holds a Lease of its own and renews it; a member is
//! live while its Lease keeps changing. Freshness is judged as the writer election judges
//! it (`kube/src/lease.rs`): by the Lease's resourceVersion changing, on this process's
//! monotonic clock, never by comparing another machine's `renewTime` with ours, except
//! once: a Lease seen for the first time whose `renewTime` is already older than the Lease
//! duration (a replica that died before we started) is not counted live.
//!
//! Time stands still while the API server cannot be read: liveness is judged at the last
//! successful listing, so an outage of the API server changes nobody's ownership (every
//! member keeps probing what it owns) instead of making each replica think it is alone.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use super::rendezvous::member_hash;

/// One Lease of the ring as a listing found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sighting {
    /// The replica's identity (the Lease's holder).
    pub identity: String,
    /// Where its verdict stream listens (`host:port`), from the Lease's annotation.
    pub peer: Option<String>,
    /// The Lease's resourceVersion: changes at each renewal.
    pub version: String,
    /// How long ago its `renewTime` was by this machine's wall clock, when known; read
    /// only the first time a Lease is seen.
    pub renewed_ago: Option<Duration>,
}

/// A live member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its identity.
    pub identity: String,
    /// Its [`member_hash`].
    pub hash: u64,
    /// Where its verdict stream listens.
    pub peer: Option<String>,
}

/// What this replica knows of the ring's Leases.
#[derive(Debug)]
pub struct Members {
    me: String,
    lease_duration: Duration,
    seen: BTreeMap<String, Seen>,
    /// The last successful listing: liveness is judged then.
    listed: Option<Instant>,
}

#[derive(Debug)]
struct Seen {
    peer: Option<String>,
    version: String,
    /// When its version last changed (this process's clock); `None`: stale at first sight.
    changed: Option<Instant>,
}

impl Members {
    /// `me` is always a member: a replica probes its share until it stops.
    pub fn new(me: String, lease_duration: Duration) -> Members {
        Members {
            me,
            lease_duration,
            seen: BTreeMap::new(),
            listed: None,
        }
    }

    /// This replica's identity.
    pub fn me(&self) -> &str {
        &self.me
    }

    /// A successful listing of the ring's Leases at `now`: a Lease missing from it is gone
    /// (its replica left and deleted it).
    pub fn listed(&mut self, sightings: Vec<Sighting>, now: Instant) {
        let mut seen = BTreeMap::new();
        for s in sightings {
            let changed = match self.seen.remove(&s.identity) {
                Some(old) if old.version == s.version => old.changed,
                Some(_) => Some(now),
                None => {
                    let stale = s.renewed_ago.is_some_and(|ago| ago > self.lease_duration);
                    (!stale).then_some(now)
                }
            };
            seen.insert(
                s.identity,
                Seen {
                    peer: s.peer,
                    version: s.version,
                    changed,
                },
            );
        }
        self.seen = seen;
        self.listed = Some(now);
    }

    /// The live members, by identity: this replica, and every other whose Lease changed
    /// within the Lease duration before the last listing.
    pub fn live(&self) -> Vec<Member> {
        let mut live: BTreeMap<&str, Option<String>> = BTreeMap::new();
        live.insert(
            &self.me,
            self.seen.get(&self.me).and_then(|s| s.peer.clone()),
        );
        for (identity, seen) in &self.seen {
            let fresh = match (seen.changed, self.listed) {
                (Some(changed), Some(listed)) => {
                    listed.saturating_duration_since(changed) <= self.lease_duration
                }
                _ => false,
            };
            if fresh {
                live.insert(identity, seen.peer.clone());
            }
        }
        live.into_iter()
            .map(|(identity, peer)| Member {
                identity: identity.to_owned(),
                hash: member_hash(identity),
                peer,
            })
            .collect()
    }

    /// Every Lease seen, with how long it has stood still (at the last listing), for
    /// `/status`.
    pub fn leases(&self) -> Vec<(String, Option<Duration>)> {
        self.seen
            .iter()
            .map(|(identity, seen)| {
                let age = seen
                    .changed
                    .zip(self.listed)
                    .map(|(c, l)| l.saturating_duration_since(c));
                (identity.clone(), age)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sight(identity: &str, version: &str) -> Sighting {
        Sighting {
            identity: identity.into(),
            peer: Some(format!("{identity}:7946")),
            version: version.into(),
            renewed_ago: Some(Duration::from_secs(1)),
        }
    }

    fn names(m: &Members) -> Vec<String> {
        m.live().into_iter().map(|m| m.identity).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_that_stops_changing_lapses_after_the_lease_duration() {
        let t0 = Instant::now();
        let mut m = Members::new("a".into(), Duration::from_secs(15));
        m.listed(vec![sight("a", "1"), sight("b", "7")], t0);
        assert_eq!(names(&m), ["a", "b"]);
        m.listed(
            vec![sight("a", "2"), sight("b", "7")],
            t0 + Duration::from_secs(15),
        );
        assert_eq!(
            names(&m),
            ["a", "b"],
            "exactly the lease duration: still live"
        );
        m.listed(
            vec![sight("a", "3"), sight("b", "7")],
            t0 + Duration::from_secs(16),
        );
        assert_eq!(names(&m), ["a"]);
        m.listed(
            vec![sight("a", "4"), sight("b", "8")],
            t0 + Duration::from_secs(17),
        );
        assert_eq!(names(&m), ["a", "b"], "renewed again: back");
    }

    #[tokio::test(start_paused = true)]
    async fn an_unreadable_api_server_changes_nobody() {
        let t0 = Instant::now();
        let mut m = Members::new("a".into(), Duration::from_secs(15));
        m.listed(vec![sight("a", "1"), sight("b", "7")], t0);
        // No listing for a minute: judged at the last one, b stays.
        assert_eq!(names(&m), ["a", "b"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_deleted_lease_leaves_at_once_and_a_stale_one_never_joins() {
        let t0 = Instant::now();
        let mut m = Members::new("a".into(), Duration::from_secs(15));
        let mut dead = sight("c", "3");
        dead.renewed_ago = Some(Duration::from_secs(600));
        m.listed(vec![sight("b", "7"), dead.clone()], t0);
        assert_eq!(
            names(&m),
            ["a", "b"],
            "me without a lease yet; c died long ago"
        );
        m.listed(vec![dead], t0 + Duration::from_secs(1));
        assert_eq!(names(&m), ["a"]);
    }
}
