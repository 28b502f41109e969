//! Kuadrant's resources, live (`[kubernetes] kuadrant = true`): each namespace's
//! `DNSRecord`s, with its `DNSHealthCheckProbe`s and `DNSPolicy`, are translated as
//! `import --from kuadrant` translates them and enter admission as `DNSFailover`s would
//! (named `dnsrecord.NAME`), under the namespace's allowance; what became of each is
//! written to the record's `Ready` condition. The translation is the binary's (it owns the
//! import), handed in as a [`Translate`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::Arc;

use ho_config::Config;
use ho_engine::leadership::Leadership;
use ho_engine::status::EndpointStatus;
use kube::api::{Api, DynamicObject, ObjectMeta, Patch, PatchParams};
use kube::Client;
use kube::ResourceExt;
use serde_json::{json, Value};
use tracing::{debug, info};

use super::admit::{endpoint_name, tenant_name, Key, Verdict};
use super::discover::Lookup;
use super::kuadrant_status::{policy_status, probe_status, PolicyFacts};
use super::resource::{Condition, DNSFailover, DNSFailoverSpec, DNSFailoverStatus, FINALIZER};
use super::status::{status_of, EngineView};
use super::status_writer::{self, Statuses};
use super::watch::KuadrantStores;

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
pub struct Record {
    /// The record as watched; for one made from a listener, an object with the Gateway's
    /// identity and the record's name.
    pub object: Arc<DynamicObject>,
    /// Its stand-ins, or why it has none.
    pub stand_ins: Result<Vec<DNSFailover>, String>,
    /// Made from a targeted Gateway's listener: there is no object to write a status to.
    pub from_listener: bool,
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
fn stands_for(stand_in: &str, record: &str) -> bool {
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
    let mut by_record = BTreeMap::new();
    let mut policies = Policies::new();
    for (ns, docs) in namespaces {
        let in_ns: Vec<&Arc<DynamicObject>> = records
            .iter()
            .filter(|r| r.metadata.namespace.as_deref() == Some(ns.as_str()))
            .collect();
        let translation = translate.translate(&docs);
        for doc in docs.iter().filter(|d| d["kind"] == "DNSPolicy") {
            let name = doc["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let outcome = match &translation {
                Ok(t) => Ok(t.policies.get(&name).cloned().unwrap_or_default()),
                Err(e) => Err(e.clone()),
            };
            policies.insert((ns.clone(), name), outcome);
        }
        let written: Vec<String> = in_ns
            .iter()
            .map(|r| r.metadata.name.clone().unwrap_or_default())
            .collect();
        let from_listeners: Vec<Arc<DynamicObject>> = translation
            .iter()
            .flat_map(|t| t.by_record.keys())
            .filter(|name| !written.contains(name))
            .filter_map(|name| listener_record(name, &ns, gateways))
            .collect();
        for record in in_ns.into_iter().chain(&from_listeners) {
            let name = record.metadata.name.clone().unwrap_or_default();
            let stand_ins = translation.as_ref().map_err(Clone::clone).and_then(|t| {
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
                    .map(|tenant| stand_in(record, tenant, &t.config, &(allowed.sinks)(&ns)))
                    .collect()
            });
            let from_listener = !written.contains(&name);
            let entry = Record {
                object: record.clone(),
                stand_ins,
                from_listener,
            };
            by_record.insert((ns.clone(), name), entry);
        }
    }
    (by_record, policies)
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
/// Gateway of `ns`: the Gateway's identity (so the record's stand-ins are judged again
/// when the Gateway changes) under the record's name.
fn listener_record(
    name: &str,
    ns: &str,
    gateways: &[Arc<DynamicObject>],
) -> Option<Arc<DynamicObject>> {
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
    Some(Arc::new(object))
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
/// weight, priority and check.
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
            let mut source = json!({ "addresses": [e["address"]] });
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
    for key in [
        "ttl",
        "policy",
        "weights",
        "default_weight",
        "default_geo",
        "on_all_unhealthy",
        "min_healthy",
    ] {
        if !tenant[key].is_null() {
            spec[key] = tenant[key].clone();
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

/// Kuadrant's resources in the controller: the stores, the translation, this round's
/// stand-ins and policy outcomes, and the writers of the records', policies' and probes'
/// status.
pub struct Live {
    translate: Box<dyn Translate>,
    stores: KuadrantStores,
    records: Records,
    policies: Policies,
    /// The records whose `Ready` is `True`, as the last report computed.
    ready: BTreeSet<(String, String)>,
    statuses: Statuses,
    policy_statuses: Statuses,
    probe_statuses: Statuses,
    /// Writes the records' finalizers.
    client: Client,
}

impl Live {
    /// Kuadrant's side, writing record statuses through `client` while `leadership` allows.
    pub fn new(
        translate: Box<dyn Translate>,
        stores: KuadrantStores,
        client: Client,
        leadership: Leadership,
    ) -> Live {
        let writer = |t| status_writer::spawn(client.clone(), leadership.clone(), t);
        Live {
            statuses: writer(KuadrantStores::record_type()),
            policy_statuses: writer(KuadrantStores::policy_type()),
            probe_statuses: writer(KuadrantStores::probe_type()),
            translate,
            stores,
            records: Records::new(),
            policies: Policies::new(),
            ready: BTreeSet::new(),
            client,
        }
    }

    /// Translates the records as they are now, with the `gateways` policies target, each
    /// namespace publishing through the sinks its allowance names.
    pub fn refresh(&mut self, base: &Config, gateways: &[Arc<DynamicObject>]) {
        let allowance = |ns: &str| base.kubernetes.allow.iter().find(|a| a.namespace == ns);
        let sinks = |ns: &str| allowance(ns).map(|a| a.sinks.clone()).unwrap_or_default();
        let domain = |ns: &str, host: &str| {
            let host = host.trim_end_matches('.').to_ascii_lowercase();
            allowance(ns).is_some_and(|a| {
                a.domains.iter().any(|d| {
                    let d = d.trim_end_matches('.').to_ascii_lowercase();
                    host == d || host.ends_with(&format!(".{d}"))
                })
            })
        };
        let allowed = Allowance {
            sinks: &sinks,
            domain: &domain,
        };
        (self.records, self.policies) = translate_all(
            &self.stores.records.state(),
            &self.stores.other_documents(),
            gateways,
            self.translate.as_ref(),
            &allowed,
        );
    }

    /// The keys a record is revived under (see [`Self::stand_ins`]): its own stand-in's.
    pub fn record_keys(&self) -> impl Iterator<Item = Key> + '_ {
        self.records
            .keys()
            .map(|(ns, name)| (ns.clone(), stand_in_name(name)))
    }

    /// Whether a watched record is being deleted.
    pub fn deleting(&self) -> bool {
        self.records.values().any(|r| being_deleted(&r.object))
    }

    /// The stand-ins that translated, for admission: those of live records, and of a
    /// record being deleted only when `revive(record, its stand-ins)` says so (one this
    /// process never published, published once so its withdrawal can be seen). A record
    /// being deleted otherwise stands for nothing: its tenants go and their records are
    /// withdrawn, and its finalizer holds it until they are.
    pub fn stand_ins(&self, revive: &mut dyn FnMut(&Key, &[Key]) -> bool) -> Vec<&DNSFailover> {
        let mut out = Vec::new();
        for ((ns, name), record) in &self.records {
            let Ok(stand_ins) = &record.stand_ins else {
                continue;
            };
            let keys: Vec<Key> = stand_ins
                .iter()
                .map(|s| (ns.clone(), s.name_any()))
                .collect();
            let deleting = being_deleted(&record.object);
            let own = (ns.clone(), stand_in_name(name));
            if !deleting || (holds_finalizer(&record.object) && revive(&own, &keys)) {
                out.extend(stand_ins);
            }
        }
        out
    }

    /// Adds the finalizer to records that publish, and takes it from records being deleted
    /// once every sink holds their withdrawal (the writer only).
    pub async fn finalize(&self, verdicts: &BTreeMap<Key, Verdict>, view: &EngineView<'_>) {
        for ((ns, _), record) in &self.records {
            if record.from_listener {
                continue;
            }
            let stand_in_keys: Vec<Key> = match &record.stand_ins {
                Ok(all) => all.iter().map(|s| (ns.clone(), s.name_any())).collect(),
                Err(_) => Vec::new(),
            };
            let object = &record.object;
            let publishes = stand_in_keys.iter().any(|k| {
                matches!(
                    verdicts.get(k),
                    Some(Verdict::Accepted { .. } | Verdict::KeptLast { .. })
                )
            });
            if !being_deleted(object) && publishes && !holds_finalizer(object) {
                self.set_finalizer(object, true).await;
            } else if being_deleted(object)
                && holds_finalizer(object)
                && stand_in_keys
                    .iter()
                    .all(|k| view.withdrawn(&tenant_name(k)))
            {
                self.set_finalizer(object, false).await;
            }
        }
    }

    /// Adds or removes our finalizer on the version read (a conflict is tried again at the
    /// next round, from the newer version the watch brings).
    async fn set_finalizer(&self, record: &DynamicObject, on: bool) {
        let mut finalizers: Vec<String> = record
            .metadata
            .finalizers
            .iter()
            .flatten()
            .filter(|f| *f != FINALIZER)
            .cloned()
            .collect();
        if on {
            finalizers.push(FINALIZER.to_owned());
        }
        let patch = json!({ "metadata": {
            "resourceVersion": record.metadata.resource_version,
            "finalizers": finalizers,
        }});
        let ns = record.metadata.namespace.clone().unwrap_or_default();
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &ns, &KuadrantStores::record_type());
        let name = record.name_any();
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) if on => debug!(namespace = %ns, record = %name, "finalizer added"),
            Ok(_) => {
                info!(namespace = %ns, record = %name, "records withdrawn; finalizer released")
            }
            Err(e) => debug!(record = %name, "finalizer not changed yet: {e}"),
        }
    }

    /// The records that did not translate, refused as invalid: each of the stand-ins it had
    /// when last accepted (`kept`: the keys admission keeps a last generation of), so every
    /// name of the record keeps its last answer.
    pub fn refusals(&self, kept: &[Key]) -> Vec<(Key, Verdict)> {
        let mut refused = Vec::new();
        for ((ns, name), record) in &self.records {
            let Err(message) = &record.stand_ins else {
                continue;
            };
            let own = (ns.clone(), stand_in_name(name));
            let others = kept
                .iter()
                .filter(|k| k.0 == *ns && **k != own && stands_for(&k.1, name));
            for k in std::iter::once(&own).chain(others) {
                let verdict = Verdict::Refused {
                    reason: "Invalid",
                    message: message.clone(),
                };
                refused.push((k.clone(), verdict));
            }
        }
        refused
    }

    /// Writes each record's `Accepted` and `Ready` conditions where they changed.
    pub fn report(&mut self, verdicts: &BTreeMap<Key, Verdict>, view: &EngineView<'_>, now: f64) {
        let mut changed = BTreeMap::new();
        let mut ready = BTreeSet::new();
        for ((ns, name), entry) in &self.records {
            let (record, stand_ins) = (&entry.object, &entry.stand_ins);
            let own = (ns.clone(), stand_in_name(name));
            // The record is as well as its worst stand-in: a refused one names the refusal.
            let (key, stand_in) = match stand_ins {
                Ok(all) => all
                    .iter()
                    .map(|s| ((ns.clone(), s.name_any()), Some(s)))
                    .find(|(k, _)| !matches!(verdicts.get(k), Some(Verdict::Accepted { .. })))
                    .unwrap_or((own, all.first())),
                Err(_) => (own, None),
            };
            let current: Vec<Condition> = record
                .data
                .pointer("/status/conditions")
                .and_then(|c| serde_json::from_value(c.clone()).ok())
                .unwrap_or_default();
            let mut subject = match stand_in {
                Some(s) => s.clone(),
                None => DNSFailover::new(&key.1, empty_spec()),
            };
            subject.metadata.generation = record.metadata.generation;
            subject.status = Some(DNSFailoverStatus {
                conditions: current.clone(),
                ..DNSFailoverStatus::default()
            });
            let want = status_of(&subject, verdicts.get(&key), None, view, now);
            if want
                .conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
            {
                ready.insert((ns.clone(), name.clone()));
            }
            if want.conditions != current && !entry.from_listener {
                let status = json!({
                    "observedGeneration": record.metadata.generation,
                    "conditions": want.conditions,
                });
                changed.insert((ns.clone(), name.clone()), status);
            }
        }
        self.statuses.send(changed);
        self.ready = ready;
    }

    /// Writes each DNSPolicy's `Accepted` and `Enforced` conditions where they changed
    /// (after [`Self::report`], which learns which records are ready).
    pub fn report_policies(&self, world: &dyn Lookup, now: f64) {
        let mut changed = BTreeMap::new();
        for policy in self.stores.policies() {
            let ns = policy.metadata.namespace.clone().unwrap_or_default();
            let name = policy.metadata.name.clone().unwrap_or_default();
            let target = policy.data["spec"]["targetRef"]["name"].as_str();
            let ready = |record: &str| self.ready.contains(&(ns.clone(), record.to_owned()));
            let facts = PolicyFacts {
                outcome: self.policies.get(&(ns.clone(), name.clone())),
                target_exists: target.map(|g| world.gateway(&ns, g).is_some()),
                ready: &ready,
            };
            let want = policy_status(&policy, &facts, now);
            if differs(&policy, &want, &["conditions", "totalRecords"]) {
                changed.insert((ns, name), want);
            }
        }
        self.policy_statuses.send(changed);
    }

    /// The endpoints (as admission names them) probing each DNSHealthCheckProbe's
    /// address: the first published record of its namespace that has the address.
    pub fn probe_endpoints(&self) -> BTreeMap<(String, String), String> {
        let mut found = BTreeMap::new();
        for probe in self.stores.probes() {
            let ns = probe.metadata.namespace.clone().unwrap_or_default();
            let name = probe.metadata.name.clone().unwrap_or_default();
            let Some(address) = probe.data["spec"]["address"]
                .as_str()
                .and_then(|a| a.parse::<IpAddr>().ok())
            else {
                continue;
            };
            let stand_in = self
                .records
                .iter()
                .filter(|((n, _), _)| *n == ns)
                .filter_map(|(_, r)| r.stand_ins.as_ref().ok())
                .flatten()
                .find(|s| {
                    s.spec
                        .endpoints
                        .iter()
                        .any(|e| e.addresses.iter().any(|a| a.parse() == Ok(address)))
                });
            if let Some(s) = stand_in {
                let tenant = tenant_name(&(ns.clone(), s.name_any()));
                found.insert((ns, name), endpoint_name(&tenant, address));
            }
        }
        found
    }

    /// Writes each DNSHealthCheckProbe's status where it changed, from the engine's view of
    /// the endpoints [`Self::probe_endpoints`] named. `lastCheck` rides along with a change
    /// and is not one itself: probes run every second or faster, a write each time would
    /// be a write per probe per second.
    pub fn report_probes(
        &self,
        endpoints: &BTreeMap<(String, String), String>,
        seen: &HashMap<String, EndpointStatus>,
    ) {
        let mut changed = BTreeMap::new();
        for probe in self.stores.probes() {
            let key = (
                probe.metadata.namespace.clone().unwrap_or_default(),
                probe.metadata.name.clone().unwrap_or_default(),
            );
            let endpoint = endpoints.get(&key).and_then(|e| seen.get(e));
            let want = probe_status(&probe, endpoint);
            if differs(&probe, &want, &["healthy", "consecutiveFailures", "reason"]) {
                changed.insert(key, want);
            }
        }
        self.probe_statuses.send(changed);
    }
}

fn being_deleted(object: &DynamicObject) -> bool {
    object.metadata.deletion_timestamp.is_some()
}

fn holds_finalizer(object: &DynamicObject) -> bool {
    object
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == FINALIZER)
}

/// Whether `object`'s status differs from `want` in `fields`.
fn differs(object: &DynamicObject, want: &Value, fields: &[&str]) -> bool {
    fields.iter().any(|f| object.data["status"][*f] != want[*f])
}

fn empty_spec() -> DNSFailoverSpec {
    serde_json::from_value(json!({ "domains": [], "sinks": [], "endpoints": [] }))
        .expect("an empty spec parses")
}
