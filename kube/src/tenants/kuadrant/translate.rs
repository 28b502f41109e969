//! The translation's side: one namespace's documents (with the Gateways its policies
//! target) through the import's translation ([`ho_import::kuadrant::translate`]), and each
//! record's tenants as `DNSFailover` stand-ins for admission.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use ho_import::kuadrant::{Document, Kind, PolicyOutcome, TranslateError, Translation};
use kube::api::{DynamicObject, ObjectMeta};
use serde_json::{json, Value};

use super::super::resource::{DNSFailover, EndpointSource};
use super::super::watch::KuadrantStores;
use super::refusal::Refusal;

/// What translates one namespace's documents: the import's translation, or a test's
/// (the pure round's tests fail a whole namespace on demand, which the real translation
/// does only for documents no API server would hold).
pub type Translator = fn(&[Document]) -> Result<Translation, TranslateError>;

/// One DNSRecord, written or made from a Gateway's listener, and the `DNSFailover`s
/// standing for it (one per distinct answer among its names), or why it has none.
#[derive(Clone)]
pub struct Record {
    /// The record as watched; for one made from a listener, an object with the Gateway's
    /// identity and the record's name.
    pub object: Arc<DynamicObject>,
    /// Its stand-ins, or why it has none.
    pub stand_ins: Result<Vec<DNSFailover>, Refusal>,
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
pub type Policies = BTreeMap<(String, String), Result<PolicyOutcome, Arc<TranslateError>>>;

/// What each DNSHealthCheckProbe is probed as, per (namespace, name): its own endpoint
/// source, or why it cannot be probed.
pub type Probes = BTreeMap<(String, String), Result<EndpointSource, String>>;

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
    translate: Translator,
    allowed: &Allowance<'_>,
) -> (Records, Policies, Probes) {
    let mut by_record = Records::new();
    let mut policies = Policies::new();
    let mut probes = Probes::new();
    for (ns, docs) in documents(records, others, gateways, allowed) {
        let translation = translate(&docs).map_err(Arc::new);
        for doc in docs.iter().filter(|d| d.kind() == Some(Kind::Probe)) {
            let name = doc.name().unwrap_or_default();
            let probed =
                match &translation {
                    Ok(t) => t.probes.get(name).cloned().unwrap_or_else(|| {
                        Err("the translation made no endpoint of it".to_owned())
                    }),
                    Err(e) => Err(format!("its namespace's documents do not translate: {e}")),
                };
            probes.insert((ns.clone(), name.to_owned()), probed);
        }
        for doc in docs.iter().filter(|d| d.kind() == Some(Kind::Policy)) {
            let name = doc.name().unwrap_or_default();
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
    (by_record, policies, probes)
}

/// Each namespace's documents, read once into their types (each that does not read
/// refused as its kind's bad objects are), with the Gateways its policies target.
fn documents(
    records: &[Arc<DynamicObject>],
    others: &[Arc<DynamicObject>],
    gateways: &[Arc<DynamicObject>],
    allowed: &Allowance<'_>,
) -> BTreeMap<String, Vec<Document>> {
    let mut namespaces: BTreeMap<String, Vec<Document>> = BTreeMap::new();
    for o in records.iter().chain(others) {
        let ns = o.metadata.namespace.clone().unwrap_or_default();
        let doc = Document::from_json(&document(o));
        namespaces.entry(ns).or_default().push(doc);
    }
    for (ns, docs) in namespaces.iter_mut() {
        let targeted = |g: &&Arc<DynamicObject>| {
            g.metadata.namespace.as_deref() == Some(ns.as_str())
                && docs.iter().any(|d| {
                    d.policy_target()
                        .is_some_and(|t| Some(t) == g.metadata.name.as_deref())
                })
        };
        let in_zone = |host: &str| (allowed.domain)(ns, host);
        let mine: Vec<Document> = gateways
            .iter()
            .filter(targeted)
            .map(|g| Document::from_json(&gateway_document(g, &in_zone)))
            .collect();
        docs.extend(mine);
    }
    namespaces
}

/// One namespace's translation, and the sinks its records publish through.
struct Namespace<'a> {
    ns: &'a str,
    translation: &'a Result<Translation, Arc<TranslateError>>,
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
            .map_err(|e| Refusal::Untranslated(e.clone()))
            .and_then(|t| {
                if let Some(why) = t.unpublished.get(&name) {
                    return Err(match t.refused_by_probe.get(&name) {
                        Some(probe) => Refusal::ByProbe {
                            probe: probe.clone(),
                            why: why.clone(),
                        },
                        None => Refusal::Unpublished(why.clone()),
                    });
                }
                let tenants = t.by_record.get(&name).map_or(&[][..], Vec::as_slice);
                if tenants.is_empty() {
                    return Err(Refusal::NoEndpoint { record: name });
                }
                tenants
                    .iter()
                    .map(|tenant| stand_in(&object, tenant, t, self.sinks))
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

/// The document as the import reads it: kind, metadata name and namespace, and spec.
fn document(o: &DynamicObject) -> Value {
    let mut doc = o.data.clone();
    if let Some(types) = &o.types {
        doc["apiVersion"] = json!(types.api_version);
        doc["kind"] = json!(types.kind);
    }
    doc["metadata"] = json!({ "name": o.metadata.name, "namespace": o.metadata.namespace });
    doc
}

/// Tenant `name` of the translation as a `DNSFailover` publishing through `sinks`, with
/// the record's identity and generation; its uid carries a digest of the spec, so a
/// changed probe or policy (which does not move the record's own generation) is
/// validated again.
fn stand_in(
    record: &DynamicObject,
    name: &str,
    translation: &Translation,
    sinks: &[String],
) -> Result<DNSFailover, Refusal> {
    let mut spec = match translation.tenants.get(name) {
        Some(Ok(spec)) => spec.clone(),
        Some(Err(e)) => return Err(Refusal::NotAFailover(e.clone())),
        None => {
            return Err(Refusal::NoTenant {
                tenant: name.to_owned(),
            })
        }
    };
    spec.sinks = sinks.to_vec();
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
