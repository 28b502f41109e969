//! From a tenant's decision to a snapshot: this cluster's view for a vote, the tally that
//! comes back, and the snapshot with its seq and changes.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;
use tracing::{info, warn};

use crate::events::Event;
use crate::hysteresis::Health;
use crate::metrics::TenantLabel;
use crate::multi_cluster::vote::Tally;
use crate::multi_cluster::{vote, LocalEndpoint, LocalView};
use crate::snapshot::{PublishMode, PublishedAddress, TenantSnapshot, VerdictChange};

use super::super::index::{EndpointIx, TenantIx};
use super::super::report;
use super::{Clock, Effect, TrackerCore, Wake};

/// What a decision publishes for a tenant.
pub(super) struct Decided {
    /// The addresses, with their weights and labels.
    pub(super) addresses: Vec<PublishedAddress>,
    /// Why these (all healthy, fail-open, ...).
    pub(super) mode: PublishMode,
    /// The tenant's locations, for geo answers' fallback.
    pub(super) geos: Vec<String>,
    /// The vote of several clusters behind it (`[multi_cluster]`), renewed by a later
    /// count of the same outcome.
    pub(super) votes: Option<Arc<Tally>>,
}

impl TrackerCore {
    /// Publishes the tally of a voting tenant (see [`crate::multi_cluster`]): the set the
    /// vote over the clusters' reports gives, with the tenant's policy applied.
    pub fn voted(&mut self, tenant: &str, tally: Arc<Tally>, now: Clock, fx: &mut Vec<Effect>) {
        let Some(ti) = self.tenant_index(tenant) else {
            return;
        };
        let t = &self.plan.tenants[ti.0];
        if !t.multi_cluster {
            return;
        }
        self.tenants[ti.0].votes = Some(tally.clone());
        let Some((addresses, mode)) = vote::publishable(t, &tally) else {
            return;
        };
        let decided = Decided {
            addresses,
            mode,
            geos: vote::locations(t, &tally),
            votes: Some(tally),
        };
        self.publish(ti, decided, now.mono, now, fx);
    }

    /// This cluster's view of voting tenant `ti`: each endpoint's verdict, owner and drain.
    pub(super) fn local_view(&self, ti: TenantIx) -> LocalView {
        let tenant = &self.plan.tenants[ti.0];
        LocalView {
            tenant: tenant.name.clone(),
            endpoints: tenant
                .endpoints
                .iter()
                .map(|&e| {
                    let ep = &self.plan.endpoints[e];
                    LocalEndpoint {
                        address: ep.address,
                        name: ep.name.clone(),
                        cluster: ep.cluster.clone(),
                        weight: crate::selection::published_weight(
                            tenant,
                            ep,
                            self.reported_weight(EndpointIx(e)),
                        ),
                        priority: ep.priority,
                        geo: ep.labels.get("geo").cloned(),
                        health: self.health_of(EndpointIx(e)),
                        drained: self.operator.drained.contains(&ep.name),
                    }
                })
                .collect(),
        }
    }

    /// Sends tenant `ti` a snapshot of what was `decided` unless its records would not
    /// change: the brake may hold withdrawals back; an unchanged outcome only renews the
    /// vote behind the set already written.
    pub(super) fn publish(
        &mut self,
        ti: TenantIx,
        mut decided: Decided,
        cause_at: Instant,
        now: Clock,
        fx: &mut Vec<Effect>,
    ) {
        let ttl = self.ttl_now(ti);
        decided.addresses = self.through_brake(ti, decided.addresses, now, fx);
        let tenant = &self.plan.tenants[ti.0];
        let state = &mut self.tenants[ti.0];
        let unchanged = state.last_snapshot.as_ref().is_some_and(|last| {
            same_records(last, tenant, ttl, &decided.geos)
                && last.addresses == decided.addresses
                && last.mode == decided.mode
        });
        if unchanged {
            // The same outcome counted again: the set written from it stands renewed.
            if let (Some(later), Some(written)) = (
                decided.votes.as_ref(),
                state.last_snapshot.as_ref().and_then(|s| s.votes.as_ref()),
            ) {
                written.renew(later);
            }
            return;
        }
        self.send_snapshot(ti, decided, ttl, cause_at, now, fx);
    }

    /// The TTL tenant `ti` publishes with now: `degraded_ttl` while one of its endpoints is
    /// down, so resolvers come back sooner for the recovery.
    fn ttl_now(&self, ti: TenantIx) -> Duration {
        let tenant = &self.plan.tenants[ti.0];
        match tenant.degraded_ttl {
            Some(degraded)
                if tenant
                    .endpoints
                    .iter()
                    .any(|&e| self.health_of(EndpointIx(e)) == Health::Down) =>
            {
                degraded
            }
            _ => tenant.ttl,
        }
    }

    /// `addresses` as the blast-radius brake lets them through for tenant `ti`: withdrawals
    /// past its window held back (counted, logged once per change, woken when it frees up).
    fn through_brake(
        &mut self,
        ti: TenantIx,
        addresses: Vec<PublishedAddress>,
        now: Clock,
        fx: &mut Vec<Effect>,
    ) -> Vec<PublishedAddress> {
        let tenant = &self.plan.tenants[ti.0];
        let last: &[PublishedAddress] = self.tenants[ti.0]
            .last_snapshot
            .as_ref()
            .map_or(&[], |s| s.addresses.as_slice());
        let held_before = self.brake.held().get(&tenant.name).copied().unwrap_or(0);
        let admission = self.brake.admit(&tenant.name, last, addresses, now.mono);
        if admission.held != held_before {
            self.metrics
                .brake_held
                .get_or_create(&TenantLabel {
                    tenant: tenant.name.clone(),
                })
                .set(i64::try_from(admission.held).unwrap_or(i64::MAX));
            if admission.held > 0 {
                warn!(tenant = %tenant.name, held = admission.held, "the brake holds withdrawals: these addresses stay published until the window frees up or an operator releases the brake (POST /v1/brake/release)");
            } else {
                info!(tenant = %tenant.name, "the brake holds no withdrawals of the tenant any more");
            }
        }
        if let Some(at) = admission.retry_at {
            fx.push(Effect::WakeAt {
                at,
                wake: Wake::Brake(tenant.name.clone()),
            });
        }
        admission.addresses
    }

    /// Makes tenant `ti`'s next snapshot of `decided` (its seq, the changes that caused it,
    /// its span), reports it and hands it to the tenant's sinks.
    fn send_snapshot(
        &mut self,
        ti: TenantIx,
        decided: Decided,
        ttl: Duration,
        cause_at: Instant,
        now: Clock,
        fx: &mut Vec<Effect>,
    ) {
        let Decided {
            addresses,
            mode,
            geos,
            votes,
        } = decided;
        let tenant = &self.plan.tenants[ti.0];
        let state = &mut self.tenants[ti.0];
        state.last_seq = next_seq(now.wall, state.last_seq);
        let changes: Vec<VerdictChange> = state.changes.drain(..).collect();
        let causes: Vec<_> = changes.iter().map(|c| c.trace.clone()).collect();
        let span = report::publish_span(
            tenant,
            state.last_seq,
            mode.as_str(),
            addresses.len(),
            &causes,
        );
        let snapshot = Arc::new(TenantSnapshot {
            tenant: tenant.name.clone(),
            hosts_key: tenant.hosts_key.clone(),
            seq: state.last_seq,
            domains: tenant.domains.clone(),
            ttl,
            addresses,
            mode,
            changes,
            policy: tenant.policy,
            answer: tenant.answer,
            default_geo: tenant.default_geo.clone(),
            geos,
            votes,
            decided_at: now.wall,
            cause_at,
            trace: span,
        });
        report::published(&self.metrics, &snapshot);
        self.events.emit(|| Event::Publish {
            at: crate::events::now(),
            tenant: snapshot.tenant.clone(),
            seq: snapshot.seq,
            mode: snapshot.mode.as_str(),
            addresses: snapshot.addresses.iter().map(|a| a.address).collect(),
            hosts: snapshot.host_addresses(),
        });
        fx.push(Effect::Publish {
            sinks: tenant.sinks.clone(),
            snapshot: snapshot.clone(),
        });
        state.last_snapshot = Some(snapshot);
    }
}

/// Wall-clock microseconds, strictly above `last`: increasing across restarts too.
pub(super) fn next_seq(now: SystemTime, last: u64) -> u64 {
    let micros = crate::clock::since_epoch(now).as_micros() as u64;
    micros.max(last + 1)
}

/// Whether `last` was published with `tenant`'s current names, TTL (`ttl` now), policy
/// and locations.
fn same_records(
    last: &TenantSnapshot,
    tenant: &ho_config::Tenant,
    ttl: Duration,
    geos: &[String],
) -> bool {
    last.domains == tenant.domains
        && last.ttl == ttl
        && last.policy == tenant.policy
        && last.default_geo == tenant.default_geo
        && last.geos == geos
}
