//! Wiring: builds the probes, starts the sink actors, the tracker and one prober per
//! target spread over one arbiter (thread) per core.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use ho_config::Plan;
use tokio::time::Instant;

use crate::api::ApiState;
use crate::metrics::Metrics;
use crate::probe::{Probe, TlsCache, TlsError};
use crate::prober::Prober;
use crate::schedule::Schedule;
use crate::sink::Sink;
use crate::sink_actor::{Quiesce, SinkActor};
use crate::tracker::HealthTracker;

/// Why the engine cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// A target's TLS settings cannot be loaded.
    #[error("{target}: {source}")]
    Tls {
        /// The target key.
        target: String,
        /// Why.
        source: TlsError,
    },
    /// The plan names a sink that was not built.
    #[error("sink {0:?} is configured but was not built")]
    MissingSink(String),
}

/// A running engine. Dropping it stops the probers, the tracker and the sink actors
/// (writes in flight are abandoned; every sink write is atomic on its back end).
pub struct Engine {
    /// The tracker, for status queries and tests.
    pub tracker: Addr<HealthTracker>,
    /// Sink actors by sink name.
    pub sinks: BTreeMap<String, Addr<SinkActor>>,
    /// Shared metrics.
    pub metrics: Arc<Metrics>,
    arbiters: Vec<Arbiter>,
}

impl Engine {
    /// Starts everything for `plan`. Must run inside an actix system; the tracker and the
    /// sink actors live on the current arbiter, probers on their own arbiters.
    pub fn start(
        plan: Plan,
        sinks: BTreeMap<String, Arc<dyn Sink>>,
    ) -> Result<Engine, EngineError> {
        Engine::start_with(plan, sinks, Arc::new(Metrics::new()))
    }

    /// [`Engine::start`] with metrics made beforehand (the telemetry exporter counts its
    /// dropped spans in them).
    pub fn start_with(
        plan: Plan,
        sinks: BTreeMap<String, Arc<dyn Sink>>,
        metrics: Arc<Metrics>,
    ) -> Result<Engine, EngineError> {
        let mut tls = TlsCache::default();
        let probes = plan
            .targets
            .iter()
            .map(|t| {
                Probe::new(t, &mut tls).map_err(|source| EngineError::Tls {
                    target: t.key(),
                    source,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut sink_actors = BTreeMap::new();
        for (name, config) in &plan.sinks {
            let sink = sinks
                .get(name)
                .ok_or_else(|| EngineError::MissingSink(name.clone()))?;
            let actor = SinkActor::new(
                name.clone(),
                sink.clone(),
                config.delivery(),
                metrics.clone(),
            );
            sink_actors.insert(name.clone(), actor.start());
        }
        let recipients = sink_actors
            .iter()
            .map(|(name, addr)| (name.clone(), addr.clone().recipient()))
            .collect();
        let plan = Arc::new(plan);
        let tracker = HealthTracker::new(plan.clone(), &recipients, metrics.clone()).start();

        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let arbiters: Vec<Arbiter> = (0..threads.min(plan.targets.len().max(1)))
            .map(|_| Arbiter::new())
            .collect();
        let origin = Instant::now();
        let sample_ratio = if plan.telemetry.otlp_endpoint.is_some() {
            plan.telemetry.probe_sample_ratio
        } else {
            0.0
        };
        for (i, probe) in probes.into_iter().enumerate() {
            let target = &plan.targets[i];
            let schedule = Schedule::new(&target.key(), &target.check.timing, origin);
            let timing = target.check.timing;
            let recipient = tracker.clone().recipient();
            let sample = (sample_ratio, target.key());
            Prober::start_in_arbiter(&arbiters[i % arbiters.len()].handle(), move |_| {
                Prober::new(i, probe, schedule, &timing, recipient, sample)
            });
        }
        Ok(Engine {
            tracker,
            sinks: sink_actors,
            metrics,
            arbiters,
        })
    }

    /// Stops probing at once, lets sink writes in flight finish (none start) until
    /// `deadline`, then stops everything. Published records stay as they are. Returns how
    /// many writes were still in flight at the deadline.
    pub async fn shutdown(self, deadline: Duration) -> usize {
        for arbiter in &self.arbiters {
            arbiter.stop();
        }
        self.tracker.do_send(Stop);
        let until = Instant::now() + deadline;
        loop {
            let mut in_flight = 0;
            for sink in self.sinks.values() {
                in_flight += sink.send(Quiesce).await.unwrap_or(0);
            }
            if in_flight == 0 || Instant::now() >= until {
                return in_flight;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// What the HTTP API needs.
    pub fn api_state(&self) -> ApiState {
        ApiState {
            tracker: self.tracker.clone(),
            sinks: self.sinks.values().cloned().collect(),
            metrics: self.metrics.clone(),
        }
    }
}

/// Stops an actor of the engine (tracker or sink actor) when the engine is dropped, so an
/// old engine never keeps writing next to a new one.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Stop;

impl Handler<Stop> for HealthTracker {
    type Result = ();

    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

impl Handler<Stop> for SinkActor {
    type Result = ();

    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        for arbiter in &self.arbiters {
            arbiter.stop();
        }
        self.tracker.do_send(Stop);
        for sink in self.sinks.values() {
            sink.do_send(Stop);
        }
    }
}
