//! Kuadrant's resources, live (`[kubernetes] kuadrant = true`): each namespace's
//! `DNSRecord`s, with its `DNSHealthCheckProbe`s, `DNSPolicy`s and the Gateways they
//! target, are translated as `import --from kuadrant` translates them ([`translate`]) and
//! enter admission as `DNSFailover`s would (named `dnsrecord.NAME`), under the namespace's
//! allowance; what became of each is written to the record's conditions, and the policies
//! and probes get the status Kuadrant's controllers write ([`status`]). The translation is
//! the import's ([`ho_import::kuadrant::translate`]); what it and this module refuse is a
//! [`Refusal`]. The pure side of a round is [`Core`]: it keeps each record's origin, so a record made from a listener is
//! carried through a refusal of what it depends on (`carry`) and withdrawn only by a
//! deletion or an accepted edit that drops it. A probe whose address no published record
//! holds is probed as an endpoint of its own that no tenant selects (`own_probes`).

mod carry;
mod gateways;
mod headers;
mod health;
mod own_probes;
mod probes;
mod refusal;
mod resolve;
mod round;
#[cfg(test)]
mod round_tests;
mod status;
mod translate;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use ho_config::Config;
use ho_engine::leadership::Leadership;
use ho_engine::status::EndpointStatus;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::Client;
use kube::ResourceExt;
use serde_json::{json, Value};
use tracing::{debug, info};

pub use gateways::AFFECTED;
pub use refusal::{Kept, Refusal};
pub use round::{Core, View};
pub use translate::{
    stand_in_name, translate_all, Allowance, Listener, Policies, Record, Records, Translator,
};

use super::admit::{tenant_name, Key, Verdict};
use super::discover::Lookup;
use super::resource::{Condition, DNSFailover, DNSFailoverSpec, DNSFailoverStatus, FINALIZER};
use super::status::{status_of, EngineView, Observed};
use super::status_writer::{self, Statuses};
use super::watch::{listed, KuadrantStores};
use round::{being_deleted, holds_finalizer};
use status::{policy_status, PolicyFacts};

/// What the binary hands the controller to follow Kuadrant's resources: the DNS client
/// that checks the load balancers' host names.
pub struct Kuadrant {
    /// Asks the operator's `[resolver]`.
    pub dns: Arc<dyn ho_engine::dns_client::DnsClient>,
}

/// Kuadrant's resources in the controller: the stores, the translation, this round's
/// stand-ins and policy outcomes, and the writers of the records', policies' and probes'
/// status.
pub struct Live {
    core: Core,
    hosts: resolve::HostCheck,
    headers: headers::HeaderSecrets,
    stores: KuadrantStores,
    /// The records whose `Ready` is `True`, as the last report computed.
    ready: BTreeSet<(String, String)>,
    /// The records made from listeners that are refused (kept or not), with why, as the
    /// last report computed: their policy's status names them.
    refused: BTreeMap<(String, String), String>,
    statuses: Statuses,
    policy_statuses: Statuses,
    probe_statuses: Statuses,
    /// The probes no published record backs, each probed on its own or refused.
    own: own_probes::Own,
    /// Writes the records' finalizers, Gateways' conditions, default policies.
    client: Client,
    /// Gateways this process made a default policy for.
    made: HashSet<(String, String)>,
}

impl Live {
    /// Kuadrant's side, writing record statuses through `client` while `leadership` allows.
    /// Probe header Secrets' values are kept under `state_dir`.
    pub fn new(
        parts: Kuadrant,
        stores: KuadrantStores,
        client: Client,
        leadership: Leadership,
        state_dir: Option<&std::path::Path>,
    ) -> Live {
        let writer = |t| status_writer::spawn(client.clone(), leadership.clone(), t);
        Live {
            statuses: writer(KuadrantStores::record_type()),
            policy_statuses: writer(KuadrantStores::policy_type()),
            probe_statuses: writer(KuadrantStores::probe_type()),
            core: Core::new(),
            own: own_probes::Own::new(),
            hosts: resolve::HostCheck::new(parts.dns),
            headers: headers::HeaderSecrets::new(state_dir),
            stores,
            ready: BTreeSet::new(),
            refused: BTreeMap::new(),
            client,
            made: HashSet::new(),
        }
    }

    /// Translates the records as they are now, with the `gateways` policies target (`None`:
    /// not listed yet), each namespace publishing through the sinks its allowance names;
    /// `kept`: the keys admission keeps a last accepted generation of. Until each of
    /// Kuadrant's kinds and the Gateways are listed, what the last complete view became
    /// stands.
    pub fn refresh(
        &mut self,
        base: &Config,
        gateways: Option<&[Arc<DynamicObject>]>,
        kept: &[Key],
    ) {
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
        let complete = std::iter::once(&self.stores.records)
            .chain(&self.stores.others)
            .all(listed);
        let records = self.stores.records.state();
        let others: Vec<Arc<DynamicObject>> = self
            .stores
            .other_documents()
            .into_iter()
            .map(|o| self.headers.annotate(o))
            .collect();
        let view = gateways.filter(|_| complete).map(|gateways| View {
            records: &records,
            others: &others,
            gateways,
        });
        self.core.refresh(view.as_ref(), &allowed, kept);
    }

    /// Reads the header Secrets the probes' and policies' health checks name, as `base`'s
    /// allowances permit, when due (each round; again after a while, for rotated values).
    pub async fn read_secrets(&mut self, base: &Config) {
        let mut resources = self.stores.probes();
        resources.extend(self.stores.policies());
        self.headers
            .refresh(&self.client, &resources, &base.kubernetes.allow)
            .await;
    }

    /// Whether the header Secrets are due to be read again.
    pub fn secrets_due(&self) -> bool {
        self.headers.due()
    }

    /// Looks up the load balancers' host names the records carry that the engine does not
    /// follow yet, and refuses each record naming one that does not resolve (alone: the
    /// engine runs no plan with a name it cannot resolve).
    pub async fn resolve(&mut self, resolver: &ho_config::ResolverConfig) {
        self.hosts.look_up(self.core.host_names(), resolver).await;
        let hosts = &self.hosts;
        self.core.refuse_unresolved(&|h| hosts.unresolved(h));
    }

    /// Whether a host name that did not resolve is due to be asked again.
    pub fn resolve_due(&self, resolver: &ho_config::ResolverConfig) -> bool {
        self.hosts.retry_due(resolver)
    }

    /// The pure side: the records, policies, stand-ins and refusals.
    pub fn core(&self) -> &Core {
        &self.core
    }

    /// The written records as the watch has them now. The round's copy of a record keeps
    /// the status and resourceVersion it had then (a status change is no new round): a
    /// status judged against it would be written again at every report, and a finalizer
    /// patched on its version would conflict until the next round.
    fn latest_records(&self) -> HashMap<(String, String), Arc<DynamicObject>> {
        let state = self.stores.records.state().into_iter();
        state
            .map(|r| {
                let ns = r.metadata.namespace.clone().unwrap_or_default();
                ((ns, r.name_any()), r)
            })
            .collect()
    }

    /// Adds the finalizer to records that publish, and takes it from records being deleted
    /// once every sink holds their withdrawal (the writer only).
    pub async fn finalize(&self, verdicts: &BTreeMap<Key, Verdict>, view: &EngineView<'_>) {
        let latest = self.latest_records();
        for ((ns, name), record) in self.core.records() {
            if record.listener.is_some() {
                continue;
            }
            let stand_in_keys: Vec<Key> = match &record.stand_ins {
                Ok(all) => all.iter().map(|s| (ns.clone(), s.name_any())).collect(),
                Err(_) => Vec::new(),
            };
            let object = latest
                .get(&(ns.clone(), name.clone()))
                .unwrap_or(&record.object);
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

    /// Writes `PolicyAffected` on the Gateways accepted policies target (and takes it off
    /// the others), and with `[kubernetes] kuadrant_default_policy` makes the default
    /// policy of each Gateway of an allowed namespace no policy targets (the writer only).
    pub async fn write_gateways(
        &mut self,
        gateways: &[Arc<DynamicObject>],
        base: &Config,
        now: f64,
    ) {
        let policies = self.stores.policies();
        let applied = gateways::applied(self.core.policies(), &policies);
        for g in gateways {
            let key = (
                g.metadata.namespace.clone().unwrap_or_default(),
                g.name_any(),
            );
            let names = applied.get(&key).map_or(&[][..], Vec::as_slice);
            if let Some(conditions) = gateways::affected_conditions(g, names, now) {
                gateways::write_conditions(&self.client, g, conditions).await;
            }
        }
        if !base.kubernetes.kuadrant_default_policy {
            return;
        }
        let allowed = |ns: &str| base.kubernetes.allow.iter().any(|a| a.namespace == ns);
        for g in gateways::missing_defaults(gateways, &policies, &allowed, &self.made) {
            gateways::create_default(&self.client, g).await;
            self.made.insert((
                g.metadata.namespace.clone().unwrap_or_default(),
                g.name_any(),
            ));
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

    /// Writes each record's `Accepted` and `Ready` conditions, and its per-endpoint health
    /// from `seen` (the endpoints [`Self::wanted_endpoints`] named), where they changed.
    pub fn report(
        &mut self,
        verdicts: &BTreeMap<Key, Verdict>,
        view: &EngineView<'_>,
        seen: &HashMap<String, Vec<EndpointStatus>>,
        now: f64,
    ) {
        let leaves = health::leaves_of(self.core.records());
        let latest = self.latest_records();
        let mut changed = BTreeMap::new();
        let mut ready = BTreeSet::new();
        let mut refused = BTreeMap::new();
        for ((ns, name), entry) in self.core.records() {
            let record = latest
                .get(&(ns.clone(), name.clone()))
                .unwrap_or(&entry.object);
            let stand_ins = &entry.stand_ins;
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
            let mut want = status_of(&subject, verdicts.get(&key), None, view, now);
            let before = &record.data["status"]["healthCheck"];
            let health = leaves.get(&(ns.clone(), name.clone())).map(|l| {
                let root = record.data["spec"]["rootHost"].as_str().unwrap_or_default();
                let at = Observed {
                    generation: record.metadata.generation,
                    now,
                };
                health::record_health(l, seen, root, &current, before, at)
            });
            // A record being deleted keeps the health it had: its endpoints leave with it,
            // and a status write then would only delay the finalizer's release.
            want.conditions.retain(|c| c.type_ != "Healthy");
            let health_check = match health {
                _ if being_deleted(record) => {
                    let kept = current.iter().find(|c| c.type_ == "Healthy");
                    want.conditions.extend(kept.cloned());
                    before.clone()
                }
                Some((healthy, probes)) => {
                    want.conditions.push(healthy);
                    probes
                }
                None => Value::Null,
            };
            if want
                .conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
            {
                ready.insert((ns.clone(), name.clone()));
            }
            if entry.listener.is_some() {
                if let Some(why) = refusal(verdicts.get(&key)) {
                    refused.insert((ns.clone(), name.clone()), why);
                }
            } else if want.conditions != current || *before != health_check {
                let status = json!({
                    "observedGeneration": record.metadata.generation,
                    "conditions": want.conditions,
                    "healthCheck": health_check,
                });
                changed.insert((ns.clone(), name.clone()), status);
            }
        }
        self.statuses.send(changed);
        self.ready = ready;
        self.refused = refused;
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
            let refused = self.refused_of(&ns, &name);
            let facts = PolicyFacts {
                outcome: self.core.policies().get(&(ns.clone(), name.clone())),
                refused: &refused,
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

    /// The records made from listeners that policy `name` of `ns` governs and that are
    /// refused, with why (they have no object of their own to say it).
    fn refused_of(&self, ns: &str, name: &str) -> Vec<(String, String)> {
        self.refused
            .iter()
            .filter(|((n, _), _)| n == ns)
            .filter(|((n, record), _)| {
                let listener = self
                    .core
                    .records()
                    .get(&(n.clone(), record.clone()))
                    .and_then(|r| r.listener.as_ref());
                listener.is_some_and(|l| l.policy.as_deref() == Some(name))
            })
            .map(|((_, record), why)| (record.clone(), why.clone()))
            .collect()
    }

    /// Every endpoint whose verdict a status reports: the probes' and the records'.
    pub fn wanted_endpoints(&self) -> HashSet<String> {
        let leaves = health::leaves_of(self.core.records());
        let records = leaves.into_values().flatten().map(|(e, _)| e);
        self.probe_endpoints()
            .into_values()
            .chain(records)
            .collect()
    }
}

/// Why a verdict refuses its resource, when it does (kept or not).
fn refusal(verdict: Option<&Verdict>) -> Option<String> {
    match verdict? {
        Verdict::Refused { reason, message } => Some(format!("{reason}: {message}")),
        Verdict::KeptLast {
            reason, message, ..
        } => Some(format!(
            "{reason}: {message} (its last accepted answer is kept)"
        )),
        _ => None,
    }
}

/// Whether `object`'s status differs from `want` in `fields`.
fn differs(object: &DynamicObject, want: &Value, fields: &[&str]) -> bool {
    fields.iter().any(|f| object.data["status"][*f] != want[*f])
}

fn empty_spec() -> DNSFailoverSpec {
    serde_json::from_value(json!({ "domains": [], "sinks": [], "endpoints": [] }))
        .expect("an empty spec parses")
}
