//! The probe engine: probes ([`probe`]), probers (`prober`: a task per target, on prober
//! threads sized to the load), the health tracker (`tracker`: a plain-code core in an
//! actor shell) that applies [`hysteresis`] and decides each tenant's records
//! ([`selection`]), the delivery around every [`sink::Sink`] (`delivery`: a plain-code core
//! in an actor shell), the report rounds of several clusters ([`multi_cluster`]), and the
//! operator [`api`]. Callers use the [`Engine`] facade; probers, actors and their cores are
//! private, and so is every module nothing outside the crate uses.
//!
//! Data flows one way: prober --Observations (batched per thread)--> tracker --Publish(snapshot)--> sink actors.
//! Only verdict changes reach the sinks, and they always receive a tenant's full state.
//! A `[multi_cluster]` tenant's decision goes through [`multi_cluster`] first: the tracker
//! hands this cluster's view to the coordinator, which publishes the clusters' vote.

pub mod api;
mod backoff;
mod brake;
mod canary;
pub mod clock;
mod composite;
mod damping;
mod delivery;
pub mod dns_client;
mod drain;
mod events;
pub mod hosts;
pub mod hysteresis;
pub mod leadership;
pub mod ledger;
pub mod metrics;
pub mod multi_cluster;
mod observation;
pub mod probe;
mod probe_limits;
mod prober;
pub mod ring;
pub mod schedule;
pub mod secret;
pub mod selection;
pub mod sink;
pub mod snapshot;
pub mod state_file;
pub mod status;
pub mod tls_client;
pub mod token_bucket;
mod trace;
mod tracker;

mod engine;
mod outbox;

pub use drain::{Forced, OperatorState};
pub use engine::{
    Adopter, Engine, EngineError, EngineReader, Merge, Parts, ReloadError, ReloadSummary,
    SourceFuture, TenantSource,
};
/// What [`ledger::book::Book::event`] takes: the events the engine emits.
pub use events::Event;
