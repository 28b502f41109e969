//! The vote: which addresses a shared name publishes, as a pure function of the reports in
//! the zone, so every cluster that reads the same reports writes the same records (and a
//! cluster that already finds them there writes nothing).
//!
//! The rule (Kuadrant's distributed-DNS RFC, with its write conflicts designed out):
//! 1. A report is *live* when younger than `report_ttl` (its age as the reader watched it:
//!    the time since its stamp last changed, see the rounds); live clusters are the voters.
//! 2. Candidates: every address any report owns, live or not (an orchestrator dying is
//!    not its gateways dying: they stay while the live clusters see them up).
//! 3. An address is withdrawn when `down votes / live voters >= failure_threshold`.
//! 4. Never empty: if every candidate is withdrawn, all candidates are published.
//!
//! The tenant's `min_healthy` and routing policy then apply as for one cluster (see
//! [`publishable`]).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ho_config::{RoutingPolicy, Tenant};
use serde::Serialize;
use tokio::time::Instant;

use super::report::{Owned, Report};
use crate::snapshot::{EndpointMeta, PublishMode, PublishedAddress};

/// How one address fared in the vote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AddressVote {
    /// The address.
    pub address: IpAddr,
    /// The cluster whose report contributes it (the first by id if several do).
    pub owner: String,
    /// Whether the owner's report is live.
    pub owner_live: bool,
    /// Live clusters that see it down.
    pub down_votes: Vec<String>,
    /// Whether the vote keeps it (before the policy; fail-open brings withdrawn ones back).
    pub kept: bool,
}

/// The outcome of one vote over a tenant's reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tally {
    /// Live clusters (the voters), sorted.
    pub live: Vec<String>,
    /// Clusters whose report aged out, sorted: their addresses stay as last known.
    pub aged_out: Vec<String>,
    /// The share of live voters that withdraws an address.
    pub threshold: f64,
    /// Every candidate address, sorted.
    pub addresses: Vec<AddressVote>,
    /// Attributes of each candidate, from its owner's report.
    #[serde(skip)]
    owned: BTreeMap<IpAddr, Owned>,
    /// When this outcome was last counted (again).
    #[serde(skip)]
    confirmed: Confirmed,
}

/// When a tally's outcome was last counted, shared by every holder of the tally (the
/// tracker, the snapshot, the sinks), and for how long that stands: `report_ttl`. A count
/// with the same outcome renews it, so a set published from the vote is written only while
/// some count within `report_ttl` stands behind it. A cluster that cannot read the zone
/// (cut off, or its way there slower than its timeout) counts nothing; without this it
/// would write a decision as old as its blindness once a write got through, over the
/// newer ones of the clusters that could see.
#[derive(Debug, Clone)]
pub struct Confirmed(Arc<Mutex<Instant>>, Duration);

impl Confirmed {
    fn new(ttl: Duration) -> Confirmed {
        Confirmed(Arc::new(Mutex::new(Instant::now())), ttl)
    }

    fn at(&self) -> Instant {
        *self
            .0
            .lock()
            .expect("never poisoned: no panics under the lock")
    }
}

/// The moment of a count is not part of its outcome.
impl PartialEq for Confirmed {
    fn eq(&self, _: &Confirmed) -> bool {
        true
    }
}

impl Tally {
    /// Counts the votes in `reports` at `now_ms` (Unix milliseconds). Reports are
    /// expected one per cluster; their order does not matter.
    pub fn count(reports: &[Report], now_ms: u64, ttl: Duration, threshold: f64) -> Tally {
        let ttl_ms = ttl.as_millis() as u64;
        let is_live = |r: &Report| now_ms.saturating_sub(r.at_ms) <= ttl_ms;
        let mut sorted: Vec<&Report> = reports.iter().collect();
        sorted.sort_by(|a, b| a.cluster.cmp(&b.cluster));
        let (live, aged_out): (Vec<&Report>, Vec<&Report>) =
            sorted.iter().partition(|r| is_live(r));
        let mut owned: BTreeMap<IpAddr, (Owned, &str, bool)> = BTreeMap::new();
        for r in &sorted {
            for o in &r.owned {
                owned
                    .entry(o.address)
                    .or_insert_with(|| (o.clone(), &r.cluster, is_live(r)));
            }
        }
        let voters = live.len();
        let addresses = owned
            .iter()
            .map(|(address, (_, owner, owner_live))| {
                let down_votes: Vec<String> = live
                    .iter()
                    .filter(|r| r.down.binary_search(address).is_ok())
                    .map(|r| r.cluster.clone())
                    .collect();
                let withdrawn = voters > 0 && down_votes.len() as f64 / voters as f64 >= threshold;
                AddressVote {
                    address: *address,
                    owner: (*owner).to_owned(),
                    owner_live: *owner_live,
                    down_votes,
                    kept: !withdrawn,
                }
            })
            .collect();
        Tally {
            live: live.iter().map(|r| r.cluster.clone()).collect(),
            aged_out: aged_out.iter().map(|r| r.cluster.clone()).collect(),
            threshold,
            addresses,
            owned: owned.into_iter().map(|(a, (o, _, _))| (a, o)).collect(),
            confirmed: Confirmed::new(ttl),
        }
    }

    /// `later`, a count with the same outcome, stands behind this one too.
    pub fn renew(&self, later: &Tally) {
        let at = later.confirmed.at();
        let mut mine = self.confirmed.0.lock().expect("never poisoned");
        *mine = (*mine).max(at);
    }

    /// This tally as if counted at `at` (tests in virtual time).
    #[cfg(test)]
    pub(crate) fn counted_at(self, at: Instant) -> Tally {
        *self.confirmed.0.lock().expect("never poisoned") = at;
        self
    }

    /// Whether a count within `report_ttl` of `now` stands behind this outcome.
    pub fn current_at(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.confirmed.at()) <= self.confirmed.1
    }

    /// Addresses the quorum withdrew.
    pub fn withdrawn(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.addresses.iter().filter(|v| !v.kept).map(|v| v.address)
    }

    /// Every candidate address with its attributes.
    pub fn candidates(&self) -> impl Iterator<Item = (&String, &Owned)> + '_ {
        self.addresses
            .iter()
            .map(|v| (&v.owner, &self.owned[&v.address]))
    }
}

/// What the tenant publishes from a tally: the kept addresses, or all candidates when
/// none is kept (the distributed-DNS RFC's no-NXDOMAIN rule) or fewer than `min_healthy` of them; then
/// `failover` keeps the lowest priority present. `None` when there is no candidate at all
/// (no report yet): nothing to publish.
pub fn publishable(tenant: &Tenant, tally: &Tally) -> Option<(Vec<PublishedAddress>, PublishMode)> {
    if tally.addresses.is_empty() {
        return None;
    }
    let kept: Vec<&AddressVote> = tally.addresses.iter().filter(|v| v.kept).collect();
    let total = tally.addresses.len();
    let (chosen, mode): (Vec<&AddressVote>, PublishMode) = if kept.is_empty() {
        (
            tally.addresses.iter().collect(),
            PublishMode::FailOpenAllUnhealthy,
        )
    } else if (kept.len() as f64) < tenant.min_healthy * total as f64 {
        (
            tally.addresses.iter().collect(),
            PublishMode::FailOpenBelowMinHealthy,
        )
    } else {
        (kept, PublishMode::Healthy)
    };
    let owned = |v: &AddressVote| &tally.owned[&v.address];
    let best = chosen.iter().map(|v| owned(v).priority).min();
    let addresses = chosen
        .into_iter()
        .filter(|v| tenant.policy != RoutingPolicy::Failover || Some(owned(v).priority) == best)
        .map(|v| {
            let o = owned(v);
            PublishedAddress {
                address: o.address,
                weight: if tenant.weighs { o.weight } else { 1 },
                endpoint: Arc::new(EndpointMeta {
                    name: o.name.as_str().into(),
                    priority: o.priority,
                    labels: Arc::new(
                        o.geo
                            .iter()
                            .map(|g| ("geo".to_owned(), g.clone()))
                            .collect(),
                    ),
                    host: None,
                }),
            }
        })
        .collect();
    Some((addresses, mode))
}

/// A `geo` tenant's locations across every cluster's candidates, sorted.
pub fn locations(tenant: &Tenant, tally: &Tally) -> Vec<String> {
    if tenant.policy != RoutingPolicy::Geo {
        return Vec::new();
    }
    let set: std::collections::BTreeSet<&String> = tally
        .owned
        .values()
        .filter_map(|o| o.geo.as_ref())
        .collect();
    set.into_iter().cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const TTL: Duration = Duration::from_secs(15);
    const NOW: u64 = 1_000_000;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    fn rep(cluster: &str, age_ms: u64, owned: &[u8], down: &[u8]) -> Report {
        Report {
            owner: "prod".into(),
            cluster: cluster.into(),
            at_ms: NOW - age_ms,
            owned: owned
                .iter()
                .map(|&a| Owned {
                    address: ip(a),
                    name: format!("{cluster}-{a}"),
                    weight: 1,
                    priority: 0,
                    geo: None,
                })
                .collect(),
            down: {
                let mut d: Vec<IpAddr> = down.iter().map(|&a| ip(a)).collect();
                d.sort();
                d
            },
        }
    }

    fn kept(t: &Tally) -> Vec<IpAddr> {
        t.addresses
            .iter()
            .filter(|v| v.kept)
            .map(|v| v.address)
            .collect()
    }

    fn tenant(policy: RoutingPolicy) -> Tenant {
        Tenant {
            answer: ho_config::Answer::Addresses,
            name: "t".into(),
            hosts_key: "t.hosts".into(),
            domains: vec!["api.example.com".into()],
            endpoints: vec![0],
            sinks: vec![],
            ttl: Duration::from_secs(30),
            degraded_ttl: None,
            on_all_unhealthy: ho_config::OnAllUnhealthy::PublishAll,
            min_healthy: 0.0,
            cleanup_on_remove: false,
            policy,
            weights: vec![],
            default_weight: 1,
            weighs: false,
            default_geo: None,
            multi_cluster: true,
            slo: None,
            resource: None,
        }
    }

    #[test]
    fn one_of_three_down_stays_two_of_three_leave() {
        let reports = [
            rep("a", 0, &[1], &[3]),
            rep("b", 0, &[2], &[3, 1]),
            rep("c", 0, &[3], &[1]),
        ];
        let t = Tally::count(&reports, NOW, TTL, 0.66);
        assert_eq!(t.live, ["a", "b", "c"]);
        // 1: down for b and c (2/3) -> withdrawn; 3: down for a and b -> withdrawn.
        assert_eq!(kept(&t), [ip(2)]);
        let t = Tally::count(&reports[..2], NOW, TTL, 0.66);
        // Two voters: 3 is down for both, 1 for one of two (0.5 < 0.66).
        assert_eq!(kept(&t), [ip(1), ip(2)]);
    }

    #[test]
    fn an_aged_out_cluster_keeps_its_addresses_but_loses_its_vote() {
        let reports = [
            rep("a", 0, &[1], &[]),
            rep("b", 16_000, &[2], &[1]),
            rep("c", 0, &[3], &[]),
        ];
        let t = Tally::count(&reports, NOW, TTL, 0.66);
        assert_eq!(t.live, ["a", "c"]);
        assert_eq!(t.aged_out, ["b"]);
        assert_eq!(kept(&t), [ip(1), ip(2), ip(3)]);
        let reports = [
            rep("a", 0, &[1], &[2]),
            rep("b", 16_000, &[2], &[]),
            rep("c", 0, &[3], &[2]),
        ];
        assert_eq!(
            kept(&Tally::count(&reports, NOW, TTL, 0.66)),
            [ip(1), ip(3)]
        );
    }

    #[test]
    fn every_address_down_everywhere_publishes_all_known() {
        let reports = [rep("a", 0, &[1], &[1, 2]), rep("b", 0, &[2], &[1, 2])];
        let t = Tally::count(&reports, NOW, TTL, 0.66);
        assert!(kept(&t).is_empty());
        let (addresses, mode) = publishable(&tenant(RoutingPolicy::All), &t).unwrap();
        assert_eq!(mode, PublishMode::FailOpenAllUnhealthy);
        assert_eq!(addresses.len(), 2);
    }

    #[test]
    fn failover_keeps_the_best_tier_the_vote_left() {
        let mut reports = [rep("a", 0, &[1], &[]), rep("b", 0, &[2], &[])];
        reports[1].owned[0].priority = 1;
        let t = Tally::count(&reports, NOW, TTL, 0.66);
        let (addresses, _) = publishable(&tenant(RoutingPolicy::Failover), &t).unwrap();
        assert_eq!(
            addresses.iter().map(|a| a.address).collect::<Vec<_>>(),
            [ip(1)]
        );
        reports[0].down = vec![ip(1)];
        reports[1].down = vec![ip(1)];
        let t = Tally::count(&reports, NOW, TTL, 0.66);
        let (addresses, _) = publishable(&tenant(RoutingPolicy::Failover), &t).unwrap();
        assert_eq!(
            addresses.iter().map(|a| a.address).collect::<Vec<_>>(),
            [ip(2)]
        );
    }

    fn arb_reports() -> impl Strategy<Value = Vec<Report>> {
        proptest::collection::vec(
            (
                0u64..30_000,
                proptest::collection::btree_set(1u8..12, 0..4),
                proptest::collection::btree_set(1u8..12, 0..8),
            ),
            1..6,
        )
        .prop_map(|rs| {
            rs.into_iter()
                .enumerate()
                .map(|(i, (age, owned, down))| {
                    let owned: Vec<u8> = owned.into_iter().collect();
                    let down: Vec<u8> = down.into_iter().collect();
                    rep(&format!("c{i}"), age, &owned, &down)
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn the_vote_does_not_depend_on_report_order(reports in arb_reports(), threshold in 0.01f64..1.0) {
            let mut reversed = reports.clone();
            reversed.reverse();
            prop_assert_eq!(
                Tally::count(&reports, NOW, TTL, threshold),
                Tally::count(&reversed, NOW, TTL, threshold)
            );
        }

        #[test]
        fn a_name_with_candidates_is_never_empty(reports in arb_reports(), threshold in 0.01f64..1.0) {
            let t = Tally::count(&reports, NOW, TTL, threshold);
            let published = publishable(&tenant(RoutingPolicy::All), &t);
            match published {
                None => prop_assert!(reports.iter().all(|r| r.owned.is_empty())),
                Some((addresses, _)) => prop_assert!(!addresses.is_empty()),
            }
        }

        #[test]
        fn an_address_leaves_only_with_a_quorum_of_live_voters(reports in arb_reports(), threshold in 0.01f64..1.0) {
            let t = Tally::count(&reports, NOW, TTL, threshold);
            let live: Vec<&Report> = reports.iter().filter(|r| NOW - r.at_ms <= TTL.as_millis() as u64).collect();
            for v in &t.addresses {
                let down = live.iter().filter(|r| r.down.contains(&v.address)).count();
                let quorum = !live.is_empty() && down as f64 / live.len() as f64 >= threshold;
                prop_assert_eq!(v.kept, !quorum);
            }
            // Every owned address is a candidate, live owner or not.
            for r in &reports {
                for o in &r.owned {
                    prop_assert!(t.addresses.iter().any(|v| v.address == o.address));
                }
            }
        }
    }

    #[test]
    fn an_outcome_stands_for_report_ttl_after_its_last_count() {
        let ttl = Duration::from_secs(2);
        let first = Tally::count(&[], 0, ttl, 0.5);
        let start = Instant::now();
        assert!(first.current_at(start));
        assert!(
            !first.current_at(start + Duration::from_secs(3)),
            "no count for 3 s"
        );
        let clone = first.clone();
        std::thread::sleep(Duration::from_millis(20));
        let later = Tally::count(&[], 0, ttl, 0.5);
        first.renew(&later);
        assert!(
            clone.current_at(later.confirmed.at() + Duration::from_secs(2)),
            "renewed for every holder of the tally"
        );
        later.renew(&first);
        assert_eq!(
            later.confirmed.at(),
            first.confirmed.at(),
            "never moved back"
        );
        assert_eq!(first, later, "the moment is not part of the outcome");
    }
}
