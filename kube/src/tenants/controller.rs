//! The controller: the engine's [`TenantSource`] for `DNSFailover` resources (and Kuadrant's).
//! The engine follows it: each change the watches see becomes one admission round, whose
//! merged config the engine applies through the same diff-applied reload as a config file
//! change; each round and each second, statuses and finalizers follow what the engine did.
//!
//! Only the writer replica (the Lease holder, or the only replica) writes statuses and
//! finalizers; every replica admits, so a standby probes the same tenants and takes over
//! warm.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ho_config::validate::{validate, Kinds};
use ho_config::Config;
use ho_engine::leadership::Leadership;
use ho_engine::status::EndpointStatus;
use ho_engine::{EngineReader, Merge, SourceFuture, TenantSource};
use kube::api::{Api, ApiResource, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use tracing::{debug, info};

use super::admit::{key, tenant_name, Admitter, Key, Verdict};
use super::kuadrant::{Kuadrant, Live};
use super::resource::{DNSFailover, FINALIZER};
use super::status::{status_of, EngineView};
use super::status_writer::{self, Statuses};
use super::watch::Watched;

/// How long a write to the API server may take (the client's reads wait longer, for
/// watches): a silent API server delays a finalizer to the next round, never the loop.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The resources' side of the running config.
pub struct Controller {
    client: Client,
    watched: Watched,
    admitter: Admitter,
    catalog: Kinds<'static>,
    base: Config,
    verdicts: BTreeMap<Key, Verdict>,
    /// A digest of what the resources contributed at the last round handed out.
    applied: Option<u64>,
    /// Deleted resources whose tenant this process never ran: admitted for one round so
    /// that the next removes it and withdraws their records.
    revived: HashSet<Key>,
    statuses: Statuses,
    leadership: Leadership,
    /// Kuadrant's resources, live (`[kubernetes] kuadrant`).
    kuadrant: Option<Live>,
}

impl Controller {
    /// Starts the watches and waits for the first list of resources. `base`: the config
    /// files' config; `catalog`: the sink kinds, so resources validate as `check-config`;
    /// `kuadrant`: the translation of Kuadrant's resources, when they are watched.
    pub async fn start(
        client: Client,
        base: Config,
        catalog: Kinds<'static>,
        leadership: Leadership,
        kuadrant: Option<Kuadrant>,
    ) -> Controller {
        let watched = Watched::start(&client, kuadrant.is_some());
        watched.ready(Duration::from_secs(5)).await;
        let failovers = ApiResource::erase::<DNSFailover>(&());
        let statuses = status_writer::spawn(client.clone(), leadership.clone(), failovers);
        let kuadrant = kuadrant
            .zip(watched.kuadrant.clone())
            .map(|(parts, stores)| {
                let state = base.state_dir.as_deref();
                Live::new(parts, stores, client.clone(), leadership.clone(), state)
            });
        Controller {
            client,
            watched,
            admitter: Admitter::keeping_in(base.state_dir.as_deref()),
            catalog,
            base,
            verdicts: BTreeMap::new(),
            applied: None,
            revived: HashSet::new(),
            statuses,
            leadership,
            kuadrant,
        }
    }

    /// One admission round: the merged plan when what the resources contribute changed
    /// since the last plan handed out (always after a rebase); unchanged when nothing did or
    /// the engine stopped answering.
    async fn round(&mut self, engine: &EngineReader) -> Merge {
        let started = std::time::Instant::now();
        let all = self.watched.resources.state();
        let kept = self.admitter.kept();
        if let Some(kuadrant) = self.kuadrant.as_mut() {
            let gateways = self.watched.listed_gateways();
            kuadrant.read_secrets(&self.base).await;
            kuadrant.refresh(&self.base, gateways.as_deref(), &kept);
            kuadrant.resolve(&self.base.resolver).await;
        }
        let deleting = all.iter().any(|r| r.metadata.deletion_timestamp.is_some())
            || self.kuadrant.as_ref().is_some_and(|k| k.core().deleting());
        // The engine's overview is only needed to tell which deleted resources this process
        // never ran.
        let status = match deleting {
            true => match engine.overview().await {
                Some(status) => Some(status),
                None => return Merge::Unchanged,
            },
            false => None,
        };
        let view = status.as_ref().map(EngineView::new);
        let mut input = Vec::with_capacity(all.len());
        for r in &all {
            let k = key(r);
            if r.metadata.deletion_timestamp.is_none() {
                input.push(r.as_ref());
            } else if has_finalizer(r)
                && view.as_ref().is_some_and(|v| !v.known(&tenant_name(&k)))
                && self.revived.insert(k)
            {
                input.push(r.as_ref());
                self.watched.poke();
            }
        }
        let mut live: HashSet<Key> = all.iter().map(|r| key(r)).collect();
        if let Some(kuadrant) = &self.kuadrant {
            let before = self.revived.len();
            {
                let revived = &mut self.revived;
                let mut revive = |record: &Key, stand_ins: &[Key]| {
                    let unknown = view
                        .as_ref()
                        .is_some_and(|v| stand_ins.iter().all(|k| !v.known(&tenant_name(k))));
                    unknown && revived.insert(record.clone())
                };
                input.extend(kuadrant.core().stand_ins(&mut revive));
            }
            if self.revived.len() != before {
                self.watched.poke();
            }
            live.extend(kuadrant.core().record_keys());
        }
        self.revived.retain(|k| live.contains(k));
        let refused = self.refusals(&kept);
        let mut admission =
            self.admitter
                .admit_with(&self.base, &input, refused, &self.watched, &self.catalog);
        if let Some(kuadrant) = self.kuadrant.as_mut() {
            kuadrant.probe_unbacked(&mut admission.config, &self.catalog);
        }
        self.verdicts = admission.verdicts;
        let digest = digest(&admission.config);
        if self.applied == Some(digest) {
            return Merge::Unchanged;
        }
        let plan = match validate(&admission.config, &self.catalog) {
            Ok(plan) => plan,
            Err(e) => return Merge::Invalid(e),
        };
        self.applied = Some(digest);
        let accepted = self
            .verdicts
            .values()
            .filter(|v| matches!(v, Verdict::Accepted { .. } | Verdict::KeptLast { .. }))
            .count();
        info!(
            resources = self.verdicts.len(),
            accepted,
            took_ms = started.elapsed().as_secs_f64() * 1000.0,
            "DNSFailover resources admitted"
        );
        Merge::Plan(Box::new(plan))
    }

    /// The Kuadrant records that did not translate, refused before admission (`kept`: the
    /// keys a last accepted generation is kept of).
    fn refusals(&self, kept: &[Key]) -> Vec<(Key, Verdict)> {
        let refusals = self.kuadrant.iter().map(|k| k.core().refusals(kept));
        refusals.flatten().collect()
    }

    /// Brings statuses and finalizers up to date with the engine (the writer only).
    async fn report_now(&mut self, engine: &EngineReader) {
        if !self.leadership.may_write() {
            return;
        }
        let Some(status) = engine.overview().await else {
            return;
        };
        let view = EngineView::new(&status);
        let now = ho_engine::clock::since_epoch(SystemTime::now()).as_secs_f64();
        let mut changed = BTreeMap::new();
        for r in self.watched.resources.state() {
            let k = key(&r);
            let tenant = tenant_name(&k);
            let deleting = r.metadata.deletion_timestamp.is_some();
            let verdict = (!deleting).then(|| self.verdicts.get(&k)).flatten();
            // A refused edit of an accepted resource still publishes: its records stay theirs.
            let accepted = matches!(
                verdict,
                Some(Verdict::Accepted { .. } | Verdict::KeptLast { .. })
            );
            if accepted && !has_finalizer(&r) {
                self.set_finalizer(&r, true).await;
            } else if !accepted && has_finalizer(&r) && view.withdrawn(&tenant) {
                self.set_finalizer(&r, false).await;
            }
            let want = status_of(&r, verdict, deleting.then_some(&tenant), &view, now);
            if r.status.as_ref() != Some(&want) {
                changed.insert(k, status_writer::with_nulls(&want));
            }
        }
        self.statuses.send(changed);
        if let Some(kuadrant) = self.kuadrant.as_mut() {
            if kuadrant.resolve_due(&self.base.resolver) || kuadrant.secrets_due() {
                self.watched.poke();
            }
            kuadrant.finalize(&self.verdicts, &view).await;
            let endpoints = kuadrant.probe_endpoints();
            let wanted = kuadrant.wanted_endpoints();
            let mut seen: HashMap<String, Vec<EndpointStatus>> = HashMap::new();
            if !wanted.is_empty() {
                for e in engine.endpoints(wanted.clone()).await.unwrap_or_default() {
                    // A host name's endpoint answers for each address's (`NAME@ADDRESS`).
                    let named = match e.name.rsplit_once('@') {
                        Some((host, _)) if !wanted.contains(&e.name) => host.to_owned(),
                        _ => e.name.clone(),
                    };
                    seen.entry(named).or_default().push(e);
                }
            }
            kuadrant.report(&self.verdicts, &view, &seen, now);
            kuadrant.report_policies(&self.watched, now);
            kuadrant.report_probes(&endpoints, &seen);
            let gateways = self.watched.gateway_objects();
            kuadrant.write_gateways(&gateways, &self.base, now).await;
        }
    }

    /// Adds or removes our finalizer, on the version read (a conflict is retried at the
    /// next round, from the newer version the watch brings).
    async fn set_finalizer(&self, r: &DNSFailover, on: bool) {
        let mut finalizers: Vec<String> = r
            .finalizers()
            .iter()
            .filter(|f| *f != FINALIZER)
            .cloned()
            .collect();
        if on {
            finalizers.push(FINALIZER.to_owned());
        }
        let patch = json!({ "metadata": {
            "resourceVersion": r.resource_version(),
            "finalizers": finalizers,
        }});
        let api: Api<DNSFailover> =
            Api::namespaced(self.client.clone(), &r.namespace().unwrap_or_default());
        match api
            .patch(&r.name_any(), &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) if on => debug!(resource = %r.name_any(), "finalizer added"),
            Ok(_) => {
                info!(namespace = ?r.namespace(), resource = %r.name_any(), "records withdrawn; finalizer released")
            }
            Err(e) => debug!(resource = %r.name_any(), "finalizer not changed yet: {e}"),
        }
    }
}

impl TenantSource for Controller {
    fn changes(&self) -> Arc<tokio::sync::Notify> {
        self.watched.changes()
    }

    fn rebase(&mut self, base: Config) {
        self.base = base;
        self.applied = None;
    }

    fn merge<'a>(&'a mut self, engine: &'a EngineReader) -> SourceFuture<'a, Merge> {
        Box::pin(self.round(engine))
    }

    fn report<'a>(&'a mut self, engine: &'a EngineReader) -> SourceFuture<'a, ()> {
        Box::pin(self.report_now(engine))
    }
}

fn has_finalizer(r: &DNSFailover) -> bool {
    r.finalizers().iter().any(|f| f == FINALIZER)
}

/// What the resources contribute (tenants and endpoints after the files' own), hashed.
fn digest(config: &Config) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_vec(&(&config.tenants, &config.endpoints))
        .unwrap_or_default()
        .hash(&mut hasher);
    hasher.finish()
}
