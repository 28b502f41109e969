//! The probe engine: probes ([`probe`]), probers ([`prober`]: a task per target, on prober
//! threads sized to the load), the health tracker ([`tracker`]: a plain-code core in an
//! actor shell) that applies [`hysteresis`] and decides each tenant's records
//! ([`selection`]), the sink actor around every [`sink::Sink`], and the operator [`api`].
//! Callers use the [`Engine`] facade; the probers and actors are private.
//!
//! Data flows one way: prober --Observations (batched per thread)--> tracker --Publish(snapshot)--> sink actors.
//! Only verdict changes reach the sinks, and they always receive a tenant's full state.
//! A `[multi_cluster]` tenant's decision goes through [`multi_cluster`] first: the tracker
//! hands this cluster's view to the coordinator, which publishes the clusters' vote.

pub mod api;
pub mod backoff;
mod clock;
pub mod damping;
mod delivery;
pub mod drain;
pub mod events;
pub mod hysteresis;
pub mod leadership;
pub mod metrics;
pub mod multi_cluster;
pub mod observation;
pub mod probe;
pub mod probe_limits;
pub mod prober;
pub mod schedule;
pub mod selection;
pub mod sink;
pub mod snapshot;
pub mod status;
pub mod token_bucket;
pub mod trace;
pub mod tracker;

mod engine;
mod outbox;

pub use engine::{Engine, EngineError, ReloadSummary};
