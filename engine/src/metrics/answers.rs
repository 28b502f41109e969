//! The metrics of what resolvers are handed: the answer canary's queries and stale
//! names, the time from a decision to the served answer, and each name's availability.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::{latency_histogram, SinkLabel, SinkResultLabels};

/// `name`, `window` labels of an availability figure.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WindowLabels {
    /// The published name.
    pub name: String,
    /// `1h`, `24h` or `30d`.
    pub window: &'static str,
}

/// `tenant`, `namespace`, `name` (the resource a Kubernetes tenant stands for; empty for
/// a tenant of the TOML config) and `served` of a tenant's counted seconds.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TenantServedLabels {
    /// The tenant.
    pub tenant: String,
    /// Its resource's namespace.
    pub namespace: String,
    /// Its resource's name.
    pub name: String,
    /// `answered`, `dead_address`, `wrong_address` or `unanswered`.
    pub served: &'static str,
}

/// `sink`, `tenant`, `name` and `geo` of a name served otherwise than decided.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StaleLabels {
    /// The sink whose DNS server (or listing) served it.
    pub sink: String,
    /// The name's tenant.
    pub tenant: String,
    /// The published name (a wildcard as written).
    pub name: String,
    /// The location it was asked from as a client there; empty for the canary's own
    /// question.
    pub geo: String,
}

/// `tenant`, `namespace`, `name` and `window` of an objective.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SloLabels {
    /// The tenant.
    pub tenant: String,
    /// Its resource's namespace.
    pub namespace: String,
    /// Its resource's name.
    pub name: String,
    /// The window it is kept over (`30d`, `month`).
    pub window: String,
}

/// The canary's and the ledger's metrics.
pub struct AnswerMetrics {
    /// Canary queries by sink and result (`match`, `differs`, `error`).
    pub canary_queries: Family<SinkResultLabels, Counter>,
    /// Names whose served answer differs from the decision past the sink's grace.
    pub canary_stale_names: Family<SinkLabel, Gauge>,
    /// 1 for each name (and place asked from) served otherwise than decided past the
    /// sink's grace; absent otherwise, so the series are as many as the stale names.
    pub canary_stale_answer: Family<StaleLabels, Gauge>,
    /// Time from a decision to the canary seeing it served, per sink.
    pub answer_propagation: Family<SinkLabel, Histogram, fn() -> Histogram>,
    /// Availability per name over the last hour, day and 30 days.
    pub name_availability: Family<WindowLabels, Gauge<f64, AtomicU64>>,
    /// 1 while the ledger cannot record as configured (its folder unwritable, a file
    /// unusable, writes failing); probing and publishing go on regardless.
    pub ledger_degraded: Gauge,
    /// Ledger appends that failed (each retried at the next tick).
    pub ledger_write_failures: Counter,
    /// Seconds each tenant's names served each way, summed over its names, outside
    /// maintenance: the error ratio its SLO's burn-rate alerts read.
    pub tenant_served_seconds: Family<TenantServedLabels, Counter<f64, AtomicU64>>,
    /// Each tenant's availability objective (`0.999`).
    pub slo_objective: Family<SloLabels, Gauge<f64, AtomicU64>>,
    /// How long each objective's budget lasts, in seconds (what the burn-rate thresholds
    /// scale by).
    pub slo_period: Family<SloLabels, Gauge<f64, AtomicU64>>,
    /// Ledger files that were not ledger files, moved aside (their names start again).
    pub ledger_files_set_aside: Counter,
}

impl Default for AnswerMetrics {
    /// New, unregistered.
    fn default() -> AnswerMetrics {
        AnswerMetrics {
            canary_queries: Family::default(),
            canary_stale_names: Family::default(),
            canary_stale_answer: Family::default(),
            answer_propagation: Family::new_with_constructor(latency_histogram),
            name_availability: Family::default(),
            ledger_degraded: Gauge::default(),
            ledger_write_failures: Counter::default(),
            tenant_served_seconds: Family::default(),
            slo_objective: Family::default(),
            slo_period: Family::default(),
            ledger_files_set_aside: Counter::default(),
        }
    }
}

impl AnswerMetrics {
    /// Registers every one of them in `registry`.
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "canary_queries",
            "Answer canary queries to the DNS server in front of each sink, by result (match, differs, error)",
            self.canary_queries.clone(),
        );
        registry.register(
            "canary_stale_names",
            "Names whose served answer differs from the decision past the sink's canary grace (alert when above 0)",
            self.canary_stale_names.clone(),
        );
        registry.register(
            "canary_stale_answer",
            "1 while the answer canary finds a name served otherwise than decided past the sink's grace, by sink, tenant, name and the location asked from (empty: the canary's own question); absent otherwise",
            self.canary_stale_answer.clone(),
        );
        registry.register(
            "answer_propagation_seconds",
            "Time from a decision to the answer canary seeing it served, per sink",
            self.answer_propagation.clone(),
        );
        registry.register(
            "name_availability_ratio",
            "Share of the known time a name answered with live addresses only (the availability ledger), by window",
            self.name_availability.clone(),
        );
        registry.register(
            "ledger_degraded",
            "1 while the availability ledger cannot record as configured (state_dir unwritable, a file unusable, writes failing); probing and publishing go on",
            self.ledger_degraded.clone(),
        );
        registry.register(
            "ledger_write_failures",
            "Availability ledger appends that failed (retried at the next tick)",
            self.ledger_write_failures.clone(),
        );
        registry.register(
            "tenant_served_seconds",
            "Seconds a tenant's names served live decided addresses (answered), a dead address, an undecided address or nothing, summed over its names, outside maintenance (the availability ledger)",
            self.tenant_served_seconds.clone(),
        );
        registry.register(
            "slo_objective_ratio",
            "A tenant's availability objective (slo), with the window it is kept over",
            self.slo_objective.clone(),
        );
        registry.register(
            "slo_period_seconds",
            "How long a tenant's error budget lasts (its slo_window), which the burn-rate alerts scale their thresholds by",
            self.slo_period.clone(),
        );
        registry.register(
            "ledger_files_set_aside",
            "Availability ledger files that were not ledger files, moved to ledger/aside/ (the name's history starts again)",
            self.ledger_files_set_aside.clone(),
        );
    }
}
