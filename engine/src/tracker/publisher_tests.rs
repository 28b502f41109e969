//! [`Publisher`] alone, without verdicts: what it sends for a decision, what it does not
//! send again, and the last word of a tenant a reload removes.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::core::{Clock, Effect};
use super::index::TenantIx;
use super::publisher::{Decided, Publisher};
use super::tests::plan;
use crate::brake::Brake;
use crate::events::Events;
use crate::hysteresis::Health;
use crate::metrics::Metrics;
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
                reason: format!("change {i}"),
                trace: opentelemetry::trace::SpanContext::NONE,
            },
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
