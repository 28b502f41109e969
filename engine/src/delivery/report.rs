//! What a finished write tells operators, said once: the `sink_*` metrics, the `/events`
//! line, the trace span under the snapshot's publish span, and the log line.

use std::time::SystemTime;

use opentelemetry::KeyValue;
use tracing::{debug, warn};

use crate::events::{Event, Events};
use crate::metrics::{Metrics, SinkLabel, SinkResultLabels};
use crate::sink::{Applied, SinkError};
use crate::snapshot::TenantSnapshot;
use crate::status::unix_seconds;
use crate::trace;

use super::core::{result_label, Cause, Finished, Now, Write};

/// Where a sink's reports go.
pub(super) struct Reporter {
    /// The sink's name.
    pub name: String,
    /// The sink's kind, for traces.
    pub kind: &'static str,
    /// The engine's metrics.
    pub metrics: std::sync::Arc<Metrics>,
    /// `/events`.
    pub events: Events,
}

impl Reporter {
    fn label(&self) -> SinkLabel {
        SinkLabel {
            sink: self.name.clone(),
        }
    }

    /// Sets the gauges of tenants waiting for a write, and of writes queued for a place in
    /// flight or a token.
    pub(super) fn backlog(&self, pending: usize, queued: usize) {
        let label = self.label();
        self.metrics
            .sink_pending
            .get_or_create(&label)
            .set(pending as i64);
        self.metrics
            .sink_writes_queued
            .get_or_create(&label)
            .set(queued as i64);
    }

    /// A write started at `started` ended with `result`; `finished` is what the core made
    /// of it (`None`: the tenant was forgotten meanwhile).
    pub(super) fn write_finished(
        &self,
        write: &Write,
        started: SystemTime,
        result: &Result<Applied, SinkError>,
        finished: Option<&Finished>,
        now: Now,
    ) {
        let label = result_label(result);
        let snapshot = &write.snapshot;
        self.metrics
            .sink_writes
            .get_or_create(&SinkResultLabels {
                sink: self.name.clone(),
                result: label,
            })
            .inc();
        self.events.emit(|| Event::SinkWrite {
            at: crate::events::now(),
            sink: self.name.clone(),
            tenant: write.tenant.clone(),
            seq: snapshot.seq,
            result: label,
            error: result.as_ref().err().map(|e| e.message.clone()),
        });
        self.trace(write, started, result);
        let Some(finished) = finished else {
            return;
        };
        match result {
            Ok(applied) => self.succeeded(snapshot, write.cause, *applied, finished, now),
            Err(e) => {
                if e.throttled {
                    self.metrics
                        .sink_throttled
                        .get_or_create(&self.label())
                        .inc();
                }
                warn!(sink = %self.name, tenant = %write.tenant, seq = snapshot.seq, attempt = finished.attempts, retriable = e.retriable, throttled = e.throttled, "write failed: {e}");
            }
        }
    }

    fn succeeded(
        &self,
        snapshot: &TenantSnapshot,
        cause: Cause,
        applied: Applied,
        finished: &Finished,
        now: Now,
    ) {
        self.metrics
            .sink_last_success
            .get_or_create(&self.label())
            .set(unix_seconds(now.clock.wall));
        if finished.first_of_seq {
            let failover = now.clock.mono.saturating_duration_since(snapshot.cause_at);
            self.metrics
                .failover_seconds
                .get_or_create(&self.label())
                .observe(failover.as_secs_f64());
        }
        let tenant = &snapshot.tenant;
        if cause == Cause::Reconcile && applied == Applied::Changed {
            warn!(sink = %self.name, tenant, seq = snapshot.seq, "drift repaired: the back end had been changed by someone else");
        } else {
            debug!(sink = %self.name, tenant, seq = snapshot.seq, applied = %applied.as_str(), cause = %cause.as_str(), "written");
        }
    }

    /// A span under the snapshot's publish span, for writes that carry a change: first
    /// writes and their retries, and reconciles that repaired drift (routine reconciles
    /// that found nothing would only bury the failover in noise).
    fn trace(&self, write: &Write, started: SystemTime, result: &Result<Applied, SinkError>) {
        if write.cause == Cause::Reconcile && !matches!(result, Ok(Applied::Changed)) {
            return;
        }
        let error = result.as_ref().err().map(|e| e.message.as_str());
        let snapshot = &write.snapshot;
        let mut attributes = vec![
            KeyValue::new("sink", self.name.clone()),
            KeyValue::new("sink.kind", self.kind),
            KeyValue::new("tenant", snapshot.tenant.clone()),
            KeyValue::new("seq", snapshot.seq as i64),
            KeyValue::new("attempt", i64::from(write.attempt)),
            KeyValue::new("cause", write.cause.as_str()),
            KeyValue::new("result", result_label(result)),
        ];
        if let Some(message) = error {
            attributes.push(KeyValue::new("error", message.to_string()));
        }
        trace::sink_write(&snapshot.trace, started, error, attributes);
    }
}
