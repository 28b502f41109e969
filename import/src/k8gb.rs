//! `import --from k8gb FILE...`: k8gb's Gslb resources as DNSFailover resources.
//!
//! k8gb runs in every cluster; each cluster's Gslb publishes that cluster's addresses (read
//! from the Ingress, Service or Gateway route it references) and learns the others' through
//! delegated zones. The orchestrator's equivalent is one DNSFailover per Gslb in each
//! cluster, its source naming the same object, with `[multi_cluster]` sharing the clusters'
//! addresses and verdicts. So a Gslb becomes, in its namespace:
//!
//! - a source reading what k8gb reads: `ingress` (embedded `spec.ingress`, or a referenced
//!   Ingress), `service`, `gateway` (a route's parent Gateway, `NAMESPACE/NAME` when shared);
//!   the `k8gb.io/exposed-ip-addresses` annotation, which k8gb prefers, as static addresses;
//! - the referenced object's host names as `domains`;
//! - `strategy`: `roundRobin` -> every healthy address (with `weight`: `weighted`, this
//!   cluster's weight), `failover` -> `failover` with this cluster first when it is the
//!   `primaryGeoTag`, `geoip` -> `geo` labelled with this cluster's geo tag; `dnsTtlSeconds`
//!   -> `ttl` (k8gb's default 30 s);
//! - a check where k8gb has none (it counts a cluster healthy while the Services have ready
//!   endpoints): a request for the host through the gateway, any status up to 499 healthy.
//!
//! This cluster's geo tag is the Gslb's `status.geoTag` (exported with the resource) or
//! `--geo-tag`. An Ingress annotated `k8gb.io/strategy` is a Gslb, as k8gb makes one of it.

mod owners;
mod selector;
pub mod sinks;
mod target;

use std::collections::BTreeSet;

use crate::resource::DNSFailover;
use anyhow::{bail, Context};
use serde_json::{json, Map, Value as Json};
use serde_yaml::Value;

use super::{text, unknown_keys};
use target::{annotation, Documents};

/// What `--from k8gb` is told besides the files.
pub struct Options {
    /// This cluster's geo tag (k8gb's `clusterGeoTag`), for Gslbs exported without status.
    pub geo_tag: Option<String>,
    /// The operator's sinks the resources publish to.
    pub sinks: Vec<String>,
    /// The namespace of documents that name none (kubectl's `-n`).
    pub namespace: Option<String>,
    /// The sinks as the operator's config has them (`--config`), to refuse at import a
    /// strategy they cannot carry.
    pub carried: Option<sinks::Sinks>,
}

/// The DNSFailover resources equivalent to the Gslbs among `docs`, what could not be
/// carried over, and what the operator must still do.
pub struct Imported {
    /// The resources, one per distinct check among a Gslb's hosts.
    pub resources: Vec<DNSFailover>,
    /// What has no equivalent (printed as `# NOT CARRIED OVER:`).
    pub not_carried: Vec<String>,
    /// Steps left to the operator (printed as `# TO DO:`).
    pub to_do: Vec<String>,
    /// Every Gslb refused, each with why and what to do; the others are imported.
    pub refused: Vec<String>,
}

/// k8gb's default record TTL (`resolver.DefaultTTLSeconds`).
const DEFAULT_TTL_SECONDS: u64 = 30;

/// The DNSFailovers equivalent to the Gslbs among `docs` (read with the Ingresses,
/// Services and routes they reference), each Gslb that cannot be imported refused alone
/// (a migration wants the others out and every refusal in one run); an error only when
/// the run as a whole cannot be one cluster's resources.
pub fn convert(docs: &[Value], options: &Options) -> anyhow::Result<Imported> {
    let documents = Documents(docs);
    let mut notes = Vec::new();
    let mut resources = Vec::new();
    let mut refused = Vec::new();
    let mut refused_docs: Vec<&Value> = Vec::new();
    let mut geo_tags = BTreeSet::new();
    let mut seen = BTreeSet::new();
    let mut gslbs = 0;
    for doc in docs {
        let gslb = match as_gslb(doc) {
            Ok(Some(gslb)) => gslb,
            Ok(None) => continue,
            Err(e) => {
                refused.push(format!("{e:#}"));
                refused_docs.push(doc);
                continue;
            }
        };
        gslbs += 1;
        let geo_tag = geo_tag_of(doc, options);
        if let Some(tag) = geo_tag {
            geo_tags.insert(tag.to_owned());
        }
        let mut own_notes = Vec::new();
        match one_gslb(
            &gslb,
            doc,
            geo_tag,
            &documents,
            options,
            &mut seen,
            &mut own_notes,
        ) {
            Ok(made) => {
                resources.extend(made);
                notes.extend(own_notes);
            }
            Err(e) => {
                refused.push(format!("{e:#}"));
                refused_docs.push(doc);
            }
        }
    }
    if gslbs == 0 && refused.is_empty() {
        bail!("no Gslb among the documents (kind Gslb, or an Ingress annotated k8gb.io/strategy)");
    }
    if geo_tags.len() > 1 {
        bail!("the Gslbs come from several clusters (geo tags {geo_tags:?}): import one cluster's resources at a time");
    }
    notes.extend(unread_kinds(docs));
    let to_do = steps(docs, &refused_docs, &resources, options);
    Ok(Imported {
        resources,
        not_carried: notes,
        to_do,
        refused,
    })
}

/// The cluster a Gslb was exported from: its status's `geoTag`, else `--geo-tag`.
fn geo_tag_of<'a>(doc: &'a Value, options: &'a Options) -> Option<&'a str> {
    doc.get("status")
        .and_then(|s| text(s, "geoTag"))
        .filter(|t| !t.is_empty())
        .or(options.geo_tag.as_deref())
}

/// What is left to the operator for `resources` (none for the Gslbs refused, which stay
/// in k8gb).
fn steps(
    docs: &[Value],
    refused: &[&Value],
    resources: &[DNSFailover],
    options: &Options,
) -> Vec<String> {
    let kept: Vec<Value> = (docs.iter())
        .filter(|d| !refused.iter().any(|r| std::ptr::eq(*r, *d)))
        .cloned()
        .collect();
    let mut to_do = owners::steps(&kept, resources, options.namespace.as_deref());
    to_do.extend([
        format!("apply in this cluster, with sinks {:?} allowed to the namespaces (`[[kubernetes.allow]]`) and `[kubernetes] tenants = true`", options.sinks),
        multi_cluster_step(resources),
        "k8gb's delegated zone (its CoreDNS, and the parent zone's NS records delegating to it) is replaced by the sinks named, one of two ways: sinks writing the parent zone's own records (a provider, or the dns_server sink holding the parent), then delete the delegation's NS records and glue from the parent; or the dns_server sink serving the delegated zone, then repoint the parent's NS records to it (docs/coming-from.md, the cut-over)".into(),
    ]);
    to_do.extend(policy_steps(resources, options));
    to_do
}

/// One Gslb's resources, checked against the operator's sinks when the import has them.
fn one_gslb<'d>(
    gslb: &Value,
    doc: &'d Value,
    geo_tag: Option<&str>,
    documents: &Documents,
    options: &'d Options,
    seen: &mut BTreeSet<(&'d str, &'d str)>,
    notes: &mut Vec<String>,
) -> anyhow::Result<Vec<DNSFailover>> {
    let (namespace, name) = identity(doc, options, seen)?;
    let made = failovers_of(
        gslb, doc, name, namespace, geo_tag, documents, options, notes,
    )
    .map_err(|e| match e.to_string().starts_with("Gslb ") {
        true => e,
        false => e.context(format!("Gslb {namespace}/{name}")),
    })?;
    if let Some(sinks) = &options.carried {
        let strategy = gslb.get("spec").and_then(|s| s.get("strategy"));
        let strategy = strategy.and_then(|s| text(s, "type")).unwrap_or_default();
        for policy in made.iter().filter_map(|r| r.spec.policy) {
            sinks.carry(&format!("Gslb {namespace}/{name}"), strategy, policy)?;
        }
    }
    Ok(made)
}

/// How k8gb's clusters answer together for the strategies among `resources`, and what
/// the orchestrator needs in each cluster to answer the same.
fn multi_cluster_step(resources: &[DNSFailover]) -> String {
    use ho_config::RoutingPolicy::{Failover, Geo, Weighted};
    let mut answers = BTreeSet::new();
    for resource in resources {
        answers.insert(match resource.spec.policy {
            Some(Failover) => "failover: the primaryGeoTag cluster's healthy addresses, the other clusters' only while it has none",
            Some(Geo) => "geoip: the healthy addresses of the client's cluster by geo tag",
            Some(Weighted) => "weighted roundRobin: every cluster's healthy addresses, shared out by weight",
            _ => "roundRobin: every cluster's healthy addresses",
        });
    }
    let answers: Vec<&str> = answers.into_iter().collect();
    format!("k8gb's clusters answer together ({}): run the orchestrator in each cluster with `[multi_cluster] enabled = true`, one `owner_id`, `[cluster] id` the cluster's geo tag, and import that cluster's Gslbs there", answers.join("; "))
}

/// The documents of kinds a Gslb does not read, as notes.
fn unread_kinds(docs: &[Value]) -> Vec<String> {
    let mut notes = Vec::new();
    for doc in docs {
        let kind = text(doc, "kind").unwrap_or("(none)");
        if !matches!(
            kind,
            "Gslb"
                | "Ingress"
                | "Service"
                | "Gateway"
                | "HTTPRoute"
                | "GRPCRoute"
                | "TLSRoute"
                | "TCPRoute"
                | "UDPRoute"
                | "VirtualService"
        ) {
            notes.push(format!(
                "a document of kind {kind} (not read by k8gb's Gslb)"
            ));
        }
    }
    notes
}

/// A Gslb's namespace (its own, else `--namespace`) and name; refused when either is
/// missing, the namespace is a template's, or the Gslb was seen before.
fn identity<'d>(
    doc: &'d Value,
    options: &'d Options,
    seen: &mut BTreeSet<(&'d str, &'d str)>,
) -> anyhow::Result<(&'d str, &'d str)> {
    let meta = doc.get("metadata");
    let name = meta
        .and_then(|m| text(m, "name"))
        .context("a Gslb without metadata.name")?;
    let namespace = meta
        .and_then(|m| text(m, "namespace"))
        .or(options.namespace.as_deref())
        .with_context(|| {
            format!("Gslb {name} names no metadata.namespace: pass --namespace (kubectl's -n when it was applied; the DNSFailover goes there)")
        })?;
    if let Err(e) = ho_config::names::check_kube_name(namespace, 63) {
        bail!("Gslb {namespace}/{name}: metadata.namespace {e}; a template's placeholder? Import the Gslb as the cluster has it (kubectl get gslb -n NAMESPACE -o yaml)");
    }
    if !seen.insert((namespace, name)) {
        bail!("Gslb {namespace}/{name} appears twice: import one cluster's resources at a time (each cluster runs its own DNSFailover)");
    }
    Ok((namespace, name))
}

/// What the policies of `resources` ask of the operator: geo tags for geoip, and (unless
/// the import checked the sinks against the config) sinks that carry weights or
/// locations.
fn policy_steps(resources: &[DNSFailover], options: &Options) -> Vec<String> {
    use ho_config::RoutingPolicy::{Geo, Weighted};
    let has = |p| resources.iter().any(|r| r.spec.policy == Some(p));
    let mut steps = Vec::new();
    if has(Geo) {
        steps.push("geoip: k8gb locates clients with its GeoIP database's geo tags; map client networks to each cluster's geo tag with the dns_server sink's `geo.networks` (tags that are country or continent codes also work with `geo.geoip_db`)".into());
    }
    if (has(Geo) || has(Weighted)) && options.carried.is_none() {
        steps.push(format!("policy weighted (strategy.weight) and geo (geoip) need sinks that carry weights or locations (dns_server, route53, powerdns with lua = true): an external-dns sink (external_dns_webhook, dns_endpoint) refuses them; pass --config to have the import check the sinks {:?}", options.sinks));
    }
    steps
}

/// The Gslb `doc` is, or an Ingress annotated as one (k8gb makes a Gslb of it); `None`
/// for other documents.
fn as_gslb(doc: &Value) -> anyhow::Result<Option<Value>> {
    match text(doc, "kind") {
        Some("Gslb") => Ok(Some(doc.clone())),
        Some("Ingress") => {
            let Some(strategy) = annotation(doc, "k8gb.io/strategy") else {
                return Ok(None);
            };
            let mut s = serde_yaml::Mapping::new();
            s.insert("type".into(), strategy.into());
            if let Some(tag) = annotation(doc, "k8gb.io/primary-geotag") {
                s.insert("primaryGeoTag".into(), tag.into());
            }
            if let Some(ttl) = annotation(doc, "k8gb.io/dns-ttl-seconds") {
                let ttl: u64 = ttl.parse().with_context(|| {
                    format!("annotation k8gb.io/dns-ttl-seconds {ttl:?} is not a number of seconds")
                })?;
                s.insert("dnsTtlSeconds".into(), ttl.into());
            }
            let mut spec = serde_yaml::Mapping::new();
            spec.insert("strategy".into(), Value::Mapping(s));
            spec.insert(
                "ingress".into(),
                doc.get("spec").cloned().unwrap_or_default(),
            );
            let mut gslb = doc.clone();
            gslb["kind"] = "Gslb".into();
            gslb["spec"] = Value::Mapping(spec);
            Ok(Some(gslb))
        }
        _ => Ok(None),
    }
}

/// One Gslb as DNSFailovers: one per distinct check among its hosts (k8gb judges each host
/// by its own Services), the first named like the Gslb, the others after their first host.
#[allow(clippy::too_many_arguments)]
fn failovers_of(
    gslb: &Value,
    original: &Value,
    name: &str,
    namespace: &str,
    geo_tag: Option<&str>,
    docs: &Documents,
    options: &Options,
    notes: &mut Vec<String>,
) -> anyhow::Result<Vec<DNSFailover>> {
    let at = format!("Gslb {namespace}/{name}");
    let spec = gslb.get("spec").cloned().unwrap_or_default();
    if text(original, "kind") == Some("Gslb") {
        unknown_keys(
            &spec,
            &["ingress", "resourceRef", "strategy", "serviceHealthPolicy"],
            &format!("{at}.spec"),
            notes,
        );
    }
    let mut target = target::resolve(gslb, name, namespace, docs, notes)?;
    for (host, _) in &target.hosts {
        if let Err(e) = ho_config::names::normalize_domain(host.trim_start_matches("*.")) {
            bail!("{at}: host {e}; a template's placeholder? Import the resources as the cluster has them (kubectl get gslb,ingress -n {namespace} -o yaml)");
        }
    }
    if let Some(ips) = target::exposed_ips_annotation(gslb) {
        notes.push(format!(
            "{at}: k8gb.io/exposed-ip-addresses ({}) replaces what the target reports, as in k8gb",
            ips.join(", ")
        ));
        target.source = json!({"addresses": ips});
    }
    if annotation(gslb, "k8gb.io/exposed-hostnames").is_some() {
        bail!("{at}: k8gb.io/exposed-hostnames publishes host names; a DNSFailover publishes the addresses it probes (a [[tenants]] entry with host-name endpoints carries them)");
    }
    let strategy = spec.get("strategy").cloned().unwrap_or_default();
    strategy_notes(&strategy, &at, notes);
    let mut source = target.source.as_object().cloned().unwrap_or_default();
    if let Some(tag) = geo_tag {
        source.insert("labels".into(), json!({"geo": tag}));
    }
    let mut spec_out = Map::new();
    apply_strategy(&strategy, &at, geo_tag, &mut source, &mut spec_out, notes)?;
    let ttl = strategy
        .get("dnsTtlSeconds")
        .and_then(Value::as_u64)
        .filter(|t| *t > 0)
        .unwrap_or(DEFAULT_TTL_SECONDS);
    spec_out.insert("sinks".into(), json!(options.sinks));
    spec_out.insert("endpoints".into(), json!([Json::Object(source)]));
    spec_out.insert("ttl".into(), format!("{ttl}s").into());
    per_check(target.hosts, name, namespace, &spec_out, &at)
}

/// Notes on a strategy's keys without an equivalent.
fn strategy_notes(strategy: &Value, at: &str, notes: &mut Vec<String>) {
    unknown_keys(
        strategy,
        &[
            "type",
            "weight",
            "primaryGeoTag",
            "dnsTtlSeconds",
            "splitBrainThresholdSeconds",
        ],
        &format!("{at}.spec.strategy"),
        notes,
    );
    if strategy.get("splitBrainThresholdSeconds").is_some() {
        notes.push(format!(
            "{at}.spec.strategy.splitBrainThresholdSeconds (deprecated in k8gb and unused)"
        ));
    }
}

/// The policy a strategy becomes, into `spec_out`, and this cluster's place in it (weight,
/// tier, geo label) into `source`.
fn apply_strategy(
    strategy: &Value,
    at: &str,
    geo_tag: Option<&str>,
    source: &mut Map<String, Json>,
    spec_out: &mut Map<String, Json>,
    notes: &mut Vec<String>,
) -> anyhow::Result<()> {
    let kind = text(strategy, "type").with_context(|| {
        format!("{at}.spec.strategy.type is required (roundRobin, failover or geoip)")
    })?;
    let need_tag = |why: &str| {
        geo_tag.with_context(|| format!("{at}: {why} needs this cluster's geo tag: export the Gslb with its status (kubectl get gslb -o yaml) or pass --geo-tag (k8gb's clusterGeoTag)"))
    };
    let weights = strategy.get("weight").and_then(Value::as_mapping);
    match kind {
        "roundRobin" => {
            if let Some(weights) = weights.filter(|w| !w.is_empty()) {
                let tag = need_tag("strategy.weight")?;
                let weight = weights
                    .get(tag)
                    .and_then(Value::as_u64)
                    .with_context(|| format!("{at}.spec.strategy.weight gives no weight to this cluster's geo tag {tag:?}"))?;
                spec_out.insert("policy".into(), "weighted".into());
                source.insert("weight".into(), weight.into());
            }
        }
        "failover" => {
            let primary = text(strategy, "primaryGeoTag")
                .filter(|t| !t.is_empty())
                .with_context(|| format!("{at}: the failover strategy requires strategy.primaryGeoTag (k8gb refuses it too)"))?;
            let tag = need_tag("the failover strategy")?;
            spec_out.insert("policy".into(), "failover".into());
            source.insert("priority".into(), if tag == primary { 1 } else { 2 }.into());
        }
        "geoip" => {
            let tag = need_tag("the geoip strategy")?;
            let default = text(strategy, "primaryGeoTag")
                .filter(|t| !t.is_empty())
                .unwrap_or(tag);
            spec_out.insert("policy".into(), "geo".into());
            spec_out.insert("defaultGeo".into(), default.into());
            notes.push(format!("{at}: k8gb answers clients its GeoIP database does not place with every cluster's addresses; here they get defaultGeo {default}'s (the primaryGeoTag, else this cluster's tag: give every cluster's resource the same)"));
        }
        other => bail!("{at}.spec.strategy.type {other:?}: k8gb's strategies are roundRobin, failover and geoip"),
    }
    if weights.is_some_and(|w| !w.is_empty()) && kind != "roundRobin" {
        notes.push(format!(
            "{at}.spec.strategy.weight (k8gb weighs roundRobin only)"
        ));
    }
    Ok(())
}

/// One resource per distinct check among `hosts` (k8gb judges each host by its own
/// Services), the first named like the Gslb, the others after their first host.
fn per_check(
    hosts: Vec<(String, Option<Json>)>,
    name: &str,
    namespace: &str,
    spec_out: &Map<String, Json>,
    at: &str,
) -> anyhow::Result<Vec<DNSFailover>> {
    let mut groups: Vec<(Option<Json>, Vec<String>)> = Vec::new();
    for (host, check) in hosts {
        match groups.iter_mut().find(|(c, _)| *c == check) {
            Some((_, hosts)) => hosts.push(host),
            None => groups.push((check, vec![host])),
        }
    }
    let mut resources = Vec::new();
    for (i, (check, hosts)) in groups.into_iter().enumerate() {
        let resource_name = if i == 0 {
            name.to_owned()
        } else {
            let label = hosts[0]
                .trim_start_matches("*.")
                .split('.')
                .next()
                .unwrap_or_default();
            format!("{name}-{label}")
        };
        let mut spec = spec_out.clone();
        spec.insert("domains".into(), json!(hosts));
        if let Some(check) = check {
            spec.insert("check".into(), check);
        }
        let resource = json!({
            "apiVersion": "healthorchestrator.io/v1alpha1",
            "kind": "DNSFailover",
            "metadata": {"name": resource_name, "namespace": namespace},
            "spec": spec,
        });
        resources.push(serde_json::from_value(resource).with_context(|| {
            format!("{at}: the DNSFailover made of it does not parse (a bug in the import)")
        })?);
    }
    Ok(resources)
}
