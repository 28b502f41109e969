//! `[[endpoints]]`, `[[tenants]]` and `[sinks.*]`: the gateways, who publishes which of them
//! under which names, and where.

use std::collections::BTreeMap;
use std::time::Duration;

use schemars::JsonSchema;
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};

use super::CheckOverrides;

/// `[[endpoints]]`: one gateway.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EndpointConfig {
    /// Unique name, used in tenant lists, logs, metrics and `/status`.
    pub name: String,
    /// IP address published in DNS and probed (v4 or v6), or a host name (a cloud load
    /// balancer's, `my-lb-123.elb.amazonaws.com`): every address it resolves to is probed
    /// and published as its own endpoint `<name>@<address>`, so what is published is
    /// exactly what was probed. See `[resolver]`.
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
    /// After it fails while published, keep it out of DNS (forced down) until an operator
    /// releases it (`POST /v1/endpoints/NAME/release`), however healthy it looks again: F5's
    /// manual resume, for gateways that must be checked by a person after an incident.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hold_failback: bool,
    /// Overrides of `[defaults.check]` for this endpoint only.
    #[serde(default)]
    pub check: CheckOverrides,
    /// More checks of the same address (each over `[defaults.check]`, as `check` is), for
    /// health that one probe cannot tell: the gateway's HTTP health and its database port,
    /// or an external feed beside our own probe. Each keeps its own hysteresis; `require`
    /// combines their verdicts with `check`'s.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<CheckOverrides>,
    /// With `checks`: how many of all the checks (`check` and `checks`) must pass: `"all"`
    /// (the default), `"any"`, or `{ quorum = K }`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require: Option<Require>,
    /// With `checks`: `check` must pass whatever `require` says (Cloudflare's monitor
    /// groups: one check must pass, a quorum of the rest).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub must_pass: bool,
}

/// How many of an endpoint's checks must pass for it to be up; written `"all"`, `"any"`
/// or `{ quorum = K }`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Require {
    /// Every check (a dependency list: the gateway and what it needs).
    #[default]
    All,
    /// One check (several ways to reach the same service).
    Any,
    /// At least this many.
    Quorum {
        /// How many checks must pass (1 to the number of checks).
        quorum: u32,
    },
}

impl Serialize for Require {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            Require::All => s.serialize_str("all"),
            Require::Any => s.serialize_str("any"),
            Require::Quorum { quorum } => {
                let mut map = s.serialize_map(Some(1))?;
                map.serialize_entry("quorum", quorum)?;
                map.end()
            }
        }
    }
}

impl JsonSchema for Require {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Require".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "\"all\", \"any\" or { quorum = K }: how many checks must pass",
            "anyOf": [
                { "enum": ["all", "any"] },
                {
                    "type": "object",
                    "properties": { "quorum": { "type": "integer", "minimum": 1 } },
                    "required": ["quorum"],
                    "additionalProperties": false
                }
            ]
        })
    }
}

impl<'de> Deserialize<'de> for Require {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Table {
            quorum: u32,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Word(String),
            Table(Table),
        }
        match Written::deserialize(d)
            .map_err(|_| de::Error::custom(r#"expected "all", "any" or { quorum = K }"#))?
        {
            Written::Word(w) if w == "all" => Ok(Require::All),
            Written::Word(w) if w == "any" => Ok(Require::Any),
            Written::Word(w) => Err(de::Error::custom(format!(
                r#"expected "all", "any" or {{ quorum = K }}, found "{w}""#
            ))),
            Written::Table(Table { quorum }) => Ok(Require::Quorum { quorum }),
        }
    }
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

/// What a tenant's names answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// The A/AAAA records of the endpoints `policy` picks.
    #[default]
    Addresses,
    /// A CNAME to the host name of an endpoint `policy` picks (every endpoint of the tenant
    /// is given by host name: a cloud load balancer's). Resolvers then follow the load
    /// balancer's own DNS as its addresses rotate; the probes still judge every address the
    /// name resolves to, and a host is answered while any of them is up. A zone's apex
    /// cannot hold a CNAME (RFC 1912 2.4): there the host's addresses are answered.
    Cname,
}

impl Answer {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Answer::Addresses => "addresses",
            Answer::Cname => "cname",
        }
    }

    fn is_addresses(&self) -> bool {
        *self == Answer::Addresses
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
    /// this tenant is written to. Default `<name>.hosts`; the OpenOva spec names it per tenant.
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
    /// The TTL published while any endpoint of the tenant is down (gdnsd halves its TTLs
    /// then): resolvers come back sooner for the name while it is degraded, so the next
    /// change reaches clients sooner. At most `ttl`; default: `ttl` always.
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>")]
    pub degraded_ttl: Option<Duration>,
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
    /// Every endpoint of the tenant that fails while published stays out of DNS (forced
    /// down) until an operator releases it, as an endpoint's own `hold_failback` does; an
    /// endpoint shared with other tenants is held in all of them (the hold is the
    /// endpoint's).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hold_failback: bool,
    /// Routing policy applied to the healthy set.
    #[serde(default)]
    pub policy: RoutingPolicy,
    /// `"addresses"` (default) or `"cname"`: a CNAME to the host name of the endpoint the
    /// policy picks, for endpoints given by a load balancer's name.
    #[serde(default, skip_serializing_if = "Answer::is_addresses")]
    pub answer: Answer,
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
    /// The availability objective of its names (`"99.9%"`), as the ledger counts it: the
    /// shipped alert rules page on its burn rate and `/v1/availability` reports it.
    /// A share (`0.999`) is read as well.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "text_or_number"
    )]
    #[schemars(with = "Option<TextOrNumber>")]
    pub slo: Option<String>,
    /// The window `slo` is kept over: a rolling duration (`"30d"`, the default) or
    /// `"month"` (the calendar month, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_window: Option<String>,
    /// The Kubernetes resource this tenant stands for (namespace, name), which its SLO
    /// alerts are labelled with so Alertmanager routes them to the team; none for a tenant
    /// of the TOML config.
    #[serde(skip)]
    #[schemars(skip)]
    pub resource: Option<(String, String)>,
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
    /// Rate limit, retries and drift repair; the same machinery for every kind. Unset: the
    /// kind's default (`SinkSpec::default_delivery`): [`Delivery::default`] for back ends
    /// the replicas share (an API with limits of its own), [`Delivery::local`] for outputs
    /// local to one replica (a hosts file, the embedded DNS server), where a write is a
    /// file rename or a memory swap, and the local pace for Route53, which paces its API
    /// requests itself and writes every waiting tenant in one round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<Delivery>,
    /// Where resolvers read what this sink writes, asked by the answer canary. Unset: the
    /// kind's own DNS port where it has one (the embedded server's listener, an RFC 2136
    /// primary, the `local-address` and `local-port` PowerDNS's API reports), else no
    /// canary for this sink (`/status` says why under `canaries_off`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<Canary>,
    /// The kind's own keys, parsed by the kind (their schema comes from the kind:
    /// `ho_kinds::schema::config_schema`).
    #[serde(flatten)]
    #[schemars(skip)]
    pub settings: BTreeMap<String, figment::value::Value>,
}

/// `canary = { ... }` in any sink: the answer canary asks the DNS server in front of the
/// back end for every name the sink publishes, the way a resolver would, and compares the
/// answer with what the orchestrator decided.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Canary {
    /// The DNS server (`host:port`, UDP) that answers for the sink's names: a secondary,
    /// the CoreDNS reading a hosts file or ConfigMap, PowerDNS's port as resolvers reach
    /// it. Unset: the kind's own (the embedded server's listener, an RFC 2136 primary,
    /// the `local-address` and `local-port` PowerDNS's API reports at start, a wildcard
    /// address meaning the API's host), or the zone's listing through the provider's API
    /// (route53, cloudflare, google_cloud_dns, azure_dns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub address: Option<std::net::SocketAddr>,
    /// `false` turns the canary off for this sink.
    #[serde(default = "super::check::yes")]
    pub enabled: bool,
    /// How often each name is asked (more names than `max_queries_per_second` allows in
    /// that time are asked less often), besides right after each change is written.
    #[serde(default = "default_canary_every", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub every: Duration,
    /// How long a served answer may differ from the decision before it is reported
    /// stale: the back end's expected propagation.
    #[serde(default = "default_canary_grace", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub grace: Duration,
    /// Queries per second the canary may send this server at most.
    #[serde(default = "default_canary_rate")]
    pub max_queries_per_second: u32,
    /// `geo` tenants' names are also asked as a client in each location (EDNS Client
    /// Subnet, RFC 7871), location (as in endpoints' `labels.geo`) to a client network in
    /// it, e.g. `{ IE = "10.1.7.0/24" }`: that location's answer must be its own addresses
    /// up, or another location's when none is. The embedded server's `geo.networks` fill in
    /// the locations not given here; a back end that locates by a database (PowerDNS's
    /// geoip backend) needs them given.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub client_subnets: BTreeMap<String, String>,
}

impl Canary {
    /// The canary of a kind's own DNS port: every name every 10 s, stale after 10 s, at
    /// most 200 queries a second.
    pub fn at(address: Option<std::net::SocketAddr>) -> Canary {
        Canary {
            address,
            enabled: true,
            every: default_canary_every(),
            grace: default_canary_grace(),
            max_queries_per_second: default_canary_rate(),
            client_subnets: BTreeMap::new(),
        }
    }
}

fn default_canary_every() -> Duration {
    Duration::from_secs(10)
}
fn default_canary_grace() -> Duration {
    Duration::from_secs(10)
}
fn default_canary_rate() -> u32 {
    200
}

/// `delivery = { ... }` in any sink: how the engine drives writes to it. Every sink gets the
/// same machinery; only the numbers differ.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Delivery {
    /// Token-bucket rate: writes per second the back end may receive; no second holds more
    /// than this (its whole part) or `burst`, whichever is larger.
    #[serde(default = "default_rate")]
    pub max_writes_per_second: f64,
    /// Token-bucket size: writes allowed back to back after a quiet period.
    #[serde(default = "default_burst")]
    pub burst: u32,
    /// Writes in flight at once, over all tenants; more wait their turn, changes and
    /// retries ahead of reconciles. Each write holds its request body and a connection
    /// until it ends, so a start-up or takeover round of every tenant must not open them
    /// all at once: that costs memory per tenant, and the back end gets a flood of
    /// concurrent requests.
    #[serde(default = "default_max_in_flight")]
    #[schemars(range(min = 1))]
    pub max_in_flight: u32,
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

impl Delivery {
    /// A local output's pace: 1,000 writes a second, as many back to back, so that a
    /// thousand tenants publish within a second of a start and a round of reconciles
    /// never holds a change back.
    pub fn local() -> Delivery {
        Delivery {
            max_writes_per_second: 1000.0,
            burst: 1000,
            ..Delivery::default()
        }
    }
}

impl Default for Delivery {
    fn default() -> Self {
        Delivery {
            max_writes_per_second: default_rate(),
            burst: default_burst(),
            max_in_flight: default_max_in_flight(),
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
fn default_max_in_flight() -> u32 {
    32
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

/// A value written as text or as a number (`slo = "99.9%"` or `slo = 0.999`): the number
/// is kept as its text, for the check that reads both to judge.
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
enum TextOrNumber {
    Text(String),
    Number(f64),
}

fn text_or_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(Option::<TextOrNumber>::deserialize(d)?.map(|v| match v {
        TextOrNumber::Text(t) => t,
        TextOrNumber::Number(n) => n.to_string(),
    }))
}
