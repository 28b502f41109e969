//! What the tracker tells operators about its decisions: transition and publish log lines,
//! spans and metrics. Kept apart from the decisions themselves so the core reads as rules.

use std::sync::Arc;

use ho_config::{Plan, Tenant};
use opentelemetry::trace::SpanContext;
use opentelemetry::KeyValue;
use tracing::{info, warn};

use crate::hysteresis::{Health, Transition};
use crate::metrics::{Metrics, TenantLabel, TransitionLabel};
use crate::snapshot::{PublishedAddress, TenantSnapshot};
use crate::trace;

use super::index::TargetIx;

/// Logs, counts and traces a verdict change of `target`; returns its span, the parent of
/// the publish it causes.
pub fn transition(
    plan: &Plan,
    metrics: &Metrics,
    target: TargetIx,
    names: &[&str],
    t: Transition,
    reason: &str,
) -> SpanContext {
    let spec = &plan.targets[target.0];
    let timing = &spec.check.timing;
    let key = spec.key();
    let (count, threshold) = if t.to == Health::Up {
        ("successes", timing.rise)
    } else {
        ("failures", timing.fall)
    };
    let message = format!("{} -> {}", t.from.as_str(), t.to.as_str());
    let span = trace::transition(vec![
        KeyValue::new("endpoint.names", names.join(",")),
        KeyValue::new("target", key.clone()),
        KeyValue::new("address", spec.address.to_string()),
        KeyValue::new("from", t.from.as_str()),
        KeyValue::new("to", t.to.as_str()),
        KeyValue::new("reason", reason.to_owned()),
        KeyValue::new("consecutive", i64::from(threshold)),
    ]);
    if t.to == Health::Down {
        warn!(endpoints = ?names, target = %key, %reason, trace_id = trace_id(&span), "{message} after {threshold} consecutive {count}");
    } else {
        info!(endpoints = ?names, target = %key, %reason, trace_id = trace_id(&span), "{message} after {threshold} consecutive {count}");
    }
    metrics
        .transitions
        .get_or_create(&TransitionLabel { to: t.to.as_str() })
        .inc();
    span
}

/// The publish span of a new snapshot, child of the transitions that caused it.
pub fn publish_span(
    tenant: &Tenant,
    seq: u64,
    mode: &'static str,
    addresses: usize,
    causes: &[SpanContext],
) -> SpanContext {
    trace::publish(
        causes,
        vec![
            KeyValue::new("tenant", tenant.name.clone()),
            KeyValue::new("seq", seq as i64),
            KeyValue::new("mode", mode),
            KeyValue::new("records.addresses", addresses as i64),
            KeyValue::new("records.domains", tenant.domains.len() as i64),
            KeyValue::new("changes", causes.len() as i64),
        ],
    )
}

/// Logs and counts a snapshot about to be sent to the tenant's sinks.
pub fn published(metrics: &Metrics, snapshot: &Arc<TenantSnapshot>) {
    info!(
        tenant = %snapshot.tenant,
        seq = snapshot.seq,
        mode = %snapshot.mode.as_str(),
        count = snapshot.addresses.len(),
        addresses = %AddressList(&snapshot.addresses),
        trace_id = trace_id(&snapshot.trace),
        "publish"
    );
    metrics
        .dns_updates
        .get_or_create(&TenantLabel {
            tenant: snapshot.tenant.clone(),
        })
        .inc();
}

/// A span's trace id for log lines, so logs and traces join; absent (no empty field)
/// when tracing is off.
fn trace_id(
    span: &SpanContext,
) -> Option<tracing::field::DisplayValue<opentelemetry::trace::TraceId>> {
    span.is_valid()
        .then(|| tracing::field::display(span.trace_id()))
}

/// Formats addresses only when the log line is actually written (10,000 of them are not
/// worth formatting for a filtered-out line). Long lists are cut after 20.
struct AddressList<'a>(&'a [PublishedAddress]);

impl std::fmt::Display for AddressList<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, a) in self.0.iter().take(20).enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}", a.address)?;
        }
        if self.0.len() > 20 {
            write!(f, ",... ({} more)", self.0.len() - 20)?;
        }
        Ok(())
    }
}
