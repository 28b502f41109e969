//! [`Publisher`] alone, without verdicts: what it sends for a decision, what it does not
//! send again, and the last word of a tenant a reload removes.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::core::{Clock, Effect};
use super::index::TenantIx;
use super::pending::Pending;
use super::publisher::{Decided, Publisher};
use super::tests::plan;
use crate::brake::Brake;
use crate::events::Events;
use crate::hysteresis::Health;
use crate::metrics::Metrics;
use opentelemetry::trace::SpanContext;

use crate::snapshot::{
    EndpointMeta, PublishMode, PublishedAddress, TenantSnapshot, VerdictChange, MAX_CHANGES,
};

/// A publisher for `plan`'s tenants, nothing published yet.
fn publisher(plan: &ho_config::Plan) -> Publisher {
    let mut p = Publisher::new(
        Brake::new(plan.brake),
        Arc::new(Metrics::new()),
        Events::default(),
    );
    // From no tenants (none of the plan's are known yet) to the plan's.
    let mut none = plan.clone();
    none.tenants.clear();
    p.adopt(&none, plan);
    p
}

/// `plan`'s endpoints `chosen`, all healthy.
fn decided(plan: &ho_config::Plan, chosen: &[usize]) -> Decided {
    Decided {
        addresses: chosen
            .iter()
            .map(|&e| PublishedAddress {
                address: plan.endpoints[e].address,
                weight: 1,
                endpoint: Arc::new(EndpointMeta::of(&plan.endpoints[e])),
            })
            .collect(),
        mode: PublishMode::Healthy,
        ttl: Duration::from_secs(30),
        geos: Vec::new(),
        votes: None,
    }
}

fn clock() -> Clock {
    Clock {
        mono: Instant::now(),
        wall: SystemTime::now(),
    }
}

/// The snapshots among `fx`.
fn sent(fx: &[Effect]) -> Vec<Arc<TenantSnapshot>> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Publish { snapshot, .. } => Some(snapshot.clone()),
            _ => None,
        })
        .collect()
}

/// Publishes `chosen` of `plan` for its tenant through `p`: the snapshots sent.
fn publish(
    p: &mut Publisher,
    plan: &ho_config::Plan,
    chosen: &[usize],
) -> Vec<Arc<TenantSnapshot>> {
    let mut fx = Vec::new();
    p.publish(
        &plan.tenants[0],
        TenantIx(0),
        decided(plan, chosen),
        Instant::now(),
        clock(),
        &mut fx,
    );
    sent(&fx)
}

#[test]
fn an_unchanged_outcome_is_not_sent_again_and_the_next_carries_the_changes_noted() {
    let plan = plan(2, "", "");
    let mut p = publisher(&plan);
    let t = TenantIx(0);
    let first = publish(&mut p, &plan, &[0, 1]);
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].addresses.len(), 2);
    assert!(
        publish(&mut p, &plan, &[0, 1]).is_empty(),
        "the same records are not sent again"
    );
    for i in 0..MAX_CHANGES + 2 {
        p.note_change(
            t,
            VerdictChange {
                endpoint: "e1".into(),
                address: plan.endpoints[1].address,
                from: Health::Up,
                to: Health::Down,
                reason: format!("change {i}").into(),
            },
            &SpanContext::NONE,
        );
    }
    let next = publish(&mut p, &plan, &[0]);
    assert_eq!(next.len(), 1);
    assert!(next[0].seq > first[0].seq);
    assert_eq!(next[0].addresses.len(), 1);
    assert_eq!(next[0].changes.len(), MAX_CHANGES, "the latest kept");
    assert_eq!(next[0].changes[0].reason, "change 2");
    assert!(Arc::ptr_eq(p.last(t).unwrap(), &next[0]));
}

#[test]
fn a_removed_tenant_is_withdrawn_when_it_asked_and_forgotten_otherwise() {
    for cleanup in [true, false] {
        let plan = plan(1, &format!("cleanup_on_remove = {cleanup}"), "");
        let mut p = publisher(&plan);
        let t = TenantIx(0);
        publish(&mut p, &plan, &[0]);
        let last = p.last(t).unwrap().seq;
        let mut fx = Vec::new();
        let mut without = plan.as_ref().clone();
        without.tenants.clear();
        p.retire_removed(&plan, &without, clock(), &mut fx);
        match fx.as_slice() {
            [Effect::Publish { sinks, snapshot }] if cleanup => {
                assert_eq!(sinks, &["s"]);
                assert!(snapshot.addresses.is_empty());
                assert_eq!(snapshot.mode, PublishMode::NoneHealthy);
                assert!(snapshot.seq > last, "it replaces what was published");
            }
            [Effect::Forget { sinks, tenant }] if !cleanup => {
                assert_eq!(sinks, &["s"]);
                assert_eq!(tenant, "t");
            }
            other => panic!("cleanup_on_remove = {cleanup}: {other:?}"),
        }
    }
}

/// A change of `endpoint` with `reason`, traced when `span` is given (trace and span ids).
fn generated_change(
    plan: &ho_config::Plan,
    rng: &mut fastrand::Rng,
    i: usize,
) -> (VerdictChange, SpanContext) {
    use opentelemetry::trace::{SpanId, TraceFlags, TraceId, TraceState};
    let span = match rng.bool() {
        true => SpanContext::new(
            TraceId::from(rng.u128(1..)),
            SpanId::from(rng.u64(1..)),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ),
        false => SpanContext::NONE,
    };
    let e = rng.usize(..plan.endpoints.len());
    let change = VerdictChange {
        endpoint: plan.endpoints[e].name.clone(),
        address: plan.endpoints[e].address,
        from: Health::Up,
        to: Health::Down,
        reason: format!("change {i}").into(),
    };
    (change, span)
}

/// Generated sequences of changes and decisions: each snapshot sent carries the changes
/// noted since the one before (the latest [`MAX_CHANGES`]), as a queue kept here says; and
/// holds them without spare room.
#[test]
fn each_snapshot_carries_the_changes_noted_since_the_last_in_generated_sequences() {
    let plan = plan(3, "", "");
    for seed in 0..40 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut p = publisher(&plan);
        let mut model: std::collections::VecDeque<(String, String)> = Default::default();
        let mut sent = 0;
        for i in 0..300 {
            if rng.u8(..4) > 0 {
                // Now and then a wave, past what a snapshot carries.
                let wave = if rng.u8(..20) == 0 { 1200 } else { 1 };
                for _ in 0..wave {
                    let (change, span) = generated_change(&plan, &mut rng, i);
                    model.push_back((change.endpoint.to_string(), change.reason.to_string()));
                    if model.len() > MAX_CHANGES {
                        model.pop_front();
                    }
                    p.note_change(TenantIx(0), change, &span);
                }
                continue;
            }
            let chosen: Vec<usize> = (0..3).filter(|_| rng.bool()).collect();
            for snapshot in publish(&mut p, &plan, &chosen) {
                let carried: Vec<_> = (snapshot.changes.iter())
                    .map(|c| (c.endpoint.to_string(), c.reason.to_string()))
                    .collect();
                assert_eq!(
                    carried,
                    Vec::from(std::mem::take(&mut model)),
                    "seed {seed}"
                );
                assert_eq!(snapshot.changes.capacity(), snapshot.changes.len());
                sent += 1;
            }
        }
        assert!(sent > 10, "seed {seed}: {sent} sent");
    }
}

/// Generated sequences of notes and takes: a tenant's pending changes are the latest
/// [`MAX_CHANGES`] noted since the last take, oldest first, each beside the span it was
/// noted with (the publish's causes), as a queue kept here says.
#[test]
fn pending_changes_keep_each_ones_span_beside_it_in_generated_sequences() {
    let plan = plan(3, "", "");
    for seed in 0..20 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut pending = Pending::default();
        let mut model: std::collections::VecDeque<(VerdictChange, SpanContext)> =
            Default::default();
        for i in 0..200 {
            if rng.u8(..4) == 0 {
                let (changes, causes) = pending.take();
                let expected: (Vec<_>, Vec<_>) = std::mem::take(&mut model).into_iter().unzip();
                assert_eq!((changes, causes), expected, "seed {seed}");
                continue;
            }
            let wave = if rng.u8(..20) == 0 { 1200 } else { 1 };
            for _ in 0..wave {
                let (change, span) = generated_change(&plan, &mut rng, i);
                model.push_back((change.clone(), span.clone()));
                if model.len() > MAX_CHANGES {
                    model.pop_front();
                }
                pending.note(change, &span);
            }
        }
    }
}
