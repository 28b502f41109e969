//! Which of a tenant's endpoints are published, from their health and the fail-open rules.
//!
//! Whether a tenant waits for verdicts is decided before this, once, by the tracker core
//! (`TrackerCore::waits_for_verdicts`); here an endpoint without a verdict counts as
//! unhealthy. Order of decisions (documented in docs/how-it-decides.md):
//! 1. No endpoint healthy: `on_all_unhealthy` decides (publish all, keep the last set, or
//!    publish nothing).
//! 2. Fewer healthy than `min_healthy` × endpoints: publish all (panic threshold).
//! 3. Otherwise the healthy endpoints.
//! 4. The routing `policy` then applies to that candidate set (so a fail-open `failover`
//!    tenant publishes its primary tier, not every tier): `failover` keeps the lowest
//!    `priority` present; `all`, `weighted` and `geo` keep every candidate (weights and
//!    locations travel with the snapshot for sinks that answer per client).

use ho_config::{Endpoint, OnAllUnhealthy, RoutingPolicy, Tenant};

use crate::hysteresis::Health;
use std::sync::Arc;

use crate::snapshot::{EndpointMeta, PublishMode, PublishedAddress};

/// What to do for one tenant now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Leave the back ends untouched (`keep_last` with nothing healthy).
    KeepLast,
    /// Publish these endpoints (indices into the plan's endpoints, in tenant order).
    Publish {
        /// Endpoint indices.
        endpoints: Vec<usize>,
        /// Why.
        mode: PublishMode,
    },
}

/// The weight of endpoint `ep` in `tenant`: the first `weights` rule whose label matches,
/// else the endpoint's own `weight`, else the tenant's `default_weight` (Kuadrant's order);
/// 1 for every endpoint when the tenant's answers are not weighted.
pub fn weight_of(tenant: &Tenant, ep: &Endpoint) -> u32 {
    if !tenant.weighs {
        return 1;
    }
    tenant
        .weights
        .iter()
        .find(|rule| ep.labels().get(&rule.label) == Some(&rule.value))
        .map_or(ep.weight.unwrap_or(tenant.default_weight), |rule| {
            rule.weight
        })
}

/// The weight published for endpoint `ep` in `tenant`: the weight it reported
/// (`reported_weight`) when the tenant is weighted, else [`weight_of`].
pub fn published_weight(tenant: &Tenant, ep: &Endpoint, reported: Option<u32>) -> u32 {
    match reported {
        Some(w) if tenant.weighs => w,
        _ => weight_of(tenant, ep),
    }
}

/// A `geo` tenant's locations: every `geo` label of its endpoints, up or down, sorted
/// (empty for other policies), so sinks can send clients of a location that is down to
/// the nearest one that is up.
pub fn locations(tenant: &Tenant, endpoints: &[Endpoint]) -> Vec<String> {
    if tenant.policy != RoutingPolicy::Geo {
        return Vec::new();
    }
    let set: std::collections::BTreeSet<&String> = tenant
        .endpoints
        .iter()
        .filter_map(|&e| endpoints[e].labels().get("geo"))
        .collect();
    set.into_iter().cloned().collect()
}

/// The snapshot's address list for the chosen endpoints: resolved weights (in a weighted
/// tenant, the weight an endpoint reports, `reported(e)`, before any configured one),
/// shared metadata, sorted by address.
pub fn published_addresses(
    tenant: &Tenant,
    endpoints: &[Endpoint],
    meta: &[Arc<EndpointMeta>],
    chosen: &[usize],
    reported: impl Fn(usize) -> Option<u32>,
) -> Vec<PublishedAddress> {
    let mut addresses: Vec<PublishedAddress> = chosen
        .iter()
        .map(|&e| PublishedAddress {
            address: endpoints[e].address,
            weight: published_weight(tenant, &endpoints[e], reported(e)),
            endpoint: meta[e].clone(),
        })
        .collect();
    addresses.sort_by_key(|a| a.address);
    addresses
}

/// Applies the routing policy to the candidate endpoints.
fn apply_policy(tenant: &Tenant, endpoints: &[Endpoint], candidates: Vec<usize>) -> Vec<usize> {
    match tenant.policy {
        RoutingPolicy::All | RoutingPolicy::Weighted | RoutingPolicy::Geo => candidates,
        RoutingPolicy::Failover => {
            let best = candidates.iter().map(|&i| endpoints[i].priority).min();
            candidates
                .into_iter()
                .filter(|&i| Some(endpoints[i].priority) == best)
                .collect()
        }
    }
}

/// Decides what `tenant` publishes from `members` (its endpoints, less the drained ones)
/// given each endpoint's health (`Unknown` counts as unhealthy: the caller has already
/// decided not to wait for verdicts).
pub fn decide(
    tenant: &Tenant,
    members: &[usize],
    endpoints: &[Endpoint],
    health: impl Fn(usize) -> Health,
) -> Decision {
    let states: Vec<(usize, Health)> = members.iter().map(|&i| (i, health(i))).collect();
    let healthy: Vec<usize> = states
        .iter()
        .filter(|(_, h)| *h == Health::Up)
        .map(|(i, _)| *i)
        .collect();
    let all = || apply_policy(tenant, endpoints, members.to_vec());
    if healthy.is_empty() {
        return match tenant.on_all_unhealthy {
            OnAllUnhealthy::PublishAll => Decision::Publish {
                endpoints: all(),
                mode: PublishMode::FailOpenAllUnhealthy,
            },
            OnAllUnhealthy::KeepLast => Decision::KeepLast,
            OnAllUnhealthy::PublishNone => Decision::Publish {
                endpoints: Vec::new(),
                mode: PublishMode::NoneHealthy,
            },
        };
    }
    if (healthy.len() as f64) < tenant.min_healthy * states.len() as f64 {
        return Decision::Publish {
            endpoints: all(),
            mode: PublishMode::FailOpenBelowMinHealthy,
        };
    }
    Decision::Publish {
        endpoints: apply_policy(tenant, endpoints, healthy),
        mode: PublishMode::Healthy,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ho_config::EndpointExtras;
    use proptest::prelude::*;
    use std::time::Duration;

    fn tenant(n: usize, on_all: OnAllUnhealthy, min_healthy: f64) -> Tenant {
        Tenant {
            answer: ho_config::Answer::Addresses,
            name: "t".into(),
            hosts_key: "t.hosts".into(),
            domains: vec!["t.example".into()],
            endpoints: (0..n).collect(),
            sinks: vec!["s".into()],
            ttl: Duration::from_secs(30),
            degraded_ttl: None,
            on_all_unhealthy: on_all,
            min_healthy,
            cleanup_on_remove: false,
            policy: RoutingPolicy::All,
            weights: Vec::new(),
            default_weight: 1,
            weighs: true,
            default_geo: None,
            multi_cluster: false,
            slo: None,
            resource: None,
        }
    }

    /// Endpoints with the given priorities (and `cloud` labels alternating aws/azure).
    fn endpoints(priorities: &[u32]) -> Vec<Endpoint> {
        priorities
            .iter()
            .enumerate()
            .map(|(i, &priority)| {
                let address = std::net::IpAddr::from([10, 0, 0, i as u8 + 1]);
                let cloud = if i % 2 == 0 { "aws" } else { "azure" };
                let mut e =
                    Endpoint::new(format!("e{i}"), address, i).with_extras(EndpointExtras {
                        labels: [("cloud".to_string(), cloud.to_string())].into(),
                        ..EndpointExtras::default()
                    });
                e.priority = priority;
                e
            })
            .collect()
    }

    fn eps(n: usize) -> Vec<Endpoint> {
        endpoints(&vec![0; n])
    }

    /// The waiting half of this test (before the grace: wait) is a tracker-core test now,
    /// `tracker::tests::waits_for_verdicts_until_the_grace_ends`.
    #[test]
    fn unknown_counts_as_unhealthy_once_deciding() {
        let t = tenant(3, OnAllUnhealthy::PublishAll, 0.0);
        let h = |i: usize| if i == 2 { Health::Unknown } else { Health::Up };
        assert_eq!(
            decide(&t, &t.endpoints.clone(), &eps(3), h),
            Decision::Publish {
                endpoints: vec![0, 1],
                mode: PublishMode::Healthy
            }
        );
    }

    #[test]
    fn all_unhealthy_follows_the_tenant_rule() {
        let down = |_| Health::Down;
        let t = tenant(2, OnAllUnhealthy::PublishAll, 0.0);
        assert_eq!(
            decide(&t, &t.endpoints.clone(), &eps(2), down),
            Decision::Publish {
                endpoints: vec![0, 1],
                mode: PublishMode::FailOpenAllUnhealthy
            }
        );
        let t = tenant(2, OnAllUnhealthy::KeepLast, 0.0);
        assert_eq!(
            decide(&t, &t.endpoints.clone(), &eps(2), down),
            Decision::KeepLast
        );
        let t = tenant(2, OnAllUnhealthy::PublishNone, 0.0);
        assert_eq!(
            decide(&t, &t.endpoints.clone(), &eps(2), down),
            Decision::Publish {
                endpoints: vec![],
                mode: PublishMode::NoneHealthy
            }
        );
    }

    #[test]
    fn below_min_healthy_publishes_all() {
        let t = tenant(4, OnAllUnhealthy::PublishAll, 0.5);
        let one_up = |i: usize| if i == 0 { Health::Up } else { Health::Down };
        assert_eq!(
            decide(&t, &t.endpoints.clone(), &eps(4), one_up),
            Decision::Publish {
                endpoints: vec![0, 1, 2, 3],
                mode: PublishMode::FailOpenBelowMinHealthy
            }
        );
        let two_up = |i: usize| if i < 2 { Health::Up } else { Health::Down };
        assert_eq!(
            decide(&t, &t.endpoints.clone(), &eps(4), two_up),
            Decision::Publish {
                endpoints: vec![0, 1],
                mode: PublishMode::Healthy
            }
        );
    }

    fn health() -> impl Strategy<Value = Health> {
        prop_oneof![Just(Health::Up), Just(Health::Down), Just(Health::Unknown)]
    }

    #[test]
    fn failover_publishes_the_best_healthy_tier() {
        let mut t = tenant(4, OnAllUnhealthy::PublishAll, 0.0);
        t.policy = RoutingPolicy::Failover;
        let eps = endpoints(&[0, 0, 1, 2]);
        let up = |_| Health::Up;
        assert_eq!(
            decide(&t, &t.endpoints.clone(), &eps, up),
            Decision::Publish {
                endpoints: vec![0, 1],
                mode: PublishMode::Healthy
            }
        );
        let primary_down = |i: usize| if i < 2 { Health::Down } else { Health::Up };
        assert_eq!(
            decide(&t, &t.endpoints.clone(), &eps, primary_down),
            Decision::Publish {
                endpoints: vec![2],
                mode: PublishMode::Healthy
            }
        );
        let all_down = |_| Health::Down;
        assert_eq!(
            decide(&t, &t.endpoints.clone(), &eps, all_down),
            Decision::Publish {
                endpoints: vec![0, 1],
                mode: PublishMode::FailOpenAllUnhealthy
            },
            "fail-open first, then the policy: the primary tier"
        );
    }

    #[test]
    fn weights_come_from_the_first_matching_label_rule() {
        let mut t = tenant(2, OnAllUnhealthy::PublishAll, 0.0);
        t.weights = vec![ho_config::WeightRule {
            label: "cloud".into(),
            value: "azure".into(),
            weight: 30,
        }];
        let mut eps = endpoints(&[0, 0, 0]);
        eps[0].weight = Some(7);
        assert_eq!(weight_of(&t, &eps[0]), 7, "aws: no rule, own weight");
        assert_eq!(weight_of(&t, &eps[1]), 30, "azure: rule");
        assert_eq!(weight_of(&t, &eps[2]), 1, "aws, no weight: the default 1");
        // Kuadrant's {defaultWeight: 10, custom cloud=azure -> 30}: 3:1, not 30:1.
        t.default_weight = 10;
        assert_eq!(weight_of(&t, &eps[2]), 10);
        assert_eq!(weight_of(&t, &eps[1]), 30);
        // A geo tenant without weights of its own: every address alike.
        t.weighs = false;
        assert_eq!(
            weight_of(&t, &eps[0]),
            1,
            "the endpoint's 7 is another tenant's"
        );
    }

    proptest! {
        /// `failover` never publishes a worse tier while a better tier has a healthy
        /// endpoint, and never publishes an unhealthy endpoint while any is healthy.
        #[test]
        fn failover_never_skips_a_healthy_better_tier(
            tiers in proptest::collection::vec((0u32..4, health()), 1..20),
        ) {
            let mut t = tenant(tiers.len(), OnAllUnhealthy::PublishAll, 0.0);
            t.policy = RoutingPolicy::Failover;
            let eps = endpoints(&tiers.iter().map(|(p, _)| *p).collect::<Vec<_>>());
            let health = |i: usize| tiers[i].1;
            if let Decision::Publish { endpoints: published, mode } = decide(&t, &t.endpoints.clone(), &eps, health) {
                prop_assert!(!published.is_empty());
                let tier = eps[published[0]].priority;
                prop_assert!(published.iter().all(|&i| eps[i].priority == tier));
                if mode == PublishMode::Healthy {
                    prop_assert!(published.iter().all(|&i| tiers[i].1 == Health::Up));
                    let best_healthy = (0..tiers.len()).filter(|&i| tiers[i].1 == Health::Up).map(|i| eps[i].priority).min();
                    prop_assert_eq!(Some(tier), best_healthy);
                }
            } else {
                prop_assert!(false, "publish_all always publishes");
            }
        }

        /// Under `publish_all`, once deciding, a tenant never publishes an empty set, and
        /// never publishes an unhealthy endpoint while a healthy one exists (unless the
        /// panic threshold says all).
        #[test]
        fn publish_all_never_empties_a_domain(
            states in proptest::collection::vec(health(), 1..20),
            min_healthy in 0.0f64..=1.0,
        ) {
            let t = tenant(states.len(), OnAllUnhealthy::PublishAll, min_healthy);
            match decide(&t, &t.endpoints.clone(), &eps(states.len()), |i| states[i]) {
                Decision::Publish { endpoints, mode } => {
                    prop_assert!(!endpoints.is_empty());
                    if mode == PublishMode::Healthy {
                        prop_assert!(endpoints.iter().all(|&i| states[i] == Health::Up));
                        let up = states.iter().filter(|h| **h == Health::Up).count();
                        prop_assert_eq!(endpoints.len(), up);
                    } else {
                        prop_assert_eq!(endpoints.len(), states.len());
                    }
                }
                other => prop_assert!(false, "unexpected {:?}", other),
            }
        }
    }
}
