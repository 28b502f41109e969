//! The seam between the config and the sink kinds (vector's model: each component owns its
//! config). The config knows a `[sinks.NAME]` table only as a `kind`, the `delivery`
//! settings every sink shares, and the rest of its keys. A [`SinkCatalog`] (the sinks
//! crate's registry: one line per kind) parses those keys into the kind's own typed,
//! normalised settings, a [`SinkSpec`], and the spec answers what only that kind knows:
//! which routing policies it can express and what it requires of the tenants using it.

use std::any::Any;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::model::{
    Canary, Config, Delivery, EndpointConfig, RoutingPolicy, SinkTable, TenantConfig,
};
use crate::names::check_object_name;
use crate::plan::PlannedSink;

use super::{Errors, FieldError};

/// The sink kinds a program knows. Validation asks it to parse every `[sinks.NAME]` table.
pub trait SinkCatalog: Sync {
    /// The `kind` names, for the "unknown kind" error.
    fn kinds(&self) -> Vec<&'static str>;

    /// Parses and checks `table`'s own keys as kind `table.kind` (known: one of
    /// [`SinkCatalog::kinds`]); errors are located under `sinks.NAME`. Pure: no I/O. The
    /// spec comes back whenever the keys have the right shape, even with errors in their
    /// values, so the tenants using the sink are still checked against it and the operator
    /// sees every problem in one pass.
    fn parse(&self, name: &str, table: &SinkTable) -> Parsed;
}

/// What parsing one sink table found.
pub struct Parsed {
    /// The settings, when the table has the kind's shape.
    pub spec: Option<Arc<dyn SinkSpec>>,
    /// Every problem, located under `sinks.NAME`.
    pub errors: Vec<FieldError>,
}

/// One sink's parsed, normalised settings, and what its kind can and cannot do.
pub trait SinkSpec: fmt::Debug + Send + Sync + Any {
    /// The `kind` name.
    fn kind(&self) -> &'static str;

    /// `Ok` when the sink can express `policy` faithfully, else a hint for the error
    /// message (may be empty). A tenant asking a sink for a policy it cannot express is a
    /// config error, not a silent downgrade.
    fn supports(&self, policy: RoutingPolicy) -> Result<(), &'static str>;

    /// Checks a tenant that publishes through this sink (named `sink`) against what the
    /// kind requires: zones, value ranges of weights or locations.
    fn check_tenant(&self, sink: &str, tenant: &TenantUse<'_>, errs: &mut Vec<FieldError>);

    /// Something on the back end that no two sinks may share (a directory, a ConfigMap):
    /// a key, the field that names it, and the reason given when two sinks claim it.
    fn claim(&self) -> Option<Claim> {
        None
    }

    /// Whether replicas share the back end, so that with leader election only the leader
    /// writes it. A local output (a file on the replica's own node) answers false: every
    /// replica writes its own.
    fn shared(&self) -> bool {
        true
    }

    /// How the engine drives writes when the sink sets no `delivery`: [`Delivery::default`]
    /// for a back end the replicas share (an API with limits of its own),
    /// [`Delivery::local`] for an output local to one replica. A kind that paces its API
    /// requests itself and batches tenants into them (Route53) lifts the per-tenant limit.
    fn default_delivery(&self) -> Delivery {
        if self.shared() {
            Delivery::default()
        } else {
            Delivery::local()
        }
    }

    /// The DNS server that answers what this sink writes, when the kind has one of its own
    /// (the embedded server's listener, an RFC 2136 primary): what the answer canary asks
    /// unless the sink's `canary.address` says otherwise.
    fn answers_at(&self) -> Option<std::net::SocketAddr> {
        None
    }

    /// Whether the back end says through its API where its DNS server listens (PowerDNS's
    /// `local-address` and `local-port`): the answer canary then asks there, found once
    /// the engine runs, unless the sink's `canary.address` says otherwise.
    fn finds_dns_port(&self) -> bool {
        false
    }

    /// Whether the answer canary can read what this kind serves through the back end's own
    /// listing when no `canary.address` is given (a cloud provider's hosted zone, whose
    /// name servers it cannot be sure to reach).
    fn canary_reads_listing(&self) -> bool {
        false
    }

    /// A client network in each location the kind's own settings place clients in (the
    /// embedded server's `geo.networks`), by location: where the answer canary asks
    /// `geo` names from unless the sink's `canary.client_subnets` says otherwise.
    fn client_subnets(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    /// Whether the clusters can keep their reports here (`[multi_cluster]`): a zone API
    /// they share (PowerDNS, Route53, Cloudflare, Cloud DNS, Azure DNS) or the embedded server with `reports`
    /// (each cluster's server holds its own and asks its peers'); not an output local to
    /// one cluster (a hosts file, a ConfigMap) or a one-way notification.
    fn holds_reports(&self) -> bool {
        false
    }

    /// Whether the kind publishes wildcard names (`*.apps.example.com`) as RFC 4592 means
    /// them (the embedded server, PowerDNS, RFC 2136 primaries, Route53, Cloudflare, an
    /// external-dns provider told how to mark them): `Err` says what to do instead, after
    /// "cannot publish wildcards".
    fn takes_wildcards(&self) -> Result<(), &'static str> {
        Err(": publish it through a dns_server, powerdns, rfc2136, route53 or cloudflare sink")
    }

    /// Whether the kind publishes `answer = "cname"` tenants of `policy`: `Err` says why
    /// not, or what to set. A kind that holds one record per name publishes one host (see
    /// `TenantSnapshot::hosts`); only a kind that answers per query follows `weighted` and
    /// `geo` with CNAMEs.
    fn takes_cnames(&self, policy: RoutingPolicy) -> Result<(), &'static str> {
        let _ = policy;
        Err(": its back end holds addresses only")
    }

    /// Whether the sink talks TLS without verifying certificates (`insecure = true`):
    /// logged at start, since a forged certificate goes unnoticed there.
    fn unverified_tls(&self) -> bool {
        false
    }
}

/// A back-end resource one sink owns (see [`SinkSpec::claim`]).
#[derive(Debug, Clone)]
pub struct Claim {
    /// What is claimed, e.g. a directory path or `namespace/name`.
    pub key: String,
    /// The field naming it, where the error is reported.
    pub field: &'static str,
    /// The error for a second claimant, given the first sink's name.
    pub clash: fn(&str) -> String,
}

/// What a sink kind sees of a tenant that uses it.
pub struct TenantUse<'a> {
    /// Error path of the tenant (`tenants[3]`).
    pub path: &'a str,
    /// The tenant as configured.
    pub tenant: &'a TenantConfig,
    /// Its normalised domains.
    pub domains: &'a [String],
    /// Its selected endpoints with their index in the config (for error paths).
    pub endpoints: Vec<(usize, &'a EndpointConfig)>,
}

impl TenantUse<'_> {
    /// Reports every domain outside `zone` (normalised) of sink `sink`.
    pub fn domains_inside(&self, zone: &str, sink: &str, errs: &mut Vec<FieldError>) {
        for d in self.domains {
            if d != zone && !d.ends_with(&format!(".{zone}")) {
                errs.push(FieldError {
                    path: format!("{}.domains", self.path),
                    reason: format!("\"{d}\" is not inside zone \"{zone}\" of sink \"{sink}\""),
                });
            }
        }
    }
}

/// Parses every sink through `catalog`, with the checks every kind shares (name,
/// delivery, claims). Returns every sink that parsed, errors or not (see
/// [`SinkCatalog::parse`]).
pub(super) fn resolve_sinks(
    config: &Config,
    catalog: &dyn SinkCatalog,
    errs: &mut Errors,
) -> BTreeMap<String, PlannedSink> {
    if let Err(e) = check_object_name(&config.owner_id) {
        errs.push("owner_id", e);
    }
    let kinds = catalog.kinds();
    let mut claims: HashMap<String, &str> = HashMap::new();
    let mut out = BTreeMap::new();
    for (name, table) in &config.sinks {
        if let Err(e) = check_object_name(name) {
            errs.push(format!("sinks.{name}"), e);
        }
        if !kinds.contains(&table.kind.as_str()) {
            errs.push(
                format!("sinks.{name}.kind"),
                format!(
                    "unknown sink kind \"{}\" (one of {})",
                    table.kind,
                    kinds.join(", ")
                ),
            );
            continue;
        }
        if let Some(delivery) = &table.delivery {
            check_delivery(delivery, &format!("sinks.{name}.delivery"), errs);
        }
        let parsed = catalog.parse(name, table);
        errs.0.extend(parsed.errors);
        let Some(spec) = parsed.spec else {
            continue;
        };
        if let Some(claim) = spec.claim() {
            if let Some(other) = claims.insert(claim.key.clone(), name) {
                errs.push(
                    format!("sinks.{name}.{}", claim.field),
                    (claim.clash)(other),
                );
            }
        }
        let canary = canary_of(name, table.canary.as_ref(), spec.as_ref(), errs);
        out.insert(
            name.clone(),
            PlannedSink {
                table: table.clone(),
                canary,
                delivery: table
                    .delivery
                    .clone()
                    .unwrap_or_else(|| spec.default_delivery()),
                spec,
            },
        );
    }
    out
}

/// The sink's answer canary: its `canary` table with the kind's own DNS port and client
/// subnets filled in, the kind's alone when there is no table, none when switched off or
/// there is no address to ask. Its address stays unset where the kind finds its port
/// at run time (`finds_dns_port`) or reads a listing.
fn canary_of(
    name: &str,
    table: Option<&Canary>,
    spec: &dyn SinkSpec,
    errs: &mut Errors,
) -> Option<Canary> {
    let own = spec.answers_at();
    let Some(table) = table else {
        return (own.is_some() || spec.finds_dns_port()).then(|| Canary {
            client_subnets: spec.client_subnets(),
            ..Canary::at(own)
        });
    };
    if !table.enabled {
        return None;
    }
    let path = format!("sinks.{name}.canary");
    if table.every < Duration::from_millis(100) {
        errs.push(format!("{path}.every"), "must be at least 100ms");
    }
    if table.max_queries_per_second == 0 {
        errs.push(
            format!("{path}.max_queries_per_second"),
            "must be at least 1",
        );
    }
    let mut client_subnets = spec.client_subnets();
    for (geo, subnet) in &table.client_subnets {
        if subnet.parse::<ipnet::IpNet>().is_err() {
            errs.push(
                format!("{path}.client_subnets.{geo}"),
                format!("{subnet:?} is not a network (address/prefix, e.g. 10.1.7.0/24)"),
            );
        }
        if geo.is_empty() {
            errs.push(
                format!("{path}.client_subnets"),
                "a location must not be empty",
            );
        }
        client_subnets.insert(geo.to_ascii_uppercase(), subnet.clone());
    }
    let address = table.address.or(own);
    // Without an address, the kind finds its port once running or the listing is read.
    let listed = address.is_none() && !spec.finds_dns_port();
    if listed && !spec.canary_reads_listing() {
        errs.push(
            format!("{path}.address"),
            "needed: this kind has no DNS port of its own; give the DNS server that answers what it writes",
        );
        return None;
    }
    if listed && !table.client_subnets.is_empty() {
        errs.push(
            format!("{path}.client_subnets"),
            "a listing is read, not asked from a place: give `address` (a name server of the zone) to ask geo names as clients",
        );
    }
    Some(Canary {
        address,
        client_subnets,
        ..table.clone()
    })
}

fn check_delivery(d: &Delivery, path: &str, errs: &mut Errors) {
    if !(d.max_writes_per_second > 0.0 && d.max_writes_per_second.is_finite()) {
        errs.push(
            format!("{path}.max_writes_per_second"),
            "must be greater than 0",
        );
    }
    if d.burst == 0 {
        errs.push(format!("{path}.burst"), "must be at least 1");
    }
    if d.max_in_flight == 0 {
        errs.push(
            format!("{path}.max_in_flight"),
            "must be at least 1 (0 would never write)",
        );
    }
    if d.reconcile_interval < Duration::from_secs(1) {
        errs.push(format!("{path}.reconcile_interval"), "must be at least 1s");
    }
    if d.backoff_min.is_zero() || d.backoff_min > d.backoff_max {
        errs.push(
            format!("{path}.backoff_min"),
            "must be greater than 0 and not above backoff_max",
        );
    }
}
