//! The endpoint farm and the load test. The farm: real HTTP(S) gateways on loopback whose
//! behaviour can be switched at run time (healthy, failing status, refusing, hanging,
//! resetting); the demo and the integration tests probe these instead of mocks. The load
//! test (`loadtest` binary) runs thousands of them against the real engine, injects the
//! faults of a scenario and reports what operators check before a rollout.

pub mod engine_proc;
mod gateway;
pub mod per_sink;
pub mod plots;
pub mod recorder;
pub mod rehearsal;
pub mod report;
pub mod run;
pub mod scenario;
mod shared_farm;
pub mod sink_log;

pub use gateway::{endpoints_toml, endpoints_toml_at, Behaviour, Gateway};
pub use shared_farm::SharedFarm;
