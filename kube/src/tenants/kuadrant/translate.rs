//! The translation's side: one namespace's documents (with the Gateways its policies
//! target) through the binary's importer ([`Translate`]), and each record's tenants as
//! `DNSFailover` stand-ins for admission.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use kube::api::{DynamicObject, ObjectMeta};
use serde_json::{json, Value};

use super::super::resource::{DNSFailover, DNSFailoverSpec};
use super::super::watch::KuadrantStores;

/// The config `import --from kuadrant` makes of documents (as JSON), or why it cannot.
pub trait Translate: Send + Sync {
    /// One namespace's DNSRecords, DNSHealthCheckProbes and DNSPolicies.
    fn translate(&self, docs: &[Value]) -> Result<Translation, String>;
}

/// One namespace's documents translated.
pub struct Translation {
    /// The equivalent config, as JSON.
    pub config: Value,
    /// The tenants each DNSRecord became (one per distinct answer among its names), its
    /// own first.
    pub by_record: BTreeMap<String, Vec<String>>,
    /// The DNSRecords that publish nothing, and why.
    pub unpublished: BTreeMap<String, String>,
    /// Per DNSPolicy: the records it governs, or why it cannot be applied.
    pub policies: BTreeMap<String, PolicyOutcome>,
}

/// What became of one DNSPolicy in a translation.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PolicyOutcome {
    /// The DNSRecords it governs.
    pub records: Vec<String>,
    /// Why it cannot be applied; its records keep their last accepted translation.
    pub invalid: Option<String>,
}

/// One DNSRecord, written or made from a Gateway's listener, and the `DNSFailover`s
/// standing for it (one per distinct answer among its names), or why it has none.
#[derive(Clone)]
pub struct Record {
    /// The record as watched; for one made from a listener, an object with the Gateway's
    /// identity and the record's name.
    pub object: Arc<DynamicObject>,
    /// Its stand-ins, or why it has none.
    pub stand_ins: Result<Vec<DNSFailover>, String>,
    /// Made from a targeted Gateway's listener: there is no object to write a status to,
    /// so its refusals are told in the governing policy's status.
    pub listener: Option<Listener>,
}

/// Where a record made from a listener comes from: what it depends on, so that only the
/// deletion of one of them (or an accepted edit that drops it) withdraws it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    /// The Gateway whose listener it is.
    pub gateway: String,
    /// The DNSPolicy that governs it, as the translation that made it said.
    pub policy: Option<String>,
}

/// What the DNSRecords become, per (namespace, record name).
pub type Records = BTreeMap<(String, String), Record>;

/// The name of the `DNSFailover` standing for tenant `tenant` of a record (the record's
/// own tenant is named as the record).
pub fn stand_in_name(tenant: &str) -> String {
    format!("dnsrecord.{tenant}")
}

/// Whether stand-in `stand_in` stands for (part of) record `record`: `dnsrecord.RECORD`
/// or `dnsrecord.RECORD-N`.
pub(super) fn stands_for(stand_in: &str, record: &str) -> bool {
    stand_in
        .strip_prefix("dnsrecord.")
        .and_then(|t| t.strip_prefix(record))
        .is_some_and(|rest| {
            rest.is_empty()
                || rest
                    .strip_prefix('-')
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
}

/// What became of each DNSPolicy, per (namespace, name): its outcome, or why its
/// namespace's documents did not translate.
pub type Policies = BTreeMap<(String, String), Result<PolicyOutcome, String>>;

/// What a namespace may publish: the sinks its allowance names (the translation publishes
/// through all of them, as the import's one `dns` sink stands for "the operator's DNS"),
/// and whether a name lies in its allowed domains.
pub struct Allowance<'a> {
    /// The sinks of namespace `ns`.
    pub sinks: &'a dyn Fn(&str) -> Vec<String>,
    /// Whether namespace `ns` may publish name `host`.
    pub domain: &'a dyn Fn(&str, &str) -> bool,
}

/// Translates every namespace's documents, with its Gateways: a DNSPolicy that targets
/// one publishes its listeners whose hostnames lie in the namespace's allowed domains.
pub fn translate_all(
    records: &[Arc<DynamicObject>],
    others: &[Arc<DynamicObject>],
    gateways: &[Arc<DynamicObject>],
    translate: &dyn Translate,
    allowed: &Allowance<'_>,
) -> (Records, Policies) {
    let mut by_record = Records::new();
    let mut policies = Policies::new();
    for (ns, docs) in documents(records, others, gateways, allowed) {
        let translation = translate.translate(&docs);
        for doc in docs.iter().filter(|d| d["kind"] == "DNSPolicy") {
            let name = doc["metadata"]["name"].as_str().unwrap_or_default();
            let outcome = match &translation {
                Ok(t) => Ok(t.policies.get(name).cloned().unwrap_or_default()),
                Err(e) => Err(e.clone()),
            };
            policies.insert((ns.clone(), name.to_owned()), outcome);
        }
        let sinks = (allowed.sinks)(&ns);
        let of_ns = Namespace {
            ns: &ns,
            translation: &translation,
            sinks: &sinks,
        };
        for record in of_ns.records(records, gateways) {
            let name = record.object.metadata.name.clone().unwrap_or_default();
            by_record.insert((ns.clone(), name), record);
        }
    }
    (by_record, policies)
}

/// Each namespace's documents as the import reads them, with the Gateways its policies
/// target.
fn documents(
    records: &[Arc<DynamicObject>],
    others: &[Arc<DynamicObject>],
    gateways: &[Arc<DynamicObject>],
    allowed: &Allowance<'_>,
) -> BTreeMap<String, Vec<Value>> {
    let mut namespaces: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for o in records.iter().chain(others) {
        let ns = o.metadata.namespace.clone().unwrap_or_default();
        namespaces.entry(ns).or_default().push(document(o));
    }
    for (ns, docs) in namespaces.iter_mut() {
        let targeted = |g: &&Arc<DynamicObject>| {
            g.metadata.namespace.as_deref() == Some(ns.as_str())
                && docs.iter().any(|d| {
                    d["kind"] == "DNSPolicy"
                        && d["spec"]["targetRef"]["name"].as_str() == g.metadata.name.as_deref()
                })
        };
        let in_zone = |host: &str| (allowed.domain)(ns, host);
        let mine: Vec<Value> = gateways
            .iter()
            .filter(targeted)
            .map(|g| gateway_document(g, &in_zone))
            .collect();
        docs.extend(mine);
    }
    namespaces
}

/// One namespace's translation, and the sinks its records publish through.
struct Namespace<'a> {
    ns: &'a str,
    translation: &'a Result<Translation, String>,
    sinks: &'a [String],
}

impl Namespace<'_> {
    /// The namespace's written records and those made from its Gateways' listeners (each a
    /// record the translation published or said why not), with their stand-ins.
    fn records(
        &self,
        written: &[Arc<DynamicObject>],
        gateways: &[Arc<DynamicObject>],
    ) -> Vec<Record> {
        let ns = self.ns;
        let in_ns: Vec<&Arc<DynamicObject>> = written
            .iter()
            .filter(|r| r.metadata.namespace.as_deref() == Some(ns))
            .collect();
        let names: Vec<&str> = in_ns
            .iter()
            .filter_map(|r| r.metadata.name.as_deref())
            .collect();
        let mut out: Vec<Record> = in_ns
            .iter()
            .map(|r| self.record((*r).clone(), None))
            .collect();
        let Ok(t) = self.translation else {
            return out;
        };
        let made = t.by_record.keys().chain(t.unpublished.keys());
        for name in made.filter(|n| !names.contains(&n.as_str())) {
            if let Some((object, gateway)) = listener_record(name, ns, gateways) {
                let policy = t
                    .policies
                    .iter()
                    .find(|(_, o)| o.records.contains(name))
                    .map(|(p, _)| p.clone());
                out.push(self.record(object, Some(Listener { gateway, policy })));
            }
        }
        out
    }

    /// Record `object` with its stand-ins, or why it has none.
    fn record(&self, object: Arc<DynamicObject>, listener: Option<Listener>) -> Record {
        let name = object.metadata.name.clone().unwrap_or_default();
        let stand_ins = self
            .translation
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|t| {
                if let Some(why) = t.unpublished.get(&name) {
                    return Err(why.clone());
                }
                let tenants = t.by_record.get(&name).map_or(&[][..], Vec::as_slice);
                if tenants.is_empty() {
                    return Err(format!(
                        "DNSRecord {name} has no A or AAAA endpoint to publish"
                    ));
                }
                tenants
                    .iter()
                    .map(|tenant| stand_in(&object, tenant, &t.config, self.sinks))
                    .collect()
            });
        Record {
            object,
            stand_ins,
            listener,
        }
    }
}

/// A Gateway as the import reads it, its listeners outside the namespace's allowed
/// domains left out (they are not the namespace's to publish).
fn gateway_document(gateway: &DynamicObject, in_zone: &dyn Fn(&str) -> bool) -> Value {
    let mut doc = document(gateway);
    if let Some(listeners) = doc["spec"]["listeners"].as_array_mut() {
        listeners.retain(|l| l["hostname"].as_str().is_none_or(in_zone));
    }
    doc["status"] = gateway.data["status"].clone();
    doc
}

/// The object standing for record `name` made from a listener (`GATEWAY-LISTENER`) of a
/// Gateway of `ns`, and the Gateway's name: the Gateway's identity (so the record's
/// stand-ins are judged again when the Gateway changes) under the record's name.
pub(super) fn listener_record(
    name: &str,
    ns: &str,
    gateways: &[Arc<DynamicObject>],
) -> Option<(Arc<DynamicObject>, String)> {
    let gateway = gateways.iter().find(|g| {
        g.metadata.namespace.as_deref() == Some(ns)
            && g.metadata
                .name
                .as_deref()
                .is_some_and(|gw| name.strip_prefix(gw).is_some_and(|l| l.starts_with('-')))
    })?;
    let mut object = DynamicObject::new(name, &KuadrantStores::record_type()).within(ns);
    object.metadata.uid = gateway.metadata.uid.as_ref().map(|u| format!("{u}/{name}"));
    object.metadata.generation = gateway.metadata.generation;
    object.metadata.creation_timestamp = gateway.metadata.creation_timestamp.clone();
    Some((Arc::new(object), gateway.metadata.name.clone()?))
}

/// The document as the import reads it: kind, metadata name and spec.
fn document(o: &DynamicObject) -> Value {
    let mut doc = o.data.clone();
    if let Some(types) = &o.types {
        doc["apiVersion"] = json!(types.api_version);
        doc["kind"] = json!(types.kind);
    }
    doc["metadata"] = json!({ "name": o.metadata.name, "namespace": o.metadata.namespace });
    doc
}

/// The tenant's endpoints as `DNSFailover` sources, one per address with its labels,
/// weight, priority and check: an IP address under `addresses`, a load balancer's host name
/// (a CNAME's target, a host-name probe's address) under `hosts`.
fn sources_of(tenant: &Value, config: &Value) -> Vec<Value> {
    let endpoints: Vec<&Value> = match &tenant["endpoints"] {
        Value::Array(names) => names
            .iter()
            .filter_map(|n| {
                config["endpoints"]
                    .as_array()?
                    .iter()
                    .find(|e| e["name"] == *n)
            })
            .collect(),
        _ => config["endpoints"]
            .as_array()
            .map(|a| a.iter().collect())
            .unwrap_or_default(),
    };
    endpoints
        .iter()
        .map(|e| {
            let by_name = e["address"]
                .as_str()
                .is_some_and(|a| a.parse::<std::net::IpAddr>().is_err());
            let key = if by_name { "hosts" } else { "addresses" };
            let mut source = json!({ key: [e["address"]] });
            for key in ["labels", "weight", "priority", "check"] {
                if !e[key].is_null() {
                    source[key] = e[key].clone();
                }
            }
            source
        })
        .collect()
}

/// Tenant `name` of the translated config as a `DNSFailover`, with the record's identity
/// and generation; its uid carries a digest of the spec, so a changed probe or policy
/// (which does not move the record's own generation) is validated again.
fn stand_in(
    record: &DynamicObject,
    name: &str,
    config: &Value,
    sinks: &[String],
) -> Result<DNSFailover, String> {
    let tenant = config["tenants"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["name"] == name))
        .ok_or_else(|| format!("the translation has no tenant {name}"))?;
    let sources = sources_of(tenant, config);
    let mut spec = json!({ "domains": tenant["domains"], "sinks": sinks, "endpoints": sources });
    for (key, field) in [
        ("ttl", "ttl"),
        ("policy", "policy"),
        ("answer", "answer"),
        ("weights", "weights"),
        ("default_weight", "defaultWeight"),
        ("default_geo", "defaultGeo"),
        ("on_all_unhealthy", "onAllUnhealthy"),
        ("min_healthy", "minHealthy"),
    ] {
        if !tenant[key].is_null() {
            spec[field] = tenant[key].clone();
        }
    }
    if let Some(check) = config["defaults"]["check"]
        .as_object()
        .filter(|c| !c.is_empty())
    {
        spec["check"] = Value::Object(check.clone());
    }
    let spec: DNSFailoverSpec = serde_json::from_value(spec.clone())
        .map_err(|e| format!("the translation of DNSRecord {name} is not a DNSFailover: {e}"))?;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_vec(&spec)
        .unwrap_or_default()
        .hash(&mut hasher);
    let mut stand_in = DNSFailover::new(&stand_in_name(name), spec);
    stand_in.metadata = ObjectMeta {
        name: Some(stand_in_name(name)),
        namespace: record.metadata.namespace.clone(),
        uid: Some(format!(
            "{}#{:016x}",
            record.metadata.uid.as_deref().unwrap_or_default(),
            hasher.finish()
        )),
        creation_timestamp: record.metadata.creation_timestamp.clone(),
        generation: record.metadata.generation,
        ..ObjectMeta::default()
    };
    Ok(stand_in)
}
