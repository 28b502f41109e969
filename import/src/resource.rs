//! The `DNSFailover` resource (`healthorchestrator.io/v1alpha1`): one tenant, owned by the
//! team whose namespace holds it.
//!
//! The kind says what it does and does not collide with the `Tenant` kinds of
//! multi-tenancy operators (Capsule) or with Kuadrant's `DNSPolicy`/`DNSRecord`, which a
//! cluster may run beside it. The spec's keys are the `[[tenants]]` keys of the TOML
//! config spelled camelCase, as every Kubernetes API spells them (`holdFailback` is
//! `hold_failback`; `field_names` translates, also inside `check`); the status follows
//! Kubernetes' conventions (conditions that `kubectl wait --for=condition=Ready` reads).
//!
//! The fields renamed to camelCase in 0.2.0 (`degraded_ttl`, `hold_failback`,
//! `on_all_unhealthy`, `min_healthy`, `default_weight`, `default_geo`, `node_address`) are
//! read in both spellings until 0.4.0, and the CRD lists both (the old one as a deprecated
//! spelling), so an apply in either order never prunes a setting; one given in both
//! spellings is refused.

use std::collections::BTreeMap;

use ho_config::{Answer, CheckOverrides, OnAllUnhealthy, RoutingPolicy, WeightRule};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A set of domains published to the healthy subset of the gateways the team names or
/// the orchestrator discovers.
#[derive(CustomResource, Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "healthorchestrator.io",
    version = "v1alpha1",
    kind = "DNSFailover",
    plural = "dnsfailovers",
    shortname = "dnsfo",
    namespaced,
    status = "DNSFailoverStatus",
    printcolumn = r#"{"name":"Domains","type":"string","jsonPath":".spec.domains"}"#,
    printcolumn = r#"{"name":"Published","type":"string","jsonPath":".status.published.addresses"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DNSFailoverSpec {
    /// Fully qualified names that resolve to the published addresses; each must lie under
    /// a suffix the namespace is allowed (`[[kubernetes.allow]]`).
    pub domains: Vec<String>,
    /// Names of the operator's `[sinks.*]` to publish to, among those the namespace may use.
    pub sinks: Vec<String>,
    /// Where the gateways come from; addresses found by several sources are probed once.
    pub endpoints: Vec<EndpointSource>,
    /// Record TTL, e.g. `30s` (default 30s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<String>,
    /// Record TTL while any endpoint is down, e.g. `10s` (at most `ttl`; default: `ttl`).
    #[serde(
        default,
        rename = "degradedTTL",
        alias = "degraded_ttl",
        skip_serializing_if = "Option::is_none"
    )]
    pub degraded_ttl: Option<String>,
    /// A gateway that fails while published stays out of DNS until an operator releases it
    /// (`POST /v1/endpoints/NAME/release`; default false).
    #[serde(
        default,
        alias = "hold_failback",
        skip_serializing_if = "Option::is_none"
    )]
    pub hold_failback: Option<bool>,
    /// Routing policy applied to the healthy set (default `all`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<RoutingPolicy>,
    /// `addresses` (default) or `cname`: a CNAME to the host name (a `hosts` source's) of
    /// the endpoint the policy picks, where the sinks hold CNAMEs; the zone's apex answers
    /// addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Answer>,
    /// What to publish when every endpoint is unhealthy (default `publish_all`).
    #[serde(
        default,
        alias = "on_all_unhealthy",
        skip_serializing_if = "Option::is_none"
    )]
    pub on_all_unhealthy: Option<OnAllUnhealthy>,
    /// Panic threshold as a share (0.0-1.0) of endpoints that must be healthy.
    #[serde(
        default,
        alias = "min_healthy",
        skip_serializing_if = "Option::is_none"
    )]
    pub min_healthy: Option<f64>,
    /// Weights by endpoint label for `weighted` and `geo`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub weights: Vec<WeightRule>,
    /// Weight of endpoints no rule matches (default 1).
    #[serde(
        default,
        alias = "default_weight",
        skip_serializing_if = "Option::is_none"
    )]
    pub default_weight: Option<u32>,
    /// `geo` only: the geo answered to clients no endpoint matches.
    #[serde(
        default,
        alias = "default_geo",
        skip_serializing_if = "Option::is_none"
    )]
    pub default_geo: Option<String>,
    /// Availability objective of the names, as the orchestrator's ledger counts it
    /// (`"99.9%"`): the shipped rules alert on its burn rate, labelled with this resource's
    /// namespace and name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<String>,
    /// The window `slo` is kept over: a duration (`30d`, the default) or `month`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_window: Option<String>,
    /// Overrides of the operator's `[defaults.check]` for this resource's endpoints (its
    /// keys camelCase: `fastInterval`, `expectStatus`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "super::field_names::serialize",
        deserialize_with = "super::field_names::deserialize"
    )]
    pub check: Option<CheckOverrides>,
}

/// One source of gateways: exactly one of `addresses`, `hosts`, `gateway`, `ingress`,
/// `service` or `nodes`, with the labels, weight and priority every address it yields
/// carries.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EndpointSource {
    /// Static IP addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<String>,
    /// Host names of load balancers (a cloud load balancer's DNS name): each is resolved
    /// (the operator's `[resolver]`) and probed at every address it resolves to; with
    /// `answer: cname` the name itself is published.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// A Gateway API `Gateway`: its `status.addresses` of type `IPAddress`, and of type
    /// `Hostname` as under `hosts`. `NAME` in the
    /// resource's namespace, or `NAMESPACE/NAME` for a shared Gateway one of whose listeners
    /// takes routes from all namespaces (`allowedRoutes.namespaces.from: All`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// An `Ingress` (`networking.k8s.io/v1`) in the resource's namespace: its
    /// `status.loadBalancer.ingress[]`, where its controller serves it (what k8gb's Gslb
    /// resources point at): each entry's `ip`, else its `hostname` as under `hosts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<String>,
    /// A `Service` of type LoadBalancer in the resource's namespace: its
    /// `status.loadBalancer.ingress[]`, each entry's `ip`, else its `hostname` as under
    /// `hosts` (AWS's load balancers report only a host name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// Nodes carrying every one of these labels (OpenOva's node-IP model): each node's
    /// `nodeAddress` address. Only where the namespace's allowance grants `nodes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<BTreeMap<String, String>>,
    /// Which node address `nodes` publishes: `ExternalIP` (default) or `InternalIP`.
    #[serde(
        default,
        alias = "node_address",
        skip_serializing_if = "Option::is_none"
    )]
    pub node_address: Option<NodeAddressType>,
    /// Labels for `weights` rules and `geo` routing.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Weight for `weighted` routing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    /// Tier for `failover` routing (lower is preferred).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
    /// Overrides of the resource's `check` for this source's addresses (a standby site
    /// answering on another port or path).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "super::field_names::serialize",
        deserialize_with = "super::field_names::deserialize"
    )]
    pub check: Option<CheckOverrides>,
}

/// A node address type, as `status.addresses[].type` spells it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum NodeAddressType {
    /// Reachable from outside the cluster: what internet clients need.
    #[default]
    ExternalIP,
    /// The cluster network's address: for clients inside it.
    InternalIP,
}

impl NodeAddressType {
    /// The spelling in a Node's `status.addresses[].type`.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeAddressType::ExternalIP => "ExternalIP",
            NodeAddressType::InternalIP => "InternalIP",
        }
    }
}

/// What the orchestrator made of the resource: whether it was accepted and why not,
/// whether its records are written, what is published.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DNSFailoverStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Accepted` (allowed, valid, its names unclaimed) and `Ready` (published and written
    /// to every sink).
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// What the tenant publishes now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<Published>,
    /// Endpoints by state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoints: Option<EndpointCounts>,
    /// The last write to each sink.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sinks: Vec<SinkWrite>,
}

/// A Kubernetes condition (the fields of `metav1.Condition`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// `Accepted` or `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// One CamelCase word a program can match on.
    pub reason: String,
    /// What a person reads: for a refusal, the same words `check-config` prints.
    pub message: String,
    /// When `status` last changed (RFC 3339).
    pub last_transition_time: String,
    /// The generation the condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// The published addresses, at most [`MAX_LISTED`] of them listed.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Published {
    /// `healthy`, `all_unhealthy`, ... as in `/status`.
    pub mode: String,
    /// The addresses (the first [`MAX_LISTED`]).
    pub addresses: Vec<String>,
    /// How many addresses are published in all.
    pub count: usize,
}

/// Endpoint counts by verdict.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointCounts {
    /// Healthy.
    pub healthy: usize,
    /// Unhealthy.
    pub unhealthy: usize,
    /// No verdict yet.
    pub unknown: usize,
}

/// One sink's last write of this tenant.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SinkWrite {
    /// The sink's name.
    pub name: String,
    /// Whether the latest desired state is written.
    pub written: bool,
    /// When the state now written was first written (RFC 3339); the periodic re-writes
    /// that repair drift leave it, so a steady tenant's status does not change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written_at: Option<String>,
    /// The last failure's message, while the latest state is not written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Most addresses a status lists: a tenant with thousands of endpoints keeps its status
/// small (etcd objects are capped at 1.5 MiB, and `kubectl get` should stay readable).
pub const MAX_LISTED: usize = 32;

/// The finalizer that holds a deleted resource until its records are withdrawn.
pub const FINALIZER: &str = "healthorchestrator.io/withdraw-records";
