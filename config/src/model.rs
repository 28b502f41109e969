//! The configuration as the operator writes it: one struct per TOML table, every field documented.
//!
//! These types are the public contract (DESIGN.md §3). They only describe; [`crate::validate`]
//! turns them into a [`crate::Plan`] the engine can run.
//!
//! The top-level tables live here; checks in [`check`], endpoints, tenants and sinks in
//! [`tenant`], the tables of several clusters and replicas in [`replicas`]; every type is
//! re-exported from this module.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod check;
mod kubernetes;
mod replicas;
mod tenant;

pub use check::*;
pub use kubernetes::*;
pub use replicas::*;
pub use tenant::*;

/// The whole configuration, after layering defaults, files and environment.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where the HTTP API (`/healthz`, `/readyz`, `/status`, `/metrics`) listens.
    #[serde(default)]
    pub api: ApiConfig,
    /// Values every endpoint and tenant inherits unless it sets its own.
    #[serde(default)]
    pub defaults: Defaults,
    /// The gateways to probe. Tenants pick from these by name or label.
    #[serde(default)]
    pub endpoints: Vec<EndpointConfig>,
    /// Who gets DNS records: each tenant publishes the healthy subset of its endpoints
    /// under its domains to its sinks.
    #[serde(default)]
    pub tenants: Vec<TenantConfig>,
    /// Named DNS back ends. Tenants refer to them by name, so one back end can serve many tenants.
    #[serde(default)]
    pub sinks: BTreeMap<String, SinkTable>,
    /// Identifies this orchestrator in the ownership marks it leaves on the records it
    /// writes (PowerDNS rrset comments), so two instances never fight over one record.
    #[serde(default = "default_owner_id")]
    pub owner_id: String,
    /// Traces to an OTLP collector and the log format.
    #[serde(default)]
    pub telemetry: TelemetryConfig,
    /// Reloading the config while running.
    #[serde(default)]
    pub reload: ReloadConfig,
    /// Ceilings that keep the process inside its resources.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// A ceiling on how many addresses leave DNS per window, per tenant and in all.
    #[serde(default)]
    pub brake: BrakeConfig,
    /// Several replicas: only the holder of a Kubernetes Lease writes shared back ends.
    #[serde(default)]
    pub leader_election: LeaderElectionConfig,
    /// Several replicas share the probing: each target is probed by `replication` of them.
    #[serde(default)]
    pub ring: RingConfig,
    /// This instance's identity among clusters.
    #[serde(default)]
    pub cluster: ClusterConfig,
    /// Several clusters share one zone and vote on each address.
    #[serde(default)]
    pub multi_cluster: MultiClusterConfig,
    /// Tenants as namespaced Kubernetes resources, and what each namespace may claim.
    #[serde(default)]
    pub kubernetes: KubernetesConfig,
    /// How endpoints given by host name are resolved.
    #[serde(default)]
    pub resolver: ResolverConfig,
    /// Folder for what must survive a restart: operator drains (`drains.json`), heartbeats
    /// (`heartbeats.json`), what a `dns_server` with `reports` knew of its peers
    /// (`reports-<sink>.json`). Required with `api.admin_token_file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_dir: Option<PathBuf>,
    /// The availability ledger (`<state_dir>/ledger/`).
    #[serde(default)]
    pub ledger: LedgerConfig,
}

/// `[ledger]`: each name's history of what it served, kept under `state_dir` (in memory,
/// 30 days, without one).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LedgerConfig {
    /// How long history is kept: 25 months by default, so a month can be compared with the
    /// same month a year and more before (as Checkly keeps 25 months of aggregates).
    #[serde(default = "default_ledger_retention", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub retention: Duration,
    /// Whether a replica records while it is not the writer: its own view (what the
    /// canary sees each back end answer, what it writes to its local outputs), so that
    /// a new writer's ledger already holds the time before it took over. For replicas
    /// with a `state_dir` each (a StatefulSet's volumes). Off by default because
    /// replicas that mount one `state_dir` must not both append to it: there only the
    /// writer records, and a standby that finds another replica's recent mark in the
    /// folder defers to it even when this is on.
    #[serde(default)]
    pub standbys_record: bool,
}

impl Default for LedgerConfig {
    fn default() -> Self {
        LedgerConfig {
            retention: default_ledger_retention(),
            standbys_record: false,
        }
    }
}

fn default_ledger_retention() -> Duration {
    // humantime's month: 30.44 days.
    Duration::from_secs(25 * 2_630_016)
}

/// `[resolver]`: endpoints whose `address` is a host name (a cloud load balancer's) are
/// looked up here, again whenever their answer's TTL runs out (kept between `min_refresh`
/// and `max_refresh`), and every address they resolve to is probed and published.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolverConfig {
    /// Recursive resolvers to ask, in order (e.g. `["10.96.0.10:53"]`); default: the
    /// `nameserver` lines of `/etc/resolv.conf`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<SocketAddr>,
    /// How long one server may take to answer before the next is asked.
    #[serde(default = "default_resolver_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub timeout: Duration,
    /// The shortest time between two lookups of a name, whatever its TTL.
    #[serde(default = "default_min_refresh", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub min_refresh: Duration,
    /// The longest time between two lookups of a name, whatever its TTL.
    #[serde(default = "default_max_refresh", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub max_refresh: Duration,
}

impl Default for ResolverConfig {
    fn default() -> Self {
        ResolverConfig {
            servers: Vec::new(),
            timeout: default_resolver_timeout(),
            min_refresh: default_min_refresh(),
            max_refresh: default_max_refresh(),
        }
    }
}

fn default_resolver_timeout() -> Duration {
    Duration::from_secs(2)
}

fn default_min_refresh() -> Duration {
    Duration::from_secs(5)
}

fn default_max_refresh() -> Duration {
    Duration::from_secs(300)
}

/// `[limits]`: ceilings that keep one process inside its machine. Hitting one is logged
/// and counted (`probes_waited_total`), never absorbed silently and never turned into a
/// false verdict.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Most endpoints one config may list. A larger config is refused (at a reload the
    /// running config stays), so a generated config gone wrong cannot exhaust the machine.
    #[serde(default = "default_max_endpoints")]
    pub max_endpoints: usize,
    /// Most probes in flight at once (each holds a socket). 0 derives it from the process's
    /// open-file limit, keeping 256 descriptors for sinks, the API and logs, and one for
    /// each target that keeps its connection (`reuse_connection`) at start-up: a probe
    /// that would find no descriptor waits for one instead of failing and marking a
    /// healthy endpoint down.
    #[serde(default)]
    pub max_concurrent_probes: usize,
}

/// `[brake]`: the blast-radius brake. However many endpoints fail at once, at most this
/// many addresses are withdrawn per `window`: past it, further withdrawals wait (the
/// addresses stay published) until the window frees up or an operator releases them
/// (`POST /v1/brake/release`). A prober that is itself failing (its network, its node)
/// sees many healthy gateways fail at once; the brake bounds what that can take out of
/// DNS, while a real failure of a few gateways goes through at once. Off unless a limit is
/// set.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BrakeConfig {
    /// The sliding window the limits count withdrawals over.
    #[serde(default = "default_brake_window", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub window: Duration,
    /// Most addresses one tenant withdraws per window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_tenant: Option<u32>,
    /// Most addresses one tenant withdraws per window as a share of what it published
    /// (rounded up, at least 1), e.g. 0.34: a third.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_tenant_share: Option<f64>,
    /// Most addresses withdrawn per window across every tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u32>,
    /// Self-check: when at least this share of all targets turns from up to down within
    /// `impaired_window` (and at least `impaired_min_targets` of them), this prober judges
    /// itself impaired (its own network, not the gateways) and holds every withdrawal and
    /// vote until fewer than half that share are down, or an operator releases the brake.
    /// 0 turns the self-check off.
    #[serde(default = "default_impaired_share")]
    pub impaired_share: f64,
    /// The fewest targets that must turn down at once for the self-check to act (a small
    /// deployment's few failures are never taken for the prober's own).
    #[serde(default = "default_impaired_min_targets")]
    pub impaired_min_targets: u32,
    /// The window the self-check counts targets turning down over.
    #[serde(default = "default_impaired_window", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub impaired_window: Duration,
}

fn default_impaired_share() -> f64 {
    0.5
}

fn default_impaired_min_targets() -> u32 {
    20
}

fn default_impaired_window() -> Duration {
    Duration::from_secs(10)
}

fn default_brake_window() -> Duration {
    Duration::from_secs(60)
}

impl Default for BrakeConfig {
    fn default() -> Self {
        BrakeConfig {
            window: default_brake_window(),
            per_tenant: None,
            per_tenant_share: None,
            total: None,
            impaired_share: default_impaired_share(),
            impaired_min_targets: default_impaired_min_targets(),
            impaired_window: default_impaired_window(),
        }
    }
}

impl BrakeConfig {
    /// Whether any limit is set.
    pub fn enabled(&self) -> bool {
        self.per_tenant.is_some() || self.per_tenant_share.is_some() || self.total.is_some()
    }
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_endpoints: default_max_endpoints(),
            max_concurrent_probes: 0,
        }
    }
}

fn default_max_endpoints() -> usize {
    200_000
}

/// `[reload]`: SIGHUP always reloads; `watch` also reloads when a config file changes.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReloadConfig {
    /// Re-read the config files every `interval` and reload when their content changed
    /// (works with Kubernetes ConfigMap mounts, which swap files by symlink).
    #[serde(default)]
    pub watch: bool,
    /// How often `watch` reads the files.
    #[serde(default = "default_watch_interval", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub interval: Duration,
}

impl Default for ReloadConfig {
    fn default() -> Self {
        ReloadConfig {
            watch: false,
            interval: default_watch_interval(),
        }
    }
}

fn default_watch_interval() -> Duration {
    Duration::from_secs(1)
}

/// `[telemetry]`: where traces go and how logs look. Traces are off without `otlp_endpoint`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// Collector base URL, e.g. `http://otel-collector:4318` (http/protobuf; `/v1/traces` is
    /// appended) or `http://otel-collector:4317` (grpc). Unset: no traces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otlp_endpoint: Option<String>,
    /// `http/protobuf` (default) or `grpc`.
    #[serde(default)]
    pub otlp_protocol: OtlpProtocol,
    /// `service.name` of the spans.
    #[serde(default = "default_service_name")]
    pub service_name: String,
    /// More resource attributes (`deployment.environment`, `k8s.cluster.name`, ...).
    #[serde(default)]
    pub resource_attributes: BTreeMap<String, String>,
    /// Share of probes traced, 0.0-1.0. Transitions, publishes and sink writes are always
    /// traced; probes are many, so only a sample.
    #[serde(default = "default_probe_sample_ratio")]
    pub probe_sample_ratio: f64,
    /// Extra request headers (gRPC metadata). Secrets belong in the standard
    /// `OTEL_EXPORTER_OTLP_HEADERS` environment variable instead, which is merged in.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Deadline of one export.
    #[serde(default = "default_export_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub timeout: Duration,
    /// Spans waiting for export at most; more are dropped and counted
    /// (`health_orchestrator_telemetry_spans_dropped_total`), so a slow or unreachable
    /// collector never slows probing.
    #[serde(default = "default_queue_size")]
    pub queue_size: usize,
    /// `pretty` (default) or `json` log lines on stderr.
    #[serde(default)]
    pub log_format: LogFormat,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            otlp_endpoint: None,
            otlp_protocol: OtlpProtocol::default(),
            service_name: default_service_name(),
            resource_attributes: BTreeMap::new(),
            probe_sample_ratio: default_probe_sample_ratio(),
            headers: BTreeMap::new(),
            timeout: default_export_timeout(),
            queue_size: default_queue_size(),
            log_format: LogFormat::default(),
        }
    }
}

/// OTLP transport.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum OtlpProtocol {
    /// Protobuf over HTTP POST to `<endpoint>/v1/traces`.
    #[default]
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
    /// gRPC `TraceService/Export`.
    #[serde(rename = "grpc")]
    Grpc,
}

/// Log line format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// Human-readable, coloured on a terminal (also spelt `text`).
    #[default]
    #[serde(alias = "text")]
    Pretty,
    /// One JSON object per line, for log shippers.
    Json,
}

fn default_service_name() -> String {
    "health-orchestrator".into()
}
fn default_probe_sample_ratio() -> f64 {
    0.001
}
fn default_export_timeout() -> Duration {
    Duration::from_secs(5)
}
fn default_queue_size() -> usize {
    4096
}

/// The ownership mark used when `owner_id` is not set.
pub const DEFAULT_OWNER_ID: &str = "health-orchestrator";

fn default_owner_id() -> String {
    DEFAULT_OWNER_ID.into()
}

/// `[api]`: the operator-facing HTTP endpoint.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApiConfig {
    /// Socket address to bind, e.g. `0.0.0.0:8080`. Port 0 picks a free port (tests, demo).
    pub listen: SocketAddr,
    /// File holding a bearer token required for `/status` and `/metrics` (`/healthz` and
    /// `/readyz` stay open for liveness and readiness probes). Unset: no token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<PathBuf>,
    /// File holding the bearer token of operator actions (`POST /v1/endpoints/NAME/drain`
    /// and `/undrain`). Unset: the API is read-only and refuses them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_token_file: Option<PathBuf>,
    /// File holding the bearer token endpoints of kind `heartbeat` send their heartbeats
    /// with (`POST /v1/heartbeat/NAME`), unless their check names its own `token_file`.
    /// Unset: only endpoints with their own token can push.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_token_file: Option<PathBuf>,
    /// Requests per second the API answers (bursts of twice that); more get 429. Keeps a
    /// scraper gone wild or a scan from taking CPU from the probes.
    #[serde(default = "default_api_rate")]
    pub max_requests_per_second: f64,
}

fn default_api_rate() -> f64 {
    50.0
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([0, 0, 0, 0], 8080)),
            token_file: None,
            admin_token_file: None,
            heartbeat_token_file: None,
            max_requests_per_second: default_api_rate(),
        }
    }
}

/// `[defaults]`: inherited values.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    /// The health check every endpoint runs; an endpoint's own `check` table overrides it
    /// field by field.
    #[serde(default)]
    pub check: CheckOverrides,
    /// How long a tenant waits at start-up for every one of its endpoints to get a verdict
    /// before it publishes anyway (endpoints still unknown then count as unhealthy).
    /// Publishing before verdicts would write a partial set over a good one after a restart.
    #[serde(
        default,
        with = "humantime_serde::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>")]
    pub startup_grace: Option<Duration>,
    /// At SIGTERM/SIGINT, how long sink writes in flight may take to finish (and queued
    /// spans to be exported) before the process exits. Published records are never
    /// withdrawn at shutdown.
    #[serde(default = "default_shutdown_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub shutdown_timeout: Duration,
}

fn default_shutdown_timeout() -> Duration {
    Duration::from_secs(10)
}
