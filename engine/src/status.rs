//! The `/status` document: what an operator reads to know what is published and why.

use std::net::IpAddr;

use ho_config::{OnAllUnhealthy, RoutingPolicy};
use serde::Serialize;

pub use crate::clock::{unix_seconds, Timestamp};
pub use crate::hosts::HostStatus;
use crate::hysteresis::Health;
use crate::leadership::LeadershipStatus;
use crate::snapshot::PublishMode;

pub use crate::drain::Forced;

/// The whole `/status` response.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// The OpenOva spec's fields, for its dashboards and scripts.
    #[serde(flatten)]
    pub summary: Summary,
    /// Tracker view.
    #[serde(flatten)]
    pub tracker: TrackerStatus,
    /// One entry per sink.
    pub sinks: Vec<SinkStatus>,
    /// This replica's role in leader election (`single` without it).
    pub leadership: LeadershipStatus,
    /// Whether this API takes operator actions (drain, undrain): `api.admin_token_file` is
    /// set. The page shows its admin token field only then.
    pub operator_actions: bool,
    /// Which cluster (vantage point) this instance is, once known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterStatus>,
    /// Endpoints' host names and what they resolve to (none without such endpoints).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HostStatus>,
    /// What the answer canary finds each sink's DNS server answering (empty without a
    /// canary: a list either way, so `jq '.canaries[]'` reads it).
    pub canaries: Vec<CanaryStatus>,
    /// The sinks no canary asks, each with why (and what to set to have one).
    pub canaries_off: Vec<CanaryOff>,
    /// `[ring]`: the members sharing the probing and this replica's part.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ring: Option<RingStatus>,
    /// The availability ledger: recording, or degraded and why.
    pub ledger: LedgerStatus,
}

/// The availability ledger as `/status` shows it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LedgerStatus {
    /// `recording` (to `state_dir`), `memory` (no `state_dir`: the last 30 days in
    /// memory), or `degraded` (it cannot record as configured: see `problems`).
    pub state: &'static str,
    /// What keeps it from recording as configured, newest last (at most 20).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

/// The ring as `/status` shows it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RingStatus {
    /// This replica's identity.
    pub identity: String,
    /// Targets this replica probes now.
    pub probing: usize,
    /// The live members, each with the age of its Lease at the last listing and the
    /// targets it owns.
    pub members: Vec<MemberStatus>,
}

/// One live member.
#[derive(Debug, Clone, Serialize)]
pub struct MemberStatus {
    /// Its identity (its Lease's holder).
    pub identity: String,
    /// Where its verdict stream listens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    /// Seconds since its Lease last changed, as of the last listing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_age_seconds: Option<f64>,
    /// Targets it owns (of those this replica knows).
    pub owns: usize,
}

/// This instance's cluster id and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClusterStatus {
    /// The id (`[cluster] id`, or derived).
    pub id: String,
    /// `config`, `kube-system` (hash of that namespace's UID), `machine-id` (hash of
    /// /etc/machine-id) or `hostname`.
    pub source: &'static str,
}

/// The fields of the OpenOva spec's `/status` (`HealthStatus`), computed from the
/// tracker's view, so its scripts and dashboards keep working.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Addresses of the endpoints that are up, sorted, each once: what the OpenOva spec's `/status`
    /// lists (its nodes' IPs), so scripts reading it keep working.
    pub healthy_nodes: Vec<String>,
    /// Names of the endpoints that are up.
    pub healthy_endpoints: Vec<String>,
    /// Endpoints configured.
    pub total_nodes: usize,
    /// When the latest probe finished; `None` before the first.
    pub last_check: Option<Timestamp>,
}

impl Summary {
    /// The summary of `tracker`.
    pub fn of(tracker: &TrackerStatus) -> Summary {
        let latest = tracker
            .endpoints
            .iter()
            .filter_map(|e| e.last.as_ref().map(|l| l.at))
            .max();
        let up = || tracker.endpoints.iter().filter(|e| e.state == Health::Up);
        let addresses: std::collections::BTreeSet<IpAddr> = up().map(|e| e.address).collect();
        Summary {
            healthy_nodes: addresses.iter().map(IpAddr::to_string).collect(),
            healthy_endpoints: up().map(|e| e.name.clone()).collect(),
            total_nodes: tracker.endpoints.len(),
            last_check: latest,
        }
    }
}

/// Endpoints and tenants, from the tracker.
#[derive(Debug, Clone, Serialize)]
pub struct TrackerStatus {
    /// Same as `/readyz`.
    pub ready: bool,
    /// True while this prober judges itself impaired (a wave of its targets failed at
    /// once, `[brake] impaired_share`): every withdrawal and vote is held.
    pub impaired: bool,
    /// Every endpoint.
    pub endpoints: Vec<EndpointStatus>,
    /// Every tenant.
    pub tenants: Vec<TenantStatus>,
}

/// One endpoint's health.
#[derive(Debug, Clone, Serialize)]
pub struct EndpointStatus {
    /// Endpoint name.
    pub name: String,
    /// Address.
    pub address: IpAddr,
    /// What is probed (shared with endpoints that have the same address and check).
    pub target: String,
    /// Verdict.
    pub state: Health,
    /// When the verdict last changed.
    pub since: Option<Timestamp>,
    /// Successes counting towards `rise`.
    pub consecutive_successes: u32,
    /// Failures counting towards `fall`.
    pub consecutive_failures: u32,
    /// Probes failed in a row up to the latest, whatever the state (what Kuadrant's
    /// probes call `consecutiveFailures`).
    pub failed_in_a_row: u32,
    /// Probes since start.
    pub probes: u64,
    /// Failed probes since start.
    pub failures: u64,
    /// Successes that make a down endpoint up (`rise`), for "DOWN 1/2".
    pub rise: u32,
    /// Failures that make an up endpoint down (`fall`).
    pub fall: u32,
    /// Verdict changes since start.
    pub transitions: u64,
    /// Total time down since start, the current down spell included.
    pub downtime_seconds: f64,
    /// Drained by an operator (`POST /v1/endpoints/NAME/drain`).
    pub drained: bool,
    /// Health an operator forced (`POST /v1/endpoints/NAME/force-up`, `/force-down`;
    /// `/release` ends it): it decides publication instead of `state`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forced: Option<Forced>,
    /// The latest probe.
    pub last: Option<LastProbe>,
    /// Flap damping, when on for this endpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub damping: Option<DampingStatus>,
    /// The weight its checks report (`reported_weight`), published by weighted tenants
    /// instead of the configured one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reported_weight: Option<u32>,
    /// An endpoint of several checks (`checks`): each check's verdict, its own first, and
    /// the rule that made `state` of them. The fields above are of its own check.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub composite: Option<CompositeStatus>,
    /// `[ring]`: how long no member has probed its target (its owners all left); `state` is
    /// their last verdict, standing until a new owner's first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unowned_seconds: Option<f64>,
}

/// How a composite endpoint's checks decided its verdict.
#[derive(Debug, Clone, Serialize)]
pub struct CompositeStatus {
    /// How many checks must pass.
    pub needed: usize,
    /// Its own check (`check`) must pass.
    pub must_pass: bool,
    /// Every check: its own first, then `checks` in order.
    pub checks: Vec<CheckStatus>,
}

/// One check of a composite endpoint.
#[derive(Debug, Clone, Serialize)]
pub struct CheckStatus {
    /// What is probed.
    pub target: String,
    /// Its verdict (flap damping applied).
    pub state: Health,
    /// Its latest probe.
    pub last: Option<LastProbe>,
}

/// An endpoint's flap-damping state.
#[derive(Debug, Clone, Serialize)]
pub struct DampingStatus {
    /// Current penalty (decays by half every half-life).
    pub penalty: f64,
    /// Held out of DNS now.
    pub held: bool,
}

/// The latest probe of an endpoint.
#[derive(Debug, Clone, Serialize)]
pub struct LastProbe {
    /// Passed?
    pub ok: bool,
    /// `ok` or why not.
    pub reason: String,
    /// Duration.
    pub latency_ms: f64,
    /// When it finished.
    pub at: Timestamp,
}

/// One tenant and what it publishes.
#[derive(Debug, Clone, Serialize)]
pub struct TenantStatus {
    /// Tenant name.
    pub name: String,
    /// Domains.
    pub domains: Vec<String>,
    /// Sink names.
    pub sinks: Vec<String>,
    /// Routing policy.
    pub policy: RoutingPolicy,
    /// All-unhealthy behaviour.
    pub on_all_unhealthy: OnAllUnhealthy,
    /// Panic threshold.
    pub min_healthy: f64,
    /// The latest snapshot; `null` while waiting for verdicts.
    pub published: Option<PublishedStatus>,
    /// Each endpoint of the tenant, and why it is or is not published.
    pub endpoints: Vec<TenantEndpointStatus>,
    /// `[multi_cluster]`: the latest vote (live and aged-out clusters, each address's
    /// owner and down votes); absent for tenants that do not vote.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub votes: Option<std::sync::Arc<crate::multi_cluster::vote::Tally>>,
    /// Addresses the blast-radius brake keeps published although they were withdrawn
    /// (`[brake]`); 0 (absent) when it holds none.
    #[serde(skip_serializing_if = "is_zero")]
    pub brake_held: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// One tenant in a few numbers, for readers that need every tenant often (a Kubernetes
/// resource's status, each second): none of `/status`'s per-endpoint detail.
#[derive(Debug, Clone, Serialize)]
pub struct TenantSummary {
    /// Tenant name.
    pub name: String,
    /// What it publishes now.
    pub published: Option<PublishedStatus>,
    /// Its endpoints that are up.
    pub healthy: usize,
    /// Its endpoints that are down.
    pub unhealthy: usize,
    /// Its endpoints with no verdict yet.
    pub unknown: usize,
}

/// Every tenant's summary and every sink's rows: what [`crate::Engine::overview`] answers.
#[derive(Debug, Clone)]
pub struct Overview {
    /// The tenants, in config order.
    pub tenants: Vec<TenantSummary>,
    /// The sinks with their per-tenant rows.
    pub sinks: Vec<SinkStatus>,
}

/// One endpoint as seen by one tenant.
#[derive(Debug, Clone, Serialize)]
pub struct TenantEndpointStatus {
    /// Endpoint name.
    pub name: String,
    /// Address.
    pub address: IpAddr,
    /// Whether the latest snapshot lists it.
    pub published: bool,
    /// Whether an operator drained it (`POST /v1/endpoints/NAME/drain`). Drained and
    /// still published means every endpoint of the tenant is drained: the drains are
    /// ignored there, so the name is never empty.
    pub drained: bool,
    /// Why.
    pub why: Why,
}

/// Why an address is or is not published.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Why {
    /// Published: healthy.
    Healthy,
    /// Published although not healthy: a fail-open rule applies.
    FailOpen,
    /// Not published: unhealthy.
    Unhealthy,
    /// Not published: no verdict yet.
    Unknown,
    /// Not published: healthy, but a better `failover` tier is serving.
    StandbyTier,
    /// Not published: healthy, but flapping; flap damping holds it out until it calms down.
    Damped,
    /// Not published: an operator drained it.
    Drained,
    /// Published although down here: fewer than `failure_threshold` of the live
    /// clusters see it down (`[multi_cluster]`).
    KeptByVote,
    /// Not published although up here: `failure_threshold` of the live clusters see it
    /// down (`[multi_cluster]`).
    WithdrawnByVote,
    /// Not published: healthy, but the back ends keep the last set (`keep_last`) or
    /// nothing was published yet.
    #[serde(rename = "held")]
    KeptLast,
}

/// A published snapshot.
#[derive(Debug, Clone, Serialize)]
pub struct PublishedStatus {
    /// Sequence number.
    pub seq: u64,
    /// Why these addresses.
    pub mode: PublishMode,
    /// Addresses.
    pub addresses: Vec<IpAddr>,
    /// When decided.
    pub at: Timestamp,
}

/// One sink.
#[derive(Debug, Clone, Serialize)]
pub struct SinkStatus {
    /// Sink name.
    pub name: String,
    /// Sink kind.
    pub kind: &'static str,
    /// Per tenant written to.
    pub tenants: Vec<SinkTenantStatus>,
    /// Writes waiting for a place among `delivery.max_in_flight` or a write token.
    pub queued: usize,
    /// True while this replica does not write the sink: a shared back end and another
    /// replica holds the Lease (its snapshots are kept, ready for a takeover).
    pub standby: bool,
}

/// One tenant as seen by one sink.
#[derive(Debug, Clone, Serialize)]
pub struct SinkTenantStatus {
    /// Tenant name.
    pub tenant: String,
    /// Latest snapshot received.
    pub desired_seq: u64,
    /// Latest snapshot written successfully.
    pub written_seq: Option<u64>,
    /// Whether the latest snapshot is still to be written.
    pub pending: bool,
    /// Failed attempts since the last success.
    pub attempts: u32,
    /// When the last write succeeded.
    pub last_success: Option<Timestamp>,
    /// When the state now written was first written; reconciles of it leave this as it is.
    pub written_at: Option<Timestamp>,
    /// The last error, if the last attempt failed.
    pub last_error: Option<SinkErrorStatus>,
}

/// A sink error as shown in `/status`.
#[derive(Debug, Clone, Serialize)]
pub struct SinkErrorStatus {
    /// When.
    pub at: Timestamp,
    /// What went wrong.
    pub message: String,
    /// Whether it is being retried.
    pub retrying: bool,
}

/// One sink's answer canary in `/status`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CanaryStatus {
    /// The sink.
    pub sink: String,
    /// The DNS server asked.
    pub address: String,
    /// Names asked.
    pub names: usize,
    /// Queries sent since start.
    pub queries: u64,
    /// Queries without a usable answer.
    pub errors: u64,
    /// The latest of those.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Names served otherwise than decided past the grace.
    pub stale: Vec<StaleName>,
    /// The latest time from a decision to the canary seeing it served (seconds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_propagation_seconds: Option<f64>,
}

/// A sink no answer canary asks.
#[derive(Debug, Clone, Serialize)]
pub struct CanaryOff {
    /// The sink.
    pub sink: String,
    /// Why: turned off, no tenant publishes to it, or no DNS port the kind knows of.
    pub reason: String,
}

/// A name served otherwise than decided.
#[derive(Debug, Clone, Serialize)]
pub struct StaleName {
    /// The name.
    pub name: String,
    /// The location it was asked from as a client there (a `geo` name), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub geo: Option<String>,
    /// Its tenant.
    pub tenant: String,
    /// What the server answered.
    pub served: Vec<IpAddr>,
    /// The CNAME the server answered, when it answered one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub served_host: Option<String>,
    /// The error code the server answered instead of records (`SERVFAIL`, `REFUSED`):
    /// it served nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub served_rcode: Option<String>,
    /// The delegation the server referred the question to instead of answering
    /// (`below a delegation at NAME (NS ...)`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub served_referral: Option<String>,
    /// What was decided.
    pub intended: Vec<IpAddr>,
    /// Since when it differs.
    pub since: Timestamp,
}
