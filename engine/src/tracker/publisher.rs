//! From a tenant's decision to the snapshot its sinks get: the blast-radius brake's
//! admission, an unchanged outcome dropped (a vote behind it renewed), the next seq, the
//! verdict changes it carries, its span, metric and event; and the last word of a tenant a
//! reload removes. It knows what each tenant published, nothing of verdicts: what to
//! publish comes decided ([`Decided`]).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ho_config::{Plan, Tenant};
use opentelemetry::trace::SpanContext;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::brake::Brake;
use crate::events::{Event, Events};
use crate::metrics::{Metrics, TenantLabel};
use crate::multi_cluster::vote::Tally;
use crate::snapshot::{
    PublishMode, PublishedAddress, Reason, Reasons, TenantSnapshot, VerdictChange,
};

use super::core::{Clock, Effect, Wake};
use super::index::{carry_by_name, TenantIx};
use super::pending::Pending;
use super::report;

/// What a decision publishes for a tenant.
pub(super) struct Decided {
    /// The addresses, with their weights and labels.
    pub(super) addresses: Vec<PublishedAddress>,
    /// Why these (all healthy, fail-open, ...).
    pub(super) mode: PublishMode,
    /// The TTL (`degraded_ttl` while an endpoint is down).
    pub(super) ttl: Duration,
    /// The tenant's locations, for geo answers' fallback.
    pub(super) geos: Vec<String>,
    /// The vote of several clusters behind it (`[multi_cluster]`), renewed by a later
    /// count of the same outcome.
    pub(super) votes: Option<Arc<Tally>>,
}

/// What one tenant published and what its next snapshot carries.
#[derive(Default)]
struct Outbox {
    /// The latest snapshot sent to the tenant's sinks.
    last: Option<Arc<TenantSnapshot>>,
    last_seq: u64,
    /// Verdict changes not yet carried by a snapshot, with their spans.
    changes: Pending,
}

/// Every tenant's outbox (by [`TenantIx`] of the current plan), and the brake that may
/// hold their withdrawals back.
pub(super) struct Publisher {
    outboxes: Vec<Outbox>,
    /// The blast-radius brake (`[brake]`): withdrawals per window, and whether this prober
    /// judged itself impaired.
    pub(super) brake: Brake,
    /// The texts of the changes noted lately, shared by the changes that give the same.
    reasons: Reasons,
    metrics: Arc<Metrics>,
    events: Events,
}

impl Publisher {
    /// A publisher with nothing published, braking as `brake` says.
    pub(super) fn new(brake: Brake, metrics: Arc<Metrics>, events: Events) -> Publisher {
        Publisher {
            outboxes: Vec::new(),
            brake,
            reasons: Reasons::default(),
            metrics,
            events,
        }
    }

    /// What tenant `ti` published last.
    pub(super) fn last(&self, ti: TenantIx) -> Option<&Arc<TenantSnapshot>> {
        self.outboxes[ti.0].last.as_ref()
    }

    /// `text` as the reason of a change to note, shared with the changes noted lately for
    /// the same (a start-up's every `ok`, a mass failure's one cause).
    pub(super) fn reason(&mut self, text: &str) -> Reason {
        self.reasons.get(text)
    }

    /// Keeps `change`, caused by the transition of `span`, for tenant `ti`'s next snapshot.
    pub(super) fn note_change(&mut self, ti: TenantIx, change: VerdictChange, span: &SpanContext) {
        self.outboxes[ti.0].changes.note(change, span);
    }

    /// Follows a reload from plan `old` to `new`: outboxes kept by tenant name (new tenants
    /// start with nothing published), the brake reconfigured and rid of removed tenants.
    pub(super) fn adopt(&mut self, old: &Plan, new: &Plan) {
        let outboxes = std::mem::take(&mut self.outboxes);
        self.outboxes = carry_by_name(old, outboxes, new);
        self.brake.set_config(new.brake);
        let staying: HashSet<&str> = new.tenants.iter().map(|t| t.name.as_str()).collect();
        for gone in old
            .tenants
            .iter()
            .filter(|t| !staying.contains(t.name.as_str()))
        {
            self.brake.forget(&gone.name);
        }
    }

    /// Sends tenant `ti` (`tenant`) a snapshot of what was `decided` unless its records
    /// would not change: the brake may hold withdrawals back; an unchanged outcome only
    /// renews the vote behind the set already written. `cause_at` is when the health change
    /// behind it was observed.
    pub(super) fn publish(
        &mut self,
        tenant: &Tenant,
        ti: TenantIx,
        mut decided: Decided,
        cause_at: Instant,
        now: Clock,
        fx: &mut Vec<Effect>,
    ) {
        decided.addresses = self.through_brake(tenant, ti, decided.addresses, now, fx);
        let last = self.outboxes[ti.0].last.as_ref();
        let unchanged = last.is_some_and(|last| {
            same_records(last, tenant, decided.ttl, &decided.geos)
                && last.addresses == decided.addresses
                && last.mode == decided.mode
        });
        if unchanged {
            // The same outcome counted again: the set written from it stands renewed.
            if let (Some(later), Some(written)) =
                (decided.votes.as_ref(), last.and_then(|s| s.votes.as_ref()))
            {
                written.renew(later);
            }
            return;
        }
        self.send_snapshot(tenant, ti, decided, cause_at, now, fx);
    }

    /// `addresses` as the blast-radius brake lets them through for `tenant`: withdrawals
    /// past its window held back (counted, logged once per change, woken when it frees up).
    fn through_brake(
        &mut self,
        tenant: &Tenant,
        ti: TenantIx,
        addresses: Vec<PublishedAddress>,
        now: Clock,
        fx: &mut Vec<Effect>,
    ) -> Vec<PublishedAddress> {
        let last: &[PublishedAddress] = self.outboxes[ti.0]
            .last
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
        tenant: &Tenant,
        ti: TenantIx,
        decided: Decided,
        cause_at: Instant,
        now: Clock,
        fx: &mut Vec<Effect>,
    ) {
        let Decided {
            addresses,
            mode,
            ttl,
            geos,
            votes,
        } = decided;
        let outbox = &mut self.outboxes[ti.0];
        outbox.last_seq = next_seq(now.wall, outbox.last_seq);
        let (changes, causes) = outbox.changes.take();
        let span = report::publish_span(
            tenant,
            outbox.last_seq,
            mode.as_str(),
            addresses.len(),
            &causes,
        );
        let snapshot = Arc::new(TenantSnapshot {
            tenant: tenant.name.clone(),
            hosts_key: tenant.hosts_key.clone(),
            seq: outbox.last_seq,
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
            voted_down: (snapshot.votes.as_ref()).map(|t| {
                (t.addresses.iter())
                    .filter(|v| !v.kept)
                    .map(|v| v.address)
                    .collect()
            }),
        });
        fx.push(Effect::Publish {
            sinks: tenant.sinks.clone(),
            snapshot: snapshot.clone(),
        });
        outbox.last = Some(snapshot);
    }

    /// Tenants of plan `old` that `new` removes: withdrawn from their sinks with an empty
    /// snapshot when they asked for `cleanup_on_remove`, else forgotten by the sinks
    /// (records stay). A voting tenant's shared zones are not this cluster's to empty: they
    /// are forgotten here, and get what the remaining clusters decide once this cluster's
    /// report is out ([`crate::multi_cluster::leave`]).
    pub(super) fn retire_removed(&self, old: &Plan, new: &Plan, now: Clock, fx: &mut Vec<Effect>) {
        let staying: HashSet<&str> = new.tenants.iter().map(|t| t.name.as_str()).collect();
        for (tenant, outbox) in old.tenants.iter().zip(&self.outboxes) {
            if staying.contains(tenant.name.as_str()) {
                continue;
            }
            let (shared, sinks): (Vec<String>, Vec<String>) = tenant
                .sinks
                .iter()
                .cloned()
                .partition(|s| tenant.multi_cluster && old.sinks[s].spec.holds_reports());
            if !shared.is_empty() {
                fx.push(Effect::Forget {
                    sinks: shared,
                    tenant: tenant.name.clone(),
                });
            }
            if tenant.cleanup_on_remove {
                info!(tenant = %tenant.name, "tenant removed by reload: withdrawing its records (cleanup_on_remove)");
                fx.push(Effect::Publish {
                    sinks,
                    snapshot: Arc::new(withdrawal(tenant, outbox.last_seq, now)),
                });
            } else {
                info!(tenant = %tenant.name, "tenant removed by reload: no longer published; its records stay");
                fx.push(Effect::Forget {
                    sinks,
                    tenant: tenant.name.clone(),
                });
            }
        }
    }
}

/// The empty snapshot that withdraws a removed `tenant`'s records (`last_seq`: its last).
fn withdrawal(tenant: &Tenant, last_seq: u64, now: Clock) -> TenantSnapshot {
    TenantSnapshot {
        tenant: tenant.name.clone(),
        hosts_key: tenant.hosts_key.clone(),
        seq: next_seq(now.wall, last_seq),
        domains: tenant.domains.clone(),
        ttl: tenant.ttl,
        addresses: Vec::new(),
        mode: PublishMode::NoneHealthy,
        changes: Vec::new(),
        policy: tenant.policy,
        answer: tenant.answer,
        default_geo: tenant.default_geo.clone(),
        geos: Vec::new(),
        votes: None,
        decided_at: now.wall,
        cause_at: now.mono,
        trace: SpanContext::NONE,
    }
}

/// Wall-clock microseconds, strictly above `last`: increasing across restarts too.
fn next_seq(now: SystemTime, last: u64) -> u64 {
    let micros = crate::clock::since_epoch(now).as_micros() as u64;
    micros.max(last + 1)
}

/// Whether `last` was published with `tenant`'s current names, TTL (`ttl` now), policy
/// and locations.
fn same_records(last: &TenantSnapshot, tenant: &Tenant, ttl: Duration, geos: &[String]) -> bool {
    last.domains == tenant.domains
        && last.ttl == ttl
        && last.policy == tenant.policy
        && last.default_geo == tenant.default_geo
        && last.geos == geos
}
