//! The load test (`loadtest` binary): runs thousands of the test kit's gateways
//! (`ho_testkit`) against the real engine, injects the faults of a scenario and reports what
//! operators check before a rollout.

pub mod engine_proc;
pub mod farm;
pub mod fleet;
pub mod kube_load;
pub mod per_sink;
pub mod plots;
pub mod recorder;
pub mod rehearsal;
pub mod report;
pub mod run;
pub mod scenario;
pub mod sink_log;
pub mod summary;
pub mod window;
