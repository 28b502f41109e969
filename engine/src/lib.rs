//! The probe engine: probes ([`probe`]), prober actors ([`prober`]) on one arbiter per core,
//! the [`tracker::HealthTracker`] that applies [`hysteresis`] and decides each tenant's
//! records ([`selection`]), the [`sink_actor::SinkActor`] around every [`sink::Sink`], and
//! the operator [`api`].
//!
//! Data flows one way: prober --Observations (batched per thread)--> tracker --Publish(snapshot)--> sink actors.
//! Only verdict changes reach the sinks, and they always receive a tenant's full state.

pub mod api;
pub mod backoff;
pub mod damping;
pub mod hysteresis;
pub mod metrics;
pub mod probe;
pub mod probe_limits;
pub mod prober;
pub mod schedule;
pub mod selection;
pub mod sink;
pub mod sink_actor;
pub mod snapshot;
pub mod status;
pub mod token_bucket;
pub mod trace;
pub mod tracker;

mod engine;
mod outbox;

pub use engine::{Engine, EngineError};
