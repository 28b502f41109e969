//! The tracker's part of `/status`: every endpoint with its verdict and counters, every
//! tenant with what it publishes and why each endpoint is in or out.

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::Arc;

use ho_config::RoutingPolicy;

use crate::hysteresis::Health;
use crate::snapshot::TenantSnapshot;
use crate::status::{
    CheckStatus, CompositeStatus, DampingStatus, EndpointStatus, LastProbe, PublishedStatus,
    TenantEndpointStatus, TenantStatus, TenantSummary, Timestamp, TrackerStatus, Why,
};

use super::core::{Clock, TrackerCore};
use super::index::{EndpointIx, TargetIx, TenantIx};
use super::verdicts::TargetState;

impl TrackerCore {
    /// The `/status` view at `now`.
    pub fn status(&self, now: Clock) -> TrackerStatus {
        TrackerStatus {
            ready: self.ready(),
            impaired: self.brake().impaired_since().is_some(),
            endpoints: self.endpoint_views(now),
            tenants: self.tenant_views(),
        }
    }

    /// Every tenant in a few numbers (see [`TenantSummary`]).
    pub fn summaries(&self) -> Vec<TenantSummary> {
        self.plan
            .tenants
            .iter()
            .enumerate()
            .map(|(ti, t)| {
                let mut summary = TenantSummary {
                    name: t.name.clone(),
                    published: published(self.last_published(TenantIx(ti))),
                    healthy: 0,
                    unhealthy: 0,
                    unknown: 0,
                };
                for &e in &t.endpoints {
                    match self.health().health_of(EndpointIx(e)) {
                        Health::Up => summary.healthy += 1,
                        Health::Down => summary.unhealthy += 1,
                        Health::Unknown => summary.unknown += 1,
                    }
                }
                summary
            })
            .collect()
    }

    fn endpoint_views(&self, now: Clock) -> Vec<EndpointStatus> {
        (0..self.plan.endpoints.len())
            .map(|e| self.endpoint_view(e, now))
            .collect()
    }

    /// The endpoints named in `names` as `/status` shows them (for a resource's status: a
    /// handful asked for each second, without building the whole list); an endpoint given
    /// by host name is named by each of its addresses' endpoints (`NAME@ADDRESS`).
    pub fn endpoints_named(&self, names: &HashSet<String>, now: Clock) -> Vec<EndpointStatus> {
        let named = |ep: &ho_config::Endpoint| {
            names.contains(&*ep.name)
                || ep.host().is_some()
                    && ep
                        .name
                        .rsplit_once('@')
                        .is_some_and(|(host_endpoint, _)| names.contains(host_endpoint))
        };
        self.plan
            .endpoints
            .iter()
            .enumerate()
            .filter(|(_, ep)| named(ep))
            .map(|(e, _)| self.endpoint_view(e, now))
            .collect()
    }

    fn endpoint_view(&self, e: usize, now: Clock) -> EndpointStatus {
        let ep = &self.plan.endpoints[e];
        let t = self.verdicts.get(TargetIx(ep.target()));
        EndpointStatus {
            name: ep.name.to_string(),
            address: ep.address,
            target: self.plan.targets[ep.target()].key(),
            state: self.health().verdict(EndpointIx(e)),
            since: t.since().map(Timestamp),
            consecutive_successes: t.hysteresis.successes(),
            consecutive_failures: t.hysteresis.failures(),
            failed_in_a_row: t.failing,
            probes: t.probes,
            failures: t.failures,
            rise: self.plan.targets[ep.target()].check.timing.rise,
            fall: self.plan.targets[ep.target()].check.timing.fall,
            transitions: t.transitions,
            downtime_seconds: {
                let current = match (t.hysteresis.state(), t.since()) {
                    (Health::Down, Some(since)) => {
                        now.wall.duration_since(since).unwrap_or_default()
                    }
                    _ => std::time::Duration::ZERO,
                };
                (t.downtime() + current).as_secs_f64()
            },
            drained: self.operator.drained.contains(&*ep.name),
            forced: self.operator.forced.get(&*ep.name).copied(),
            last: last_probe(t),
            damping: t.damping.as_ref().map(|d| DampingStatus {
                penalty: d.penalty(now.mono).round(),
                held: d.suppressed(),
            }),
            reported_weight: self.health().reported_weight(EndpointIx(e)),
            composite: ep.composite().map(|c| CompositeStatus {
                needed: c.needed(),
                must_pass: c.must_pass,
                checks: ep
                    .targets()
                    .map(|i| CheckStatus {
                        target: self.plan.targets[i].key(),
                        state: self.verdicts.effective(TargetIx(i)),
                        last: last_probe(self.verdicts.get(TargetIx(i))),
                    })
                    .collect(),
            }),
            unowned_seconds: t
                .shared
                .as_ref()
                .and_then(|s| s.unowned_since())
                .map(|since| {
                    now.wall
                        .duration_since(since)
                        .unwrap_or_default()
                        .as_secs_f64()
                }),
        }
    }

    fn tenant_views(&self) -> Vec<TenantStatus> {
        self.plan
            .tenants
            .iter()
            .zip(&self.tenants)
            .enumerate()
            .map(|(ti, (t, s))| {
                let last = self.last_published(TenantIx(ti));
                let published_set: HashSet<IpAddr> = last
                    .iter()
                    .flat_map(|p| p.addresses.iter().map(|a| a.address))
                    .collect();
                TenantStatus {
                    name: t.name.clone(),
                    domains: t.domains.clone(),
                    sinks: t.sinks.clone(),
                    policy: t.policy,
                    on_all_unhealthy: t.on_all_unhealthy,
                    min_healthy: t.min_healthy,
                    endpoints: t
                        .endpoints
                        .iter()
                        .map(|&e| {
                            let ep = &self.plan.endpoints[e];
                            let published = published_set.contains(&ep.address);
                            let health = self.health().health_of(EndpointIx(e));
                            let damped = ep
                                .targets()
                                .any(|i| self.verdicts.get(TargetIx(i)).damped());
                            let drained = self.operator.drained.contains(&*ep.name);
                            TenantEndpointStatus {
                                name: ep.name.to_string(),
                                address: ep.address,
                                published,
                                drained,
                                why: if drained && !published {
                                    Why::Drained
                                } else {
                                    let vote = s.votes.as_ref().and_then(|v| {
                                        v.addresses.iter().find(|a| a.address == ep.address)
                                    });
                                    match (vote, published, health) {
                                        (Some(v), true, Health::Down) if v.kept => Why::KeptByVote,
                                        (Some(v), false, Health::Up) if !v.kept => {
                                            Why::WithdrawnByVote
                                        }
                                        _ => why(published, health, damped, t.policy),
                                    }
                                },
                            }
                        })
                        .collect(),
                    votes: s.votes.clone(),
                    brake_held: self.brake().held().get(&t.name).copied().unwrap_or(0),
                    published: published(last),
                }
            })
            .collect()
    }
}

/// A target's latest probe, as `/status` shows it.
fn last_probe(t: &TargetState) -> Option<LastProbe> {
    t.last.as_ref().map(|last| LastProbe {
        ok: last.ok(),
        reason: last.reason(),
        latency_ms: last.latency().as_secs_f64() * 1000.0,
        at: Timestamp(last.at()),
    })
}

/// What a tenant publishes now, as `/status` shows it.
fn published(last: Option<&Arc<TenantSnapshot>>) -> Option<PublishedStatus> {
    last.map(|p| PublishedStatus {
        seq: p.seq,
        mode: p.mode,
        addresses: p.addresses.iter().map(|a| a.address).collect(),
        at: Timestamp(p.decided_at),
    })
}

/// Why an endpoint is (not) in its tenant's published set.
fn why(published: bool, health: Health, damped: bool, policy: RoutingPolicy) -> Why {
    match (published, health) {
        (false, _) if damped => Why::Damped,
        (true, Health::Up) => Why::Healthy,
        (true, _) => Why::FailOpen,
        (false, Health::Down) => Why::Unhealthy,
        (false, Health::Unknown) => Why::Unknown,
        (false, Health::Up) if policy == RoutingPolicy::Failover => Why::StandbyTier,
        (false, Health::Up) => Why::KeptLast,
    }
}
