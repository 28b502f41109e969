//! Which of a tenant's endpoints are published, from their health and the fail-open rules.
//!
//! Order of decisions (documented in the README):
//! 1. Until every endpoint has a verdict, wait, unless the start-up grace has passed
//!    (then unknown counts as unhealthy).
//! 2. No endpoint healthy: `on_all_unhealthy` decides (publish all, keep the last set, or
//!    publish nothing).
//! 3. Fewer healthy than `min_healthy` × endpoints: publish all (panic threshold).
//! 4. Otherwise the healthy endpoints; the routing `policy` then applies to that set.

use ho_config::{OnAllUnhealthy, RoutingPolicy, Tenant};

use crate::hysteresis::Health;
use crate::snapshot::PublishMode;

/// What to do for one tenant now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Not every endpoint has a verdict yet and the grace period is running.
    Wait,
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

/// Decides what `tenant` publishes given each endpoint's health.
pub fn decide(tenant: &Tenant, health: impl Fn(usize) -> Health, grace_over: bool) -> Decision {
    let states: Vec<(usize, Health)> = tenant.endpoints.iter().map(|&i| (i, health(i))).collect();
    if !grace_over && states.iter().any(|(_, h)| *h == Health::Unknown) {
        return Decision::Wait;
    }
    let healthy: Vec<usize> = states
        .iter()
        .filter(|(_, h)| *h == Health::Up)
        .map(|(i, _)| *i)
        .collect();
    let all = || tenant.endpoints.clone();
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
    match tenant.policy {
        RoutingPolicy::All => Decision::Publish {
            endpoints: healthy,
            mode: PublishMode::Healthy,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Duration;

    fn tenant(n: usize, on_all: OnAllUnhealthy, min_healthy: f64) -> Tenant {
        Tenant {
            name: "t".into(),
            domains: vec!["t.example".into()],
            endpoints: (0..n).collect(),
            sinks: vec!["s".into()],
            ttl: Duration::from_secs(30),
            on_all_unhealthy: on_all,
            min_healthy,
            policy: RoutingPolicy::All,
        }
    }

    #[test]
    fn waits_for_verdicts_until_grace() {
        let t = tenant(3, OnAllUnhealthy::PublishAll, 0.0);
        let h = |i: usize| if i == 2 { Health::Unknown } else { Health::Up };
        assert_eq!(decide(&t, h, false), Decision::Wait);
        assert_eq!(
            decide(&t, h, true),
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
            decide(&t, down, false),
            Decision::Publish {
                endpoints: vec![0, 1],
                mode: PublishMode::FailOpenAllUnhealthy
            }
        );
        let t = tenant(2, OnAllUnhealthy::KeepLast, 0.0);
        assert_eq!(decide(&t, down, false), Decision::KeepLast);
        let t = tenant(2, OnAllUnhealthy::PublishNone, 0.0);
        assert_eq!(
            decide(&t, down, false),
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
            decide(&t, one_up, false),
            Decision::Publish {
                endpoints: vec![0, 1, 2, 3],
                mode: PublishMode::FailOpenBelowMinHealthy
            }
        );
        let two_up = |i: usize| if i < 2 { Health::Up } else { Health::Down };
        assert_eq!(
            decide(&t, two_up, false),
            Decision::Publish {
                endpoints: vec![0, 1],
                mode: PublishMode::Healthy
            }
        );
    }

    fn health() -> impl Strategy<Value = Health> {
        prop_oneof![Just(Health::Up), Just(Health::Down), Just(Health::Unknown)]
    }

    proptest! {
        /// Under `publish_all`, once deciding, a tenant never publishes an empty set, and
        /// never publishes an unhealthy endpoint while a healthy one exists (unless the
        /// panic threshold says all).
        #[test]
        fn publish_all_never_empties_a_domain(
            states in proptest::collection::vec(health(), 1..20),
            min_healthy in 0.0f64..=1.0,
        ) {
            let t = tenant(states.len(), OnAllUnhealthy::PublishAll, min_healthy);
            match decide(&t, |i| states[i], true) {
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
