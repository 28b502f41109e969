//! The actor around every sink: coalesces snapshots (latest wins), runs one write per
//! tenant at a time, retries failures with exponential backoff and jitter, and keeps the
//! status and metrics. Sinks themselves only know how to write.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use actix::prelude::*;
use tracing::{debug, warn};

use crate::backoff::ExponentialBackoff;
use crate::metrics::{Metrics, SinkLabel, SinkResultLabels};
use crate::sink::{Applied, Sink, SinkError};
use crate::snapshot::TenantSnapshot;
use crate::status::{unix_seconds, SinkErrorStatus, SinkStatus, SinkTenantStatus};

/// A new desired state for one tenant.
#[derive(Message, Clone)]
#[rtype(result = "()")]
pub struct Publish(pub Arc<TenantSnapshot>);

/// Asks for this sink's part of `/status`.
#[derive(Message)]
#[rtype(result = "SinkStatus")]
pub struct GetSinkStatus;

/// Per-tenant write state.
struct Slot {
    /// Latest snapshot received: the only one that will ever be written.
    desired: Arc<TenantSnapshot>,
    written_seq: Option<u64>,
    in_flight: bool,
    retry: Option<SpawnHandle>,
    attempts: u32,
    last_success: Option<SystemTime>,
    last_error: Option<(SystemTime, SinkError)>,
}

/// Drives one [`Sink`].
pub struct SinkActor {
    name: String,
    sink: Arc<dyn Sink>,
    backoff: ExponentialBackoff,
    slots: BTreeMap<String, Slot>,
    metrics: Arc<Metrics>,
}

impl SinkActor {
    /// Wraps `sink` under the name `name`.
    pub fn new(
        name: String,
        sink: Arc<dyn Sink>,
        backoff: ExponentialBackoff,
        metrics: Arc<Metrics>,
    ) -> SinkActor {
        SinkActor {
            name,
            sink,
            backoff,
            slots: BTreeMap::new(),
            metrics,
        }
    }

    /// The retry policy used when a sink does not configure its own: 200 ms doubling to 30 s,
    /// up to 20% shorter at random.
    pub fn default_backoff() -> ExponentialBackoff {
        ExponentialBackoff::try_new(Duration::from_millis(200), Duration::from_secs(30), 0.2)
            .expect("valid constants")
    }

    fn write(&mut self, tenant: &str, ctx: &mut Context<Self>) {
        let Some(slot) = self.slots.get_mut(tenant) else {
            return;
        };
        if let Some(handle) = slot.retry.take() {
            ctx.cancel_future(handle);
        }
        slot.in_flight = true;
        let snapshot = slot.desired.clone();
        let tenant = tenant.to_owned();
        ctx.spawn(
            self.sink
                .apply(snapshot.clone())
                .into_actor(self)
                .map(move |result, act, ctx| act.written(&tenant, &snapshot, result, ctx)),
        );
    }

    fn written(
        &mut self,
        tenant: &str,
        snapshot: &TenantSnapshot,
        result: Result<Applied, SinkError>,
        ctx: &mut Context<Self>,
    ) {
        let Some(slot) = self.slots.get_mut(tenant) else {
            return;
        };
        slot.in_flight = false;
        let label = match &result {
            Ok(Applied::Changed) => "changed",
            Ok(Applied::Unchanged) => "unchanged",
            Err(_) => "error",
        };
        self.metrics
            .sink_writes
            .get_or_create(&SinkResultLabels {
                sink: self.name.clone(),
                result: label,
            })
            .inc();
        match result {
            Ok(applied) => {
                slot.attempts = 0;
                slot.written_seq = Some(snapshot.seq);
                slot.last_success = Some(SystemTime::now());
                slot.last_error = None;
                self.metrics
                    .failover_seconds
                    .get_or_create(&SinkLabel {
                        sink: self.name.clone(),
                    })
                    .observe(snapshot.cause_at.elapsed().as_secs_f64());
                debug!(sink = %self.name, tenant, seq = snapshot.seq, ?applied, "written");
            }
            Err(e) => {
                slot.attempts += 1;
                warn!(sink = %self.name, tenant, seq = snapshot.seq, attempt = slot.attempts, retriable = e.retriable, "write failed: {e}");
                slot.last_error = Some((SystemTime::now(), e));
            }
        }
        if slot.desired.seq != snapshot.seq {
            // A newer snapshot arrived during the write: write it now.
            self.write(tenant, ctx);
        } else if slot.last_error.as_ref().is_some_and(|(_, e)| e.retriable) {
            let delay = self.backoff.delay(slot.attempts, fastrand::f64());
            let tenant = tenant.to_owned();
            slot.retry = Some(ctx.run_later(delay, move |act, ctx| {
                if let Some(slot) = act.slots.get_mut(&tenant) {
                    slot.retry = None;
                }
                act.write(&tenant, ctx);
            }));
        }
    }
}

impl Actor for SinkActor {
    type Context = Context<Self>;
}

impl Handler<Publish> for SinkActor {
    type Result = ();

    fn handle(&mut self, msg: Publish, ctx: &mut Context<Self>) {
        let snapshot = msg.0;
        let tenant = snapshot.tenant.clone();
        let slot = self.slots.entry(tenant.clone()).or_insert_with(|| Slot {
            desired: snapshot.clone(),
            written_seq: None,
            in_flight: false,
            retry: None,
            attempts: 0,
            last_success: None,
            last_error: None,
        });
        if snapshot.seq < slot.desired.seq {
            return;
        }
        slot.desired = snapshot;
        // A write in flight picks up the newer snapshot when it finishes (coalescing);
        // otherwise write now, even if a retry was waiting: the new state may succeed.
        if !slot.in_flight {
            self.write(&tenant, ctx);
        }
    }
}

impl Handler<GetSinkStatus> for SinkActor {
    type Result = MessageResult<GetSinkStatus>;

    fn handle(&mut self, _: GetSinkStatus, _: &mut Context<Self>) -> Self::Result {
        let tenants = self
            .slots
            .iter()
            .map(|(tenant, slot)| SinkTenantStatus {
                tenant: tenant.clone(),
                desired_seq: slot.desired.seq,
                written_seq: slot.written_seq,
                attempts: slot.attempts,
                last_success: slot.last_success.map(unix_seconds),
                last_error: slot.last_error.as_ref().map(|(at, e)| SinkErrorStatus {
                    at: unix_seconds(*at),
                    message: e.message.clone(),
                    retrying: e.retriable,
                }),
            })
            .collect();
        MessageResult(SinkStatus {
            name: self.name.clone(),
            kind: self.sink.kind(),
            tenants,
        })
    }
}
