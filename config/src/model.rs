//! The configuration as the operator writes it: one struct per TOML table, every field documented.
//!
//! These types are the public contract (DESIGN.md §3). They only describe; [`crate::validate`]
//! turns them into a [`crate::Plan`] the engine can run.
//!
//! Over 500 lines because it is the config schema: every field carries the doc comment
//! operators read; splitting it by table would scatter the one place that lists them.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};

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
    /// Several replicas: only the holder of a Kubernetes Lease writes shared back ends.
    #[serde(default)]
    pub leader_election: LeaderElectionConfig,
    /// This instance's identity among clusters.
    #[serde(default)]
    pub cluster: ClusterConfig,
    /// Several clusters share one zone and vote on each address.
    #[serde(default)]
    pub multi_cluster: MultiClusterConfig,
    /// Folder for what must survive a restart: operator drains (`drains.json`). Required
    /// with `api.admin_token_file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_dir: Option<PathBuf>,
}

/// `[cluster]`: which cluster (vantage point) this instance is. Without `id`: in
/// Kubernetes, a hash of the `kube-system` namespace's UID (stable for the cluster's life,
/// the same in every replica); elsewhere, a hash of `/etc/machine-id`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// 1-16 characters of `a-z`, `0-9` and `-`, e.g. `eu1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Kubeconfig to read the `kube-system` namespace with; default: the in-cluster
    /// service account when running in Kubernetes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<PathBuf>,
}

/// `[multi_cluster]`: several orchestrators, one per cluster, publish the same names into
/// one shared zone. Each writes only its own report record per tenant (the addresses it
/// owns, the addresses it sees down); every cluster computes the published set from the
/// live reports with the same rule, so they agree without talking to each other, and an
/// address leaves DNS only when `failure_threshold` of the live clusters see it down.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MultiClusterConfig {
    /// Off: this instance's own verdicts decide (one vantage point).
    #[serde(default)]
    pub enabled: bool,
    /// Share of live clusters that must report an address down before it is withdrawn
    /// (`down / live >= threshold`; Kuadrant's `MultiClusterFailureThreshold`, 0.66: two of
    /// three).
    #[serde(default = "default_failure_threshold")]
    pub failure_threshold: f64,
    /// How often this cluster refreshes its report and reads the others'. Each round costs
    /// zone API calls (see the README's budget for Route53's 5 requests a second).
    #[serde(default = "default_report_interval", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub report_interval: Duration,
    /// A report older than this no longer counts as a live voter: its cluster's addresses
    /// stay as last known and its down votes stop counting.
    #[serde(default = "default_report_ttl", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub report_ttl: Duration,
}

impl Default for MultiClusterConfig {
    fn default() -> Self {
        MultiClusterConfig {
            enabled: false,
            failure_threshold: default_failure_threshold(),
            report_interval: default_report_interval(),
            report_ttl: default_report_ttl(),
        }
    }
}

fn default_failure_threshold() -> f64 {
    0.66
}

fn default_report_interval() -> Duration {
    Duration::from_secs(2)
}

fn default_report_ttl() -> Duration {
    Duration::from_secs(15)
}

/// `[leader_election]`: run several replicas; every one probes and keeps its state warm,
/// only the holder of the Lease `namespace/name` (coordination.k8s.io/v1) writes to back
/// ends the replicas share. Durations keep client-go's names and meaning.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaderElectionConfig {
    /// Off: this process always writes (one replica).
    #[serde(default)]
    pub enabled: bool,
    /// The Lease's namespace. Unset: the pod's own namespace (from its service account).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The Lease's name.
    #[serde(default = "default_lease_name")]
    pub name: String,
    /// How long standbys wait, after the Lease last changed, before taking it over.
    #[serde(default = "default_lease_duration", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub lease_duration: Duration,
    /// How long the leader keeps writing after its last successful renewal started;
    /// shorter than `lease_duration`, so it stops before anyone may take over.
    #[serde(default = "default_renew_deadline", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub renew_deadline: Duration,
    /// Time between attempts to acquire or renew.
    #[serde(default = "default_retry_period", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub retry_period: Duration,
    /// This replica's name in the Lease. Unset: `$HOSTNAME` (the pod name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// A kubeconfig file. Unset: the in-cluster service account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<PathBuf>,
}

impl Default for LeaderElectionConfig {
    fn default() -> Self {
        LeaderElectionConfig {
            enabled: false,
            namespace: None,
            name: default_lease_name(),
            lease_duration: default_lease_duration(),
            renew_deadline: default_renew_deadline(),
            retry_period: default_retry_period(),
            identity: None,
            kubeconfig: None,
        }
    }
}

fn default_lease_name() -> String {
    "health-orchestrator".into()
}

fn default_lease_duration() -> Duration {
    Duration::from_secs(15)
}

fn default_renew_deadline() -> Duration {
    Duration::from_secs(10)
}

fn default_retry_period() -> Duration {
    Duration::from_secs(2)
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

/// The protocol a health check speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CheckKind {
    /// HTTP/1.1 GET, healthy when the status is expected (and the body matches, if asked).
    Http,
    /// Like `http`, over TLS.
    Https,
    /// Healthy when a TCP connection is accepted within the timeout.
    Tcp,
}

/// A health check, every field optional so that `[defaults.check]` and an endpoint's `check`
/// can each set a few fields and be merged field by field (endpoint wins).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckOverrides {
    /// `http`, `https` or `tcp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<CheckKind>,
    /// TCP port on the endpoint's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// HTTP request path (http/https only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Time between two scheduled probes of a settled endpoint.
    #[serde(
        default,
        with = "humantime_serde::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>")]
    pub interval: Option<Duration>,
    /// Hard deadline over the whole probe (connect + TLS + request + body). Must be shorter
    /// than `interval` so probes of one target never overlap. Default: 500 ms, or 0.8 x
    /// `interval` when that is shorter.
    #[serde(
        default,
        with = "humantime_serde::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>")]
    pub timeout: Option<Duration>,
    /// Consecutive successes that turn a down (or unknown) endpoint up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rise: Option<u32>,
    /// Consecutive failures that turn an up (or unknown) endpoint down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fall: Option<u32>,
    /// Re-check delay while a result disagrees with the current state, so a verdict settles
    /// in `interval + (fall-1)·fast_interval` instead of `fall·interval`. Default: 100 ms,
    /// or `interval` when that is shorter.
    #[serde(
        default,
        with = "humantime_serde::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>")]
    pub fast_interval: Option<Duration>,
    /// HTTP status codes that count as healthy: codes and ranges (`[200, "300-399"]`,
    /// Kuadrant's probes accept 200 and 201), expanded into codes when read.
    #[serde(
        default,
        deserialize_with = "status_codes",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<Vec<StatusEntry>>")]
    pub expect_status: Option<Vec<u16>>,
    /// `Host` header, and the TLS server name for https (default: the endpoint's address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Extra request headers, e.g. an auth token the health endpoint wants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// Request headers whose values are read from files (a mounted Secret), at load and at
    /// every reload: `{ Authorization = "/run/secrets/probe-token" }`. The values are never
    /// logged or shown; only the file names are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers_from_files: Option<BTreeMap<String, PathBuf>>,
    /// https only: accept any certificate. Opt-in because it hides a broken certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure: Option<bool>,
    /// https only: PEM file of CA certificates to trust instead of the system roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// Healthy only if the response body contains this text (within `body_limit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_contains: Option<String>,
    /// Most body bytes read when `body_contains` is set; a larger body is judged on its prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_limit: Option<usize>,
    /// http/https only: keep the connection open between probes (HTTP/1.1 keep-alive, TLS
    /// session kept) instead of opening one per probe. Off by default: a reused connection
    /// does not see faults that only new connections meet (a firewall rule, a full accept
    /// queue, conntrack), so a fresh one is still opened after every failure and at least
    /// every `fresh_connection_every` probes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reuse_connection: Option<bool>,
    /// With `reuse_connection`: most probes carried by one connection (default 10), so new
    /// connections are still tested at least every `fresh_connection_every` intervals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fresh_connection_every: Option<u32>,
    /// Flap damping: an endpoint that keeps going down and up is held out of DNS until it
    /// has been calm for a while. Off unless this table is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damping: Option<DampingConfig>,
    /// Local address probes leave from (HAProxy's `source`): on a multi-homed host, the
    /// interface whose path to the gateways is the one to judge; the same family as the
    /// endpoint's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_address: Option<IpAddr>,
}

/// `damping = { ... }`: route-flap damping as BGP does it (RFC 2439), applied to endpoint
/// verdicts. Each time the endpoint goes down its penalty grows by `penalty`; the penalty
/// halves every `half_life`. Above `suppress` the endpoint is held out of DNS (as if down)
/// until the penalty decays below `reuse`, and never longer than `max_suppress` after its
/// last flap. With the defaults the third down within about a minute holds the endpoint out.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DampingConfig {
    /// `false` turns damping off for one endpoint when `[defaults.check]` turns it on.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Time for the penalty to halve.
    #[serde(default = "default_half_life", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub half_life: Duration,
    /// Added each time the endpoint goes down.
    #[serde(default = "default_flap_penalty")]
    pub penalty: u32,
    /// Held out of DNS while the penalty is above this.
    #[serde(default = "default_suppress")]
    pub suppress: u32,
    /// Released once the penalty decays below this.
    #[serde(default = "default_reuse")]
    pub reuse: u32,
    /// Longest hold after the last flap (caps the penalty).
    #[serde(default = "default_max_suppress", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub max_suppress: Duration,
}

fn yes() -> bool {
    true
}

/// An `expect_status` entry as written: a code or a range (`"200-299"`).
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)] // only its schema is used; `status_codes` parses the entries
enum StatusEntry {
    Code(u16),
    Range(String),
}

/// `expect_status` entries: a code (`200`) or an inclusive range (`"200-299"`).
fn status_codes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Vec<u16>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Entry {
        Code(u16),
        Range(String),
    }
    let entries = Vec::<Entry>::deserialize(d)?;
    let mut codes = Vec::new();
    for entry in entries {
        match entry {
            Entry::Code(code) => codes.push(code),
            Entry::Range(text) => {
                let range = text
                    .split_once('-')
                    .and_then(|(a, b)| {
                        Some((a.trim().parse::<u16>().ok()?, b.trim().parse::<u16>().ok()?))
                    })
                    .filter(|(a, b)| a <= b && *b - *a < 600);
                let Some((first, last)) = range else {
                    return Err(serde::de::Error::custom(format!(
                        "{text:?} is neither a status code nor a range like \"200-299\""
                    )));
                };
                codes.extend(first..=last);
            }
        }
    }
    Ok(Some(codes))
}

fn default_half_life() -> Duration {
    Duration::from_secs(60)
}

fn default_flap_penalty() -> u32 {
    1000
}

fn default_suppress() -> u32 {
    2000
}

fn default_reuse() -> u32 {
    750
}

fn default_max_suppress() -> Duration {
    Duration::from_secs(600)
}

impl CheckOverrides {
    /// The built-in check: the lowest configuration layer, below files and environment.
    pub fn builtin() -> CheckOverrides {
        CheckOverrides {
            kind: Some(CheckKind::Http),
            port: Some(80),
            path: Some("/".into()),
            interval: Some(Duration::from_secs(1)),
            // timeout and fast_interval follow the interval unless set: see
            // `validate::checks::required`.
            rise: Some(1),
            fall: Some(2),
            expect_status: Some(vec![200]),
            body_limit: Some(64 * 1024),
            ..CheckOverrides::default()
        }
    }

    /// Every field of `self` that is set, else the field of `base`: the endpoint-over-defaults merge.
    pub fn over(&self, base: &CheckOverrides) -> CheckOverrides {
        fn pick<T: Clone>(top: &Option<T>, base: &Option<T>) -> Option<T> {
            top.clone().or_else(|| base.clone())
        }
        CheckOverrides {
            kind: pick(&self.kind, &base.kind),
            port: pick(&self.port, &base.port),
            path: pick(&self.path, &base.path),
            interval: pick(&self.interval, &base.interval),
            timeout: pick(&self.timeout, &base.timeout),
            rise: pick(&self.rise, &base.rise),
            fall: pick(&self.fall, &base.fall),
            fast_interval: pick(&self.fast_interval, &base.fast_interval),
            expect_status: pick(&self.expect_status, &base.expect_status),
            host: pick(&self.host, &base.host),
            headers: pick(&self.headers, &base.headers),
            headers_from_files: pick(&self.headers_from_files, &base.headers_from_files),
            insecure: pick(&self.insecure, &base.insecure),
            ca_file: pick(&self.ca_file, &base.ca_file),
            body_contains: pick(&self.body_contains, &base.body_contains),
            body_limit: pick(&self.body_limit, &base.body_limit),
            reuse_connection: pick(&self.reuse_connection, &base.reuse_connection),
            fresh_connection_every: pick(
                &self.fresh_connection_every,
                &base.fresh_connection_every,
            ),
            damping: pick(&self.damping, &base.damping),
            source_address: pick(&self.source_address, &base.source_address),
        }
    }
}

/// `[[endpoints]]`: one gateway.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EndpointConfig {
    /// Unique name, used in tenant lists, logs, metrics and `/status`.
    pub name: String,
    /// IP address published in DNS and probed (v4 or v6). Names are not accepted: DNS
    /// failover must publish exactly what it probed.
    pub address: String,
    /// Free-form labels for tenant `selector`s and routing policies (`geo`, `cloud`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Relative weight for `weighted` routing; carried to sinks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    /// Failover tier for `failover` routing (lower is preferred); carried to sinks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
    /// `[multi_cluster]`: the cluster that owns this gateway and contributes it to the
    /// shared names (default: this instance's `cluster.id`). Listing another cluster's
    /// gateway makes this instance probe it and vote on it without publishing it itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Overrides of `[defaults.check]` for this endpoint only.
    #[serde(default)]
    pub check: CheckOverrides,
}

/// What a tenant does when every one of its endpoints is unhealthy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnAllUnhealthy {
    /// Publish every endpoint (fail open), as PowerDNS `ifurlup` and Kuadrant do: a probe
    /// outage must not take the domain down.
    #[default]
    PublishAll,
    /// Leave the back ends as they are: keep the last published set.
    KeepLast,
    /// Publish an empty set. Only for operators who prefer NXDOMAIN to a dead address.
    PublishNone,
}

/// Which endpoints a tenant draws from: `"*"` or a list of names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum EndpointSelection {
    /// Every endpoint (written `"*"`).
    #[default]
    #[serde(serialize_with = "serialize_star")]
    All,
    /// Exactly these endpoint names.
    Names(Vec<String>),
}

impl JsonSchema for EndpointSelection {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "EndpointSelection".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "\"*\" (every endpoint) or a list of endpoint names",
            "anyOf": [
                { "const": "*" },
                { "type": "array", "items": { "type": "string" } }
            ]
        })
    }
}

fn serialize_star<S: serde::Serializer>(s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str("*")
}

impl<'de> Deserialize<'de> for EndpointSelection {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> de::Visitor<'de> for Visitor {
            type Value = EndpointSelection;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(r#""*" or a list of endpoint names"#)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                if v == "*" {
                    Ok(EndpointSelection::All)
                } else {
                    Err(E::custom(format!(
                        r#"expected "*" or a list of endpoint names, found "{v}""#
                    )))
                }
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut names = Vec::new();
                while let Some(n) = seq.next_element::<String>()? {
                    names.push(n);
                }
                Ok(EndpointSelection::Names(names))
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// How a tenant chooses, among its healthy endpoints, what to publish.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RoutingPolicy {
    /// Every healthy address (active-active).
    #[default]
    All,
    /// The healthy endpoints of the best tier: lowest endpoint `priority` that has any
    /// (active-standby). Like `ifurlup`'s `pickfirst` over tiers.
    Failover,
    /// Every healthy address with a weight (endpoint `weight`, or the tenant's `weights`
    /// rules by label); sinks that can answer by weight do (PowerDNS LUA `pickwhashed`).
    Weighted,
    /// Every healthy address with its endpoint label `geo`; sinks that can answer by client
    /// location do, falling back to the tenant's `default_geo`.
    Geo,
}

impl RoutingPolicy {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RoutingPolicy::All => "all",
            RoutingPolicy::Failover => "failover",
            RoutingPolicy::Weighted => "weighted",
            RoutingPolicy::Geo => "geo",
        }
    }
}

/// `weights = [{ label = "cloud", value = "azure", weight = 30 }]`: a weight for every
/// endpoint carrying a label value, as Kuadrant's custom weights.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WeightRule {
    /// Label name.
    pub label: String,
    /// Label value.
    pub value: String,
    /// Weight of matching endpoints (the first matching rule wins).
    pub weight: u32,
}

/// `[[tenants]]`: a set of domains backed by a set of endpoints, published to a set of sinks.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    /// Unique name, in logs, metrics and `/status`.
    pub name: String,
    /// The hosts file's name (`hosts_file`) and the ConfigMap key (`coredns_configmap`)
    /// this tenant is written to. Default `<name>.hosts`; the seed spec names it per tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts_key: Option<String>,
    /// Fully qualified names that resolve to the published addresses.
    pub domains: Vec<String>,
    /// `"*"` (default) or a list of endpoint names.
    #[serde(default)]
    pub endpoints: EndpointSelection,
    /// Only endpoints carrying every one of these labels (applied after `endpoints`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub selector: BTreeMap<String, String>,
    /// Names of `[sinks.*]` to publish to.
    pub sinks: Vec<String>,
    /// Record TTL: how long resolvers may keep an address after it is withdrawn.
    #[serde(default = "default_ttl", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub ttl: Duration,
    /// What to publish when every endpoint is unhealthy.
    #[serde(default)]
    pub on_all_unhealthy: OnAllUnhealthy,
    /// Panic threshold as a share (0.0–1.0): when fewer than this share of the endpoints are
    /// healthy, publish all of them, as Envoy does; 0 disables it.
    #[serde(default)]
    pub min_healthy: f64,
    /// When a config reload removes this tenant, withdraw its records from its sinks (an
    /// empty record set: rrsets and Route53 sets deleted, hosts content emptied). Off by
    /// default: a removed tenant's records stay as last published.
    #[serde(default)]
    pub cleanup_on_remove: bool,
    /// Routing policy applied to the healthy set.
    #[serde(default)]
    pub policy: RoutingPolicy,
    /// `weighted`, and `geo` for weights inside each geo: weights by label; endpoints
    /// matching no rule keep their `weight`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub weights: Vec<WeightRule>,
    /// `weighted` and `geo` (as `weights`): the weight of endpoints that set none and match no `weights` rule
    /// (Kuadrant's `defaultWeight`; default 1), so `{defaultWeight: 10, custom cloud=azure
    /// -> 30}` copies over as `default_weight = 10` and one rule: 3:1, as in Kuadrant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_weight: Option<u32>,
    /// `geo` only: the `geo` label value answered to clients whose location matches no
    /// endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_geo: Option<String>,
    /// Whether the clusters vote on this tenant's addresses (default: `[multi_cluster]
    /// enabled`); `false` keeps a tenant single-vantage while others vote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multi_cluster: Option<bool>,
}

fn default_ttl() -> Duration {
    Duration::from_secs(30)
}

/// `[sinks.NAME]`: one DNS back end. `kind` picks the implementation; every other key
/// except `delivery` belongs to that kind, which parses and checks it (the sinks crate,
/// one folder per kind, documents its keys).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
pub struct SinkTable {
    /// The sink kind, e.g. `hosts_file`.
    pub kind: String,
    /// Rate limit, retries and drift repair; the same machinery for every kind.
    #[serde(default)]
    pub delivery: Delivery,
    /// The kind's own keys, parsed by the kind (their schema comes from the kind:
    /// `ho_sinks::config_schema`).
    #[serde(flatten)]
    #[schemars(skip)]
    pub settings: BTreeMap<String, figment::value::Value>,
}

/// `delivery = { ... }` in any sink: how the engine drives writes to it. Every sink gets the
/// same machinery; only the numbers differ.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Delivery {
    /// Token-bucket rate: writes per second the back end may receive.
    #[serde(default = "default_rate")]
    pub max_writes_per_second: f64,
    /// Token-bucket size: writes allowed back to back after a quiet period.
    #[serde(default = "default_burst")]
    pub burst: u32,
    /// How often the full desired state is written again to repair changes made by
    /// someone else (only differences are written).
    #[serde(default = "default_reconcile", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub reconcile_interval: Duration,
    /// First retry delay after a failed write; doubles per attempt.
    #[serde(default = "default_backoff_min", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub backoff_min: Duration,
    /// Longest retry delay.
    #[serde(default = "default_backoff_max", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub backoff_max: Duration,
}

impl Default for Delivery {
    fn default() -> Self {
        Delivery {
            max_writes_per_second: default_rate(),
            burst: default_burst(),
            reconcile_interval: default_reconcile(),
            backoff_min: default_backoff_min(),
            backoff_max: default_backoff_max(),
        }
    }
}

fn default_rate() -> f64 {
    10.0
}
fn default_burst() -> u32 {
    5
}
fn default_reconcile() -> Duration {
    Duration::from_secs(60)
}
fn default_backoff_min() -> Duration {
    Duration::from_millis(200)
}
fn default_backoff_max() -> Duration {
    Duration::from_secs(30)
}
