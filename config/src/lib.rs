//! Configuration of the health orchestrator: the TOML model ([`model`]), its layering
//! ([`load`]: built-in defaults < files < `HO_*` environment), pure validation ([`validate`])
//! and the resolved [`Plan`] the engine runs.
//!
//! Validation never stops at the first problem: it returns every error with the path of the
//! field that causes it, so an operator fixes a file in one pass.

pub mod explain;
pub mod load;
pub mod model;
pub mod names;
pub mod plan;
pub mod validate;

pub use load::{
    load, load_plan, load_plan_reading, load_reading, ConfigError, InvalidConfig, YamlReader,
    ENV_PREFIX,
};
pub use model::{
    Answer, BrakeConfig, Canary, CheckOverrides, ClusterConfig, Config, DampingConfig, Delivery,
    EndpointSelection, KindSettings, LeaderElectionConfig, LedgerConfig, LimitsConfig, LogFormat,
    MultiClusterConfig, OnAllUnhealthy, OtlpProtocol, ReloadConfig, Require, ResolverConfig,
    RingConfig, RoutingPolicy, SinkTable, TelemetryConfig, WeightRule,
};
pub use plan::{
    CheckSpec, Composite, Damping, Discovered, Endpoint, EndpointExtras, HostEndpoint, Plan,
    PlannedSink, Slo, SloWindow, Target, Tenant, Timing, TlsCheck,
};
pub use validate::{
    resolve_standalone_check, validate, CheckCatalog, Claim, FieldError, KindCheck, Kinds, Parsed,
    ResolvedCheck, SinkCatalog, SinkSpec, TenantUse, ValidationErrors,
};
