//! Who is in the ring: every replica holds a Lease of its own and renews it; a member is
//! live while its Lease keeps changing. Freshness is judged as the writer election judges
//! it (`kube/src/lease.rs`): by the Lease's resourceVersion changing, on this process's
//! monotonic clock, never by comparing another machine's `renewTime` with ours, except
//! once: a Lease seen for the first time whose `renewTime` is already older than the Lease
//! duration (a replica that died before we started) is not counted live.
//!
//! The Leases arrive as listings: the whole ring, at each change a watch reports. This
//! replica's own renewal changes its Lease every renew period, so a listing is due at least
//! that often. Time runs on for at most one renew period past the last listing: a member
//! lapses at the moment its Lease has stood still for the Lease duration, with no listing
//! needed to notice. Past that, time stands still while the API server cannot be read, so
//! an outage of the API server changes nobody's ownership (every member keeps probing what
//! it owns) instead of making each replica think it is alone.

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
    /// How often a listing is due.
    renew_period: Duration,
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
    /// `me` is always a member: a replica probes its share until it stops. Listings are due
    /// every `renew_period`.
    pub fn new(me: String, lease_duration: Duration, renew_period: Duration) -> Members {
        Members {
            me,
            lease_duration,
            renew_period,
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

    /// The moment liveness is judged at `now`: now, but no later than one renew period
    /// after the last listing (when the next was due).
    fn judged_at(&self, now: Instant) -> Option<Instant> {
        self.listed
            .map(|listed| now.min(listed + self.renew_period))
    }

    /// The live members at `now`, by identity: this replica, and every other whose Lease
    /// changed within the Lease duration before the moment judged ([`Members`]).
    pub fn live(&self, now: Instant) -> Vec<Member> {
        let judged = self.judged_at(now);
        let mut live: BTreeMap<&str, Option<String>> = BTreeMap::new();
        live.insert(
            &self.me,
            self.seen.get(&self.me).and_then(|s| s.peer.clone()),
        );
        for (identity, seen) in &self.seen {
            let fresh = match (seen.changed, judged) {
                (Some(changed), Some(judged)) => {
                    judged.saturating_duration_since(changed) <= self.lease_duration
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

    /// When the next member still live lapses, if that is before the next listing is due:
    /// the ring is judged again then.
    pub fn next_lapse(&self) -> Option<Instant> {
        let listed = self.listed?;
        let due = listed + self.renew_period;
        self.seen
            .iter()
            .filter(|(identity, _)| **identity != self.me)
            .filter_map(|(_, seen)| seen.changed)
            // Just past the Lease duration: at exactly it, a Lease is still live.
            .map(|changed| changed + self.lease_duration + Duration::from_millis(1))
            .filter(|&lapse| lapse > listed && lapse <= due)
            .min()
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

    fn names_at(m: &Members, at: Instant) -> Vec<String> {
        m.live(at).into_iter().map(|m| m.identity).collect()
    }

    fn members() -> Members {
        Members::new("a".into(), Duration::from_secs(15), Duration::from_secs(5))
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_that_stops_changing_lapses_after_the_lease_duration() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut m = members();
        m.listed(vec![sight("a", "1"), sight("b", "7")], t0);
        assert_eq!(names_at(&m, t0), ["a", "b"]);
        m.listed(vec![sight("a", "2"), sight("b", "7")], t0 + s(15));
        assert_eq!(
            names_at(&m, t0 + s(15)),
            ["a", "b"],
            "exactly the lease duration: still live"
        );
        m.listed(vec![sight("a", "3"), sight("b", "7")], t0 + s(16));
        assert_eq!(names_at(&m, t0 + s(16)), ["a"]);
        m.listed(vec![sight("a", "4"), sight("b", "8")], t0 + s(17));
        assert_eq!(names_at(&m, t0 + s(17)), ["a", "b"], "renewed again: back");
    }

    #[tokio::test(start_paused = true)]
    async fn an_unreadable_api_server_changes_nobody() {
        let t0 = Instant::now();
        let mut m = members();
        m.listed(vec![sight("a", "1"), sight("b", "7")], t0);
        // b renewed 1 s before; no listing for a minute: judged one renew period after the
        // last listing, b stays.
        assert_eq!(names_at(&m, t0 + Duration::from_secs(60)), ["a", "b"]);
        assert_eq!(
            m.next_lapse(),
            None,
            "b lapses after the next listing is due"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_member_lapses_when_its_lease_duration_ends_not_at_the_next_listing() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut m = members();
        for (at, version) in [(0, "7"), (5, "8"), (10, "8"), (15, "8"), (20, "8")] {
            m.listed(vec![sight("a", "1"), sight("b", version)], t0 + s(at));
        }
        // b's Lease last changed at 5 s: it lapses at 20 s and a moment.
        let lapse = m.next_lapse().expect("within the renew period");
        assert_eq!(lapse, t0 + s(20) + Duration::from_millis(1));
        assert_eq!(names_at(&m, t0 + s(20)), ["a", "b"]);
        assert_eq!(names_at(&m, lapse), ["a"]);
        assert_eq!(
            names_at(&m, t0 + s(60)),
            ["a"],
            "lapsed before the next listing was due, outage or not"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_deleted_lease_leaves_at_once_and_a_stale_one_never_joins() {
        let t0 = Instant::now();
        let mut m = members();
        let mut dead = sight("c", "3");
        dead.renewed_ago = Some(Duration::from_secs(600));
        m.listed(vec![sight("b", "7"), dead.clone()], t0);
        assert_eq!(
            names_at(&m, t0),
            ["a", "b"],
            "me without a lease yet; c died long ago"
        );
        m.listed(vec![dead], t0 + Duration::from_secs(1));
        assert_eq!(names_at(&m, t0 + Duration::from_secs(1)), ["a"]);
    }
}
