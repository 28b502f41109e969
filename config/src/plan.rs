//! The validated, resolved configuration: what the engine runs.
//!
//! Every reference is an index, every default is filled in, every check is complete, and
//! endpoints with identical address and check share one [`Target`] so that tenants sharing a
//! gateway share its prober.
//!
//! The index invariant the engine relies on: `Endpoint::target` and a composite's `also`
//! < `targets.len()`, an endpoint's targets distinct;
//! every `Tenant::endpoints` entry < `endpoints.len()`, listed once; a tenant never holds
//! two endpoints with the same address, so at most one per target; every
//! `Tenant::sinks` name is a key of `sinks`. Validation guarantees it; nothing else makes a
//! `Plan`.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use std::sync::Arc;

use crate::model::{
    Answer, BrakeConfig, Canary, Delivery, LeaderElectionConfig, LimitsConfig, OnAllUnhealthy,
    ReloadConfig, Require, RingConfig, RoutingPolicy, SinkTable, TelemetryConfig, WeightRule,
};
use crate::validate::{KindCheck, SinkSpec};

mod endpoint;

pub use endpoint::{Endpoint, EndpointExtras};

/// Everything the engine needs, with all cross-references checked.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// Where the HTTP API listens.
    pub api_listen: SocketAddr,
    /// Bearer token file for `/status` and `/metrics`.
    pub api_token_file: Option<PathBuf>,
    /// Bearer token file of operator actions (drain, undrain); `None`: read-only API.
    pub api_admin_token_file: Option<PathBuf>,
    /// Bearer token file of heartbeats (`POST /v1/heartbeat/NAME`) for endpoints without
    /// their own `token_file`.
    pub api_heartbeat_token_file: Option<PathBuf>,
    /// Where drains are kept across restarts (set whenever `api_admin_token_file` is).
    pub state_dir: Option<PathBuf>,
    /// The availability ledger's settings (checked).
    pub ledger: crate::model::LedgerConfig,
    /// Cluster identity settings (checked).
    pub cluster: crate::model::ClusterConfig,
    /// Voting among clusters (checked; applies to tenants with `multi_cluster`).
    pub multi_cluster: crate::model::MultiClusterConfig,
    /// Requests per second the API answers.
    pub api_max_requests_per_second: f64,
    /// How long tenants wait for verdicts before publishing at start-up.
    #[serde(with = "humantime_serde")]
    pub startup_grace: Duration,
    /// How long shutdown waits for sink writes in flight.
    #[serde(with = "humantime_serde")]
    pub shutdown_timeout: Duration,
    /// Unique probe targets; one prober each.
    pub targets: Vec<Target>,
    /// Endpoints in configuration order.
    pub endpoints: Vec<Endpoint>,
    /// Tenants in configuration order.
    pub tenants: Vec<Tenant>,
    /// Sinks by name.
    pub sinks: BTreeMap<String, PlannedSink>,
    /// This instance's ownership mark.
    pub owner_id: String,
    /// Traces and log format.
    pub telemetry: TelemetryConfig,
    /// Config reload settings.
    pub reload: ReloadConfig,
    /// Resource ceilings.
    pub limits: LimitsConfig,
    /// The blast-radius brake (off unless a limit is set).
    pub brake: BrakeConfig,
    /// Leader election among replicas (checked; `enabled = false` when off).
    pub leader_election: LeaderElectionConfig,
    /// Probing shared among replicas (checked; `enabled = false` when off).
    pub ring: RingConfig,
    /// Tenants from Kubernetes resources (checked; `tenants = false` when off).
    pub kubernetes: crate::model::KubernetesConfig,
    /// Endpoints given by host name: not in `endpoints` until [`Plan::with_resolved`]
    /// expands each into one endpoint per address.
    pub hosts: Vec<HostEndpoint>,
    /// How host names are looked up.
    pub resolver: crate::model::ResolverConfig,
}

impl Plan {
    /// What runs without TLS verification (`insecure = true`): endpoints by name, webhook
    /// sinks by name. Logged at start and whenever a reload changes it, because a broken
    /// or forged certificate goes unnoticed there.
    pub fn unverified_tls(&self) -> Vec<String> {
        let endpoints = self.endpoints.iter().filter(|e| {
            self.targets[e.target()]
                .check
                .settings
                .get()
                .unverified_tls()
        });
        let sinks = self.sinks.iter().filter(|(_, s)| s.spec.unverified_tls());
        endpoints
            .map(|e| format!("endpoint {:?}", e.name))
            .chain(sinks.map(|(name, _)| format!("sink {name:?}")))
            .collect()
    }
}

/// An address another cluster contributes to a voting tenant (`[multi_cluster]`), learned
/// from its report: this cluster probes it with the tenant's check so it can vote on it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Discovered {
    /// The voting tenant.
    pub tenant: String,
    /// The cluster contributing it.
    pub cluster: String,
    /// The address.
    pub address: IpAddr,
    /// That cluster's endpoint name.
    pub name: String,
}

impl Plan {
    /// This plan plus an endpoint per discovered address its tenant does not have yet,
    /// named `<cluster>/<name>` and probed with the check of the tenant's first endpoint
    /// (with its `source_address`: from this cluster's vantage). Keeps the plan's index
    /// invariants.
    pub fn with_discovered(&self, found: &[Discovered]) -> Plan {
        let mut plan = self.clone();
        let mut names: std::collections::HashSet<Arc<str>> =
            plan.endpoints.iter().map(|e| e.name.clone()).collect();
        for d in found {
            let Some(ti) = plan
                .tenants
                .iter()
                .position(|t| t.name == d.tenant && t.multi_cluster)
            else {
                continue;
            };
            let tenant = &plan.tenants[ti];
            if tenant
                .endpoints
                .iter()
                .any(|&e| plan.endpoints[e].address == d.address)
            {
                continue;
            }
            let first = tenant.endpoints[0];
            let target = Target {
                address: d.address,
                check: plan.targets[plan.endpoints[first].target()].check.clone(),
            };
            let target = match plan.targets.iter().position(|t| *t == target) {
                Some(i) => i,
                None => {
                    plan.targets.push(target);
                    plan.targets.len() - 1
                }
            };
            let mut name = format!("{}/{}", d.cluster, d.name);
            if names.contains(name.as_str()) {
                name = format!("{name}@{}", d.address);
            }
            let name: Arc<str> = name.into();
            names.insert(name.clone());
            plan.endpoints
                .push(
                    Endpoint::new(name, d.address, target).with_extras(EndpointExtras {
                        cluster: Some(d.cluster.clone()),
                        ..EndpointExtras::default()
                    }),
                );
            plan.tenants[ti].endpoints.push(plan.endpoints.len() - 1);
        }
        plan
    }
}

/// An endpoint whose `address` is a host name, as configured: each address the name
/// resolves to becomes an endpoint `<name>@<address>` of the same tenants, probed with
/// `check`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostEndpoint {
    /// The endpoint's name.
    pub name: String,
    /// The host name (lower case, no trailing dot).
    pub host: String,
    /// Labels for policies.
    pub labels: BTreeMap<String, String>,
    /// Weight as set (see [`Endpoint::weight`]).
    pub weight: Option<u32>,
    /// Failover tier.
    pub priority: u32,
    /// The cluster owning it; `None`: this instance's.
    pub cluster: Option<String>,
    /// After a failure, held out until an operator releases it.
    pub hold_failback: bool,
    /// The check of every address.
    pub check: Arc<CheckSpec>,
    /// Indices of the tenants that select it.
    pub tenants: Vec<usize>,
}

impl Plan {
    /// The plan that runs: this one plus the addresses of its host names and what other
    /// clusters contribute. When neither adds an endpoint it is this plan, shared: the
    /// running plan and the configured one are then one allocation, not two copies of
    /// every endpoint.
    pub fn compose(
        self: &Arc<Self>,
        resolved: &BTreeMap<String, Vec<IpAddr>>,
        found: &[Discovered],
    ) -> Arc<Plan> {
        if self.hosts.is_empty() && found.is_empty() {
            return self.clone();
        }
        Arc::new(self.with_resolved(resolved).with_discovered(found))
    }

    /// Every host name the plan's endpoints are given by, once each.
    pub fn host_names(&self) -> BTreeSet<&str> {
        self.hosts.iter().map(|h| h.host.as_str()).collect()
    }

    /// This plan plus an endpoint per address each host name resolves to (`resolved`:
    /// host name -> addresses), named `<name>@<address>`, in every tenant of its host
    /// endpoint; an address the tenant already has is not added twice. A host not in
    /// `resolved` adds nothing (the engine resolves every host before it runs a plan).
    pub fn with_resolved(&self, resolved: &BTreeMap<String, Vec<IpAddr>>) -> Plan {
        let mut plan = self.clone();
        for host in &self.hosts {
            for &address in resolved.get(&host.host).into_iter().flatten() {
                let target = Target {
                    address,
                    check: host.check.clone(),
                };
                let target = match plan.targets.iter().position(|t| *t == target) {
                    Some(i) => i,
                    None => {
                        plan.targets.push(target);
                        plan.targets.len() - 1
                    }
                };
                let index = plan.endpoints.len();
                let mut joined = false;
                for &ti in &host.tenants {
                    let tenant = &mut plan.tenants[ti];
                    let has = |e: &usize| plan.endpoints[*e].address == address;
                    if !tenant.endpoints.iter().any(has) {
                        tenant.endpoints.push(index);
                        joined = true;
                    }
                }
                if joined {
                    let mut endpoint =
                        Endpoint::new(format!("{}@{address}", host.name), address, target)
                            .with_extras(EndpointExtras {
                                labels: host.labels.clone(),
                                cluster: host.cluster.clone(),
                                host: Some(host.host.clone()),
                                composite: None,
                            });
                    endpoint.weight = host.weight;
                    endpoint.priority = host.priority;
                    endpoint.hold_failback = host.hold_failback;
                    plan.endpoints.push(endpoint);
                }
            }
        }
        plan
    }
}

/// One thing to probe: an address plus a complete check.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Target {
    /// Address probed.
    pub address: IpAddr,
    /// The check, with every default applied; shared by every target with an equal check
    /// (most inherit `defaults.check`), so 100,000 targets hold one copy, not 100,000.
    pub check: Arc<CheckSpec>,
}

impl Target {
    /// Whether probes of this target keep their connection open between them
    /// (`reuse_connection`), holding a descriptor while idle.
    pub fn keeps_connection(&self) -> bool {
        self.check.settings.get().keeps_connection()
    }

    /// Stable text form (`http://10.0.0.1:80/healthz`, `tcp://[::1]:443`), used as the
    /// target's identity in logs and to derive its schedule phase.
    pub fn key(&self) -> String {
        let sock = SocketAddr::new(self.address, self.check.port);
        self.check.settings.get().url(sock)
    }
}

/// A complete health check.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct CheckSpec {
    /// TCP port.
    pub port: u16,
    /// The kind's own settings, resolved by the kind (what is spoken over the connection).
    pub settings: KindCheck,
    /// Schedule and hysteresis.
    pub timing: Timing,
    /// Local address the probe's connection leaves from; `None`: the kernel's choice.
    pub source_address: Option<IpAddr>,
}

/// TLS trust settings: https probes and the HTTP sinks each verify a server with one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct TlsCheck {
    /// Accept any certificate.
    pub insecure: bool,
    /// Trust these CAs instead of the system roots.
    pub ca_file: Option<PathBuf>,
    /// Present this certificate chain (PEM) with `client_key`: mutual TLS.
    pub client_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    pub client_key: Option<PathBuf>,
}

impl TlsCheck {
    /// Verify against the system roots, or `ca_file` when given; no client certificate:
    /// how the HTTP sinks and the OTLP exporter trust their servers.
    pub fn verify_with(ca_file: Option<PathBuf>) -> TlsCheck {
        TlsCheck {
            insecure: false,
            ca_file,
            client_cert: None,
            client_key: None,
        }
    }
}

/// When to probe and when to flip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Timing {
    /// Time between scheduled probes of a settled target.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// Hard deadline of one probe.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Re-check delay while unsettled.
    #[serde(with = "humantime_serde")]
    pub fast_interval: Duration,
    /// Successes to turn up.
    pub rise: u32,
    /// Failures to turn down.
    pub fall: u32,
    /// Flap damping, if on.
    pub damping: Option<Damping>,
}

/// Flap damping, validated (see [`crate::model::DampingConfig`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Damping {
    /// Time for the penalty to halve.
    #[serde(with = "humantime_serde")]
    pub half_life: Duration,
    /// Added per down transition.
    pub penalty: u32,
    /// Held out above this.
    pub suppress: u32,
    /// Released below this.
    pub reuse: u32,
    /// Longest hold after the last flap.
    #[serde(with = "humantime_serde")]
    pub max_suppress: Duration,
}

/// An endpoint's health from several checks of its address (`checks`, `require`,
/// `must_pass`): each check is its own target with its own hysteresis, and the endpoint is
/// up when enough of their verdicts are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Composite {
    /// The targets of `checks`, in order; never `Endpoint::target`, never twice.
    pub also: Vec<usize>,
    /// How many of all the checks (`Endpoint::target`'s and these) must pass.
    pub require: Require,
    /// `Endpoint::target`'s check must pass whatever `require` says.
    pub must_pass: bool,
}

impl Composite {
    /// How many checks must pass, of `also.len() + 1`.
    pub fn needed(&self) -> usize {
        match self.require {
            Require::All => self.also.len() + 1,
            Require::Any => 1,
            Require::Quorum { quorum } => quorum as usize,
        }
    }
}

/// A tenant with its endpoint and sink references resolved.
#[derive(Debug, Clone, Serialize)]
pub struct Tenant {
    /// Unique name.
    pub name: String,
    /// Hosts file name and ConfigMap key (`<name>.hosts` unless set); unique.
    pub hosts_key: String,
    /// Lower-case domain names without a trailing dot.
    pub domains: Vec<String>,
    /// Indices into [`Plan::endpoints`]; never empty.
    pub endpoints: Vec<usize>,
    /// Sink names, each present in [`Plan::sinks`].
    pub sinks: Vec<String>,
    /// Record TTL.
    #[serde(with = "humantime_serde")]
    pub ttl: Duration,
    /// Record TTL while any endpoint is down, if set.
    #[serde(with = "humantime_serde")]
    pub degraded_ttl: Option<Duration>,
    /// All-unhealthy behaviour.
    pub on_all_unhealthy: OnAllUnhealthy,
    /// Panic threshold (share of endpoints).
    pub min_healthy: f64,
    /// Withdraw the records when a reload removes the tenant.
    pub cleanup_on_remove: bool,
    /// Routing policy.
    pub policy: RoutingPolicy,
    /// What its names answer: addresses, or a CNAME to an endpoint's host name.
    pub answer: Answer,
    /// `weighted` (and `geo` with weights): label rules, first match wins.
    pub weights: Vec<WeightRule>,
    /// Weight of endpoints without one of their own and no matching rule.
    pub default_weight: u32,
    /// Whether weights shape the answers: `weighted`, or `geo` with `weights` or
    /// `default_weight` set (Kuadrant's weights inside each geo). A `geo` tenant without
    /// them answers every address of the location alike, whatever weights its endpoints
    /// carry for other tenants.
    pub weighs: bool,
    /// `geo`: the fallback location.
    pub default_geo: Option<String>,
    /// The clusters vote on its addresses through the reports in its shared-zone sinks.
    pub multi_cluster: bool,
    /// Its availability objective, if it has one.
    pub slo: Option<Slo>,
    /// The Kubernetes resource it stands for (namespace, name), if any.
    pub resource: Option<(String, String)>,
}

/// An availability objective: the share of known time its names must answer with live,
/// decided addresses only.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Slo {
    /// The share, above 0 and below 1 (`0.999`).
    pub objective: f64,
    /// Over what.
    pub window: SloWindow,
}

/// The window an objective is kept over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SloWindow {
    /// The last so long.
    Rolling(#[serde(with = "humantime_serde")] Duration),
    /// The calendar month (UTC).
    Month,
}

impl SloWindow {
    /// As metrics and alerts label it (`30d`, `month`).
    pub fn label(&self) -> String {
        match self {
            SloWindow::Rolling(d) if d.as_secs() % 86_400 == 0 => {
                format!("{}d", d.as_secs() / 86_400)
            }
            SloWindow::Rolling(d) => humantime::format_duration(*d).to_string(),
            SloWindow::Month => "month".to_owned(),
        }
    }

    /// How long its budget lasts: the duration, or a month's average (30.44 days), which
    /// the burn-rate alerts scale their thresholds by.
    pub fn period(&self) -> Duration {
        match self {
            SloWindow::Rolling(d) => *d,
            SloWindow::Month => Duration::from_secs(2_630_016),
        }
    }
}

/// A validated sink: the table as written (what a reload compares) and its kind's parsed,
/// normalised settings.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedSink {
    /// The `[sinks.NAME]` table.
    #[serde(flatten)]
    pub table: SinkTable,
    /// Parsed by the kind; the sinks crate gets its own type back to build the sink.
    #[serde(skip)]
    pub spec: Arc<dyn SinkSpec>,
    /// How the engine drives writes to this sink: the table's `delivery`, else the
    /// default for a shared back end or a local output.
    #[serde(skip)]
    pub delivery: Delivery,
    /// The answer canary of this sink, its address set; `None`: not asked.
    #[serde(skip)]
    pub canary: Option<Canary>,
}

impl PlannedSink {
    /// How the engine drives writes to this sink.
    pub fn delivery(&self) -> &Delivery {
        &self.delivery
    }
}

/// Two plans configure a sink the same way when its table is the same: a reload rebuilds
/// only sinks whose table changed.
impl PartialEq for PlannedSink {
    fn eq(&self, other: &PlannedSink) -> bool {
        self.table == other.table
    }
}
