//! Prometheus metrics, registered once and shared by the actors that update them.

mod answers;
mod chunked;
mod classic;
mod node_status;
mod ring;

pub use answers::{AnswerMetrics, SloLabels, StaleLabels, TenantServedLabels, WindowLabels};
pub use chunked::{Abandoned, ChunkLimits, MetricsBody};
pub use node_status::NodeStatus;
pub use ring::RingMetrics;

pub use classic::{wants_openmetrics, CLASSIC_CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, RwLock};

/// Metrics a crate above the engine owns and updates (the DNS server's queries, say):
/// registered into the process's one exposition by [`Metrics::set`], so a new series there
/// is that crate's edit alone. Clones share their values, as prometheus-client's do.
pub trait MetricSet: Clone + Default + Send + Sync + 'static {
    /// Registers every metric of the set under the process's prefix.
    fn register(&self, registry: &mut Registry);
}

/// `result` label: `ok` or a failure label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    /// Probe result.
    pub result: &'static str,
}

/// `tenant` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TenantLabel {
    /// Tenant name.
    pub tenant: String,
}

/// `target` label: a probe target's identity (`https://10.0.0.1:443/healthz`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TargetLabel {
    /// The target's key.
    pub target: String,
}

/// `to` label of a transition.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TransitionLabel {
    /// New state.
    pub to: &'static str,
}

/// `sink`, `result` labels of a sink write.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SinkResultLabels {
    /// Sink name.
    pub sink: String,
    /// `changed`, `unchanged` or `error`.
    pub result: &'static str,
}

/// `sink` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SinkLabel {
    /// Sink name.
    pub sink: String,
}

/// Probe lateness buckets (seconds): fine below 20 ms, with a bound at the 5 ms "on
/// schedule" target (DESIGN.md section 7), so the share of late probes is exact.
const START_DELAY_BUCKETS: [f64; 20] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.003, 0.004, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03,
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

fn latency_histogram() -> Histogram {
    // 0.5 ms .. ~16 s
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

/// Every metric the engine exports. Handles are cheap clones sharing one value.
pub struct Metrics {
    /// Behind a lock so other crates' [`MetricSet`]s register into it after start; read
    /// (shared) for as long as an answer is being encoded (see [`Metrics::stream`]).
    registry: RwLock<Registry>,
    /// The [`MetricSet`]s made so far, by type.
    sets: Mutex<HashMap<TypeId, Box<dyn Any + Send + Sync>>>,
    /// Probes by result label.
    pub probes: Family<ResultLabel, Counter>,
    /// Probe duration.
    pub check_duration: Histogram,
    /// How late probes start against their schedule: the "checks slow" signal.
    pub probe_start_delay: Histogram,
    /// Targets probed here now, each a prober record on a prober thread's wheel (with
    /// `[ring]`, the targets this replica owns or hands over, not every target). The name is
    /// the one dashboards know; no target holds a task between its probes.
    pub prober_tasks: Gauge,
    /// Healthy endpoints per tenant.
    pub healthy_nodes: Family<TenantLabel, Gauge>,
    /// Endpoints per tenant, healthy or not: what `healthy_nodes` is out of, so an alert can
    /// tell a tenant down to its last endpoint from one that only ever had one.
    pub tenant_endpoints: Family<TenantLabel, Gauge>,
    /// Addresses the blast-radius brake keeps published although they were withdrawn.
    pub brake_held: Family<TenantLabel, Gauge>,
    /// 1 when an endpoint is up, 0 otherwise: `node_status{node_name,node_ip}`.
    pub node_status: NodeStatus,
    /// When the certificate a TLS target last presented expires, Unix seconds.
    pub probe_cert_not_after: Family<TargetLabel, Gauge>,
    /// Verdict changes.
    pub transitions: Family<TransitionLabel, Counter>,
    /// Snapshots published per tenant (each is a DNS change).
    pub dns_updates: Family<TenantLabel, Counter>,
    /// Sink writes by result.
    pub sink_writes: Family<SinkResultLabels, Counter>,
    /// Health transition to successful sink write: the failover time operators care about.
    pub failover_seconds: Family<SinkLabel, Histogram, fn() -> Histogram>,
    /// When each sink last wrote successfully (Unix seconds): alert when it is old.
    pub sink_last_success: Family<SinkLabel, Gauge<f64, AtomicU64>>,
    /// Tenants whose latest snapshot is not yet written, per sink.
    pub sink_pending: Family<SinkLabel, Gauge>,
    /// Writes waiting for a place among `delivery.max_in_flight` or a write token, per sink.
    pub sink_writes_queued: Family<SinkLabel, Gauge>,
    /// Writes the back end refused for rate (HTTP 429, Route53 `Throttling`), per sink;
    /// also counted as errors in `sink_writes`. Steady growth means the zone's API limit
    /// is below the change rate.
    pub sink_throttled: Family<SinkLabel, Counter>,
    /// Config reloads by result: `ok`, `invalid` (validation failed), `error` (a sink or
    /// TLS file could not be loaded). A failed reload keeps the running config.
    pub config_reloads: Family<ResultLabel, Counter>,
    /// Spans dropped because the export queue was full (collector slow or down).
    pub spans_dropped: Counter,
    /// Spans exported, and export attempts that failed.
    pub spans_exported: Family<ExportLabel, Counter>,
    /// Probes that waited for a bound (`sockets`: the concurrent-probe limit;
    /// `tracker_mailbox`: results not yet taken by the tracker).
    pub probes_waited: Family<BoundLabel, Counter>,
    /// Probes allowed in flight at once.
    pub probe_concurrency_limit: Gauge,
    /// Probes answered over a connection kept from an earlier probe (`reuse_connection`);
    /// against `probes_total`, the share of probes that tested no new connection.
    pub probe_connections_reused: Counter,
    /// API requests refused with 429 by the API's rate limit.
    pub api_rate_limited: Counter,
    /// Times flap damping started holding an endpoint out of DNS.
    pub damping_holds: Counter,
    /// 1 while this replica writes shared back ends (the Lease holder, or no election),
    /// 0 on a standby.
    pub leader: Gauge,
    /// 1 while this prober judges itself impaired (every withdrawal held).
    pub vantage_impaired: Gauge,
    /// Times this replica became or stopped being the writer.
    pub leader_transitions: Counter,
    /// Operator actions (drain, undrain, force-up, force-down, release) by result: `ok`,
    /// `refused` (no or wrong admin token, or a read-only API), `error`.
    pub operator_actions: Family<OperatorActionLabels, Counter>,
    /// Heartbeats pushed to the API, by result.
    pub heartbeats: Family<HeartbeatLabels, Counter>,
    /// `[multi_cluster]`: clusters whose report of the tenant is live (the voters).
    pub cluster_live_voters: Family<TenantLabel, Gauge>,
    /// `[multi_cluster]`: addresses a quorum of clusters withdrew, counted when withdrawn.
    pub cluster_quorum_withdrawals: Family<TenantLabel, Counter>,
    /// `[multi_cluster]`: report writes and reads by result (`ok`, `error`).
    pub cluster_reports: Family<ReportOpLabels, Counter>,
    /// Lookups of endpoints' host names by result: `changed` (other addresses),
    /// `unchanged`, `failed` (the last addresses stay).
    pub host_lookups: Family<ResultLabel, Counter>,
    /// The answer canary's and the availability ledger's.
    pub answers: AnswerMetrics,
    /// `[ring]`: members, targets probed here, moves, the verdict stream.
    pub ring: RingMetrics,
}

/// `op`, `result` labels of a report exchange.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReportOpLabels {
    /// `write` or `read`.
    pub op: &'static str,
    /// `ok` or `error`.
    pub result: &'static str,
}

/// `action`, `result` labels of an operator action.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperatorActionLabels {
    /// `drain`, `undrain`, `force-up`, `force-down` or `release`.
    pub action: &'static str,
    /// `ok`, `refused` or `error`.
    pub result: &'static str,
}

/// `result` label of a pushed heartbeat.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HeartbeatLabels {
    /// `ok`, `refused` (no or wrong token) or `unknown` (no such heartbeat endpoint).
    pub result: &'static str,
}

/// `bound` label: which limit a probe waited for.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BoundLabel {
    /// `sockets` or `tracker_mailbox`.
    pub bound: &'static str,
}

/// `result` label of a span export: `ok` or `error`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ExportLabel {
    /// Outcome.
    pub result: &'static str,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Creates and registers every metric under the `health_orchestrator` prefix.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("health_orchestrator");
        let m = Metrics {
            probes: Family::default(),
            check_duration: latency_histogram(),
            probe_start_delay: Histogram::new(START_DELAY_BUCKETS.iter().copied()),
            prober_tasks: Gauge::default(),
            healthy_nodes: Family::default(),
            tenant_endpoints: Family::default(),
            brake_held: Family::default(),
            node_status: NodeStatus::default(),
            probe_cert_not_after: Family::default(),
            transitions: Family::default(),
            dns_updates: Family::default(),
            sink_writes: Family::default(),
            failover_seconds: Family::new_with_constructor(latency_histogram),
            sink_last_success: Family::default(),
            sink_pending: Family::default(),
            sink_writes_queued: Family::default(),
            config_reloads: Family::default(),
            spans_dropped: Counter::default(),
            spans_exported: Family::default(),
            probes_waited: Family::default(),
            probe_concurrency_limit: Gauge::default(),
            probe_connections_reused: Counter::default(),
            sink_throttled: Family::default(),
            api_rate_limited: Counter::default(),
            damping_holds: Counter::default(),
            leader: Gauge::default(),
            vantage_impaired: Gauge::default(),
            leader_transitions: Counter::default(),
            // 10 us .. ~0.3 s: an answer from memory takes microseconds.
            operator_actions: Family::default(),
            heartbeats: Family::default(),
            host_lookups: Family::default(),
            answers: AnswerMetrics::default(),
            ring: RingMetrics::default(),
            cluster_live_voters: Family::default(),
            cluster_quorum_withdrawals: Family::default(),
            cluster_reports: Family::default(),
            registry: RwLock::default(),
            sets: Mutex::default(),
        };
        m.register_verdicts(&mut registry);
        m.register_delivery_and_reloads(&mut registry);
        m.register_limits_and_leadership(&mut registry);
        m.register_operators_and_clusters(&mut registry);
        m.answers.register(&mut registry);
        m.ring.register(&mut registry);
        Metrics {
            registry: RwLock::new(registry),
            ..m
        }
    }

    /// Registers probes, their timing and the verdicts they lead to.
    fn register_verdicts(&self, registry: &mut Registry) {
        registry.register("probes", "Health probes by result", self.probes.clone());
        registry.register(
            "check_duration_seconds",
            "Duration of health probes",
            self.check_duration.clone(),
        );
        registry.register(
            "probe_start_delay_seconds",
            "How late probes start against their schedule",
            self.probe_start_delay.clone(),
        );
        registry.register(
            "prober_tasks",
            "Targets this process probes now (one prober record each; a task runs only for an attempt)",
            self.prober_tasks.clone(),
        );
        registry.register(
            "healthy_nodes",
            "Healthy endpoints per tenant",
            self.healthy_nodes.clone(),
        );
        registry.register(
            "tenant_endpoints",
            "Endpoints per tenant, healthy or not",
            self.tenant_endpoints.clone(),
        );
        registry.register(
            "brake_held_addresses",
            "Addresses the blast-radius brake keeps published although their endpoints were withdrawn (alert when above 0)",
            self.brake_held.clone(),
        );
        registry.register(
            "node_status",
            "1 if the endpoint is up, else 0",
            self.node_status.clone(),
        );
        registry.register(
            "probe_cert_not_after_seconds",
            "When the certificate a TLS target last presented expires (Unix time)",
            self.probe_cert_not_after.clone(),
        );
        registry.register(
            "transitions",
            "Endpoint verdict changes",
            self.transitions.clone(),
        );
        registry.register(
            "dns_updates",
            "Record set changes published per tenant",
            self.dns_updates.clone(),
        );
    }

    /// Registers sink writes, config reloads and span export.
    fn register_delivery_and_reloads(&self, registry: &mut Registry) {
        registry.register(
            "sink_writes",
            "Sink writes by result",
            self.sink_writes.clone(),
        );
        registry.register(
            "failover_seconds",
            "Time from an endpoint transition to the sink's successful write",
            self.failover_seconds.clone(),
        );
        registry.register(
            "sink_last_success_timestamp_seconds",
            "When the sink last wrote successfully",
            self.sink_last_success.clone(),
        );
        registry.register(
            "sink_pending",
            "Tenants whose latest snapshot the sink has not written yet",
            self.sink_pending.clone(),
        );
        registry.register(
            "sink_writes_queued",
            "Writes waiting for a place among the sink's max_in_flight or a write token",
            self.sink_writes_queued.clone(),
        );
        registry.register(
            "config_reloads",
            "Config reloads by result (ok, invalid, error)",
            self.config_reloads.clone(),
        );
        registry.register(
            "telemetry_spans_dropped",
            "Spans dropped because the export queue was full",
            self.spans_dropped.clone(),
        );
        registry.register(
            "telemetry_spans_exported",
            "Spans handed to the OTLP collector, by result",
            self.spans_exported.clone(),
        );
    }

    /// Registers probe bounds, leadership, throttling, connection reuse and the API and damping limits.
    fn register_limits_and_leadership(&self, registry: &mut Registry) {
        registry.register(
            "probes_waited",
            "Probes that waited for a bound: sockets (concurrent probes) or tracker_mailbox",
            self.probes_waited.clone(),
        );
        registry.register(
            "probe_concurrency_limit",
            "Probes allowed in flight at once",
            self.probe_concurrency_limit.clone(),
        );
        registry.register(
            "vantage_impaired",
            "1 while this prober judges itself impaired: a wave of its targets failed at once, so every withdrawal and vote is held ([brake] impaired_share)",
            self.vantage_impaired.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica writes shared back ends (Lease holder or no election), 0 on a standby",
            self.leader.clone(),
        );
        registry.register(
            "leader_transitions",
            "Times this replica became or stopped being the writer of shared back ends",
            self.leader_transitions.clone(),
        );
        registry.register(
            "sink_throttled",
            "Sink writes the back end refused for rate (HTTP 429, Route53 Throttling)",
            self.sink_throttled.clone(),
        );
        registry.register(
            "probe_connections_reused",
            "Probes answered over a connection kept from an earlier probe (reuse_connection)",
            self.probe_connections_reused.clone(),
        );
        registry.register(
            "api_rate_limited",
            "API requests refused by the rate limit",
            self.api_rate_limited.clone(),
        );
        registry.register(
            "damping_holds",
            "Times flap damping started holding an endpoint out of DNS",
            self.damping_holds.clone(),
        );
    }

    /// Registers operator actions, heartbeats, host lookups and several clusters.
    fn register_operators_and_clusters(&self, registry: &mut Registry) {
        registry.register(
            "operator_actions",
            "Operator actions (drain, undrain, force-up, force-down, release) by result",
            self.operator_actions.clone(),
        );
        registry.register(
            "heartbeats",
            "Heartbeats pushed to the API (POST /v1/heartbeat/NAME) by result",
            self.heartbeats.clone(),
        );
        registry.register(
            "host_lookups",
            "Lookups of endpoints' host names by result (changed, unchanged, failed)",
            self.host_lookups.clone(),
        );
        registry.register(
            "cluster_live_voters",
            "Clusters whose report of the tenant is live (multi_cluster)",
            self.cluster_live_voters.clone(),
        );
        registry.register(
            "cluster_quorum_withdrawals",
            "Addresses withdrawn because a quorum of clusters saw them down",
            self.cluster_quorum_withdrawals.clone(),
        );
        registry.register(
            "cluster_reports",
            "Report writes and reads of the shared zone by result",
            self.cluster_reports.clone(),
        );
    }

    /// This process's `T`: made and registered on the first call, shared by every later
    /// one (a reload that rebuilds a DNS server keeps counting into the same series).
    pub fn set<T: MetricSet>(&self) -> T {
        let mut sets = self.sets.lock().expect("not poisoned");
        let made = sets.entry(TypeId::of::<T>()).or_insert_with(|| {
            let set = T::default();
            set.register(&mut self.registry.write().expect("not poisoned"));
            Box::new(set)
        });
        made.downcast_ref::<T>()
            .expect("stored under its own type id")
            .clone()
    }

    /// The OpenMetrics text exposition ([`Metrics::encode_classic`] gives the classic format),
    /// whole; the API streams it instead ([`Metrics::stream`]).
    pub fn encode(&self) -> String {
        self.write(Exposition::OpenMetrics, String::new())
            .expect("writing to a String cannot fail")
    }

    /// The classic text exposition, whole, converted as it is encoded (see
    /// [`classic::Classic`]).
    pub fn encode_classic(&self) -> String {
        self.write(Exposition::Classic, String::new())
            .expect("writing to a String cannot fail")
    }

    /// Writes the exposition in `format` to `out` as it is encoded, the registry read-locked
    /// meanwhile; an error of `out` ends it there.
    fn write<W: std::fmt::Write>(
        &self,
        format: Exposition,
        mut out: W,
    ) -> Result<W, std::fmt::Error> {
        let registry = self.registry.read().expect("not poisoned");
        match format {
            Exposition::OpenMetrics => {
                prometheus_client::encoding::text::encode(&mut out, &registry)?;
                Ok(out)
            }
            Exposition::Classic => {
                let mut classic = classic::Classic::new(out);
                prometheus_client::encoding::text::encode(&mut classic, &registry)?;
                classic.finish()
            }
        }
    }
}

/// The text format of an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exposition {
    /// OpenMetrics 1.0 ([`OPENMETRICS_CONTENT_TYPE`]).
    OpenMetrics,
    /// The classic Prometheus text format 0.0.4 ([`CLASSIC_CONTENT_TYPE`]).
    Classic,
}

impl Exposition {
    /// The answer's content type.
    pub fn content_type(self) -> &'static str {
        match self {
            Exposition::OpenMetrics => OPENMETRICS_CONTENT_TYPE,
            Exposition::Classic => CLASSIC_CONTENT_TYPE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Default)]
    struct Elsewhere {
        asked: Counter,
    }

    impl MetricSet for Elsewhere {
        fn register(&self, registry: &mut Registry) {
            registry.register("elsewhere_asked", "Asked elsewhere", self.asked.clone());
        }
    }

    #[test]
    fn a_set_is_registered_once_and_every_caller_counts_into_it() {
        let metrics = Metrics::new();
        assert!(!metrics.encode().contains("elsewhere_asked"));
        metrics.set::<Elsewhere>().asked.inc();
        metrics.set::<Elsewhere>().asked.inc_by(2);
        let text = metrics.encode();
        assert!(
            text.contains("health_orchestrator_elsewhere_asked_total 3\n"),
            "{text}"
        );
        assert_eq!(
            text.matches("# TYPE health_orchestrator_elsewhere_asked")
                .count(),
            1
        );
    }
}
