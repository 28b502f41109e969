//! The pure side of Kuadrant's resources, live: what a round's view of the cluster
//! translates to, the listener records a round no longer makes kept ([`super::carry`]),
//! and what admission gets of them. No client and no clock: the controller drives it once
//! a round, and tests drive it step by step.

use std::collections::BTreeSet;
use std::sync::Arc;

use kube::api::DynamicObject;
use kube::ResourceExt;

use super::super::admit::{Key, Verdict};
use super::super::resource::{DNSFailover, FINALIZER};
use super::carry;
use super::refusal::Refusal;
use super::translate::{
    stand_in_name, stands_for, translate_all, Allowance, Policies, Probes, Records, Translator,
};

/// One round's view of Kuadrant's resources, every kind listed.
pub struct View<'a> {
    /// The DNSRecords.
    pub records: &'a [Arc<DynamicObject>],
    /// The DNSHealthCheckProbes and DNSPolicies.
    pub others: &'a [Arc<DynamicObject>],
    /// The Gateways.
    pub gateways: &'a [Arc<DynamicObject>],
}

/// The translation, and what the last complete view became.
pub struct Core {
    translate: Translator,
    records: Records,
    policies: Policies,
    probes: Probes,
    /// Whether a complete view was translated yet. Until then every record a previous run
    /// kept a last accepted generation of keeps publishing it: an empty view is not a
    /// deletion.
    listed: bool,
}

impl Default for Core {
    fn default() -> Core {
        Core::new()
    }
}

impl Core {
    /// Nothing translated yet; the import's translation.
    pub fn new() -> Core {
        Core::translating(ho_import::kuadrant::translate)
    }

    /// Nothing translated yet; `translate` translates.
    pub(super) fn translating(translate: Translator) -> Core {
        Core {
            translate,
            records: Records::new(),
            policies: Policies::new(),
            probes: Probes::new(),
            listed: false,
        }
    }

    /// Translates `view` (`None`: a kind is not listed yet, so what the last complete view
    /// became stands), keeping the listener records it no longer makes that are not
    /// withdrawn; `kept`: the keys admission keeps a last accepted generation of.
    pub fn refresh(&mut self, view: Option<&View<'_>>, allowed: &Allowance<'_>, kept: &[Key]) {
        let Some(view) = view else {
            return;
        };
        let (mut records, policies, probes) = translate_all(
            view.records,
            view.others,
            view.gateways,
            self.translate,
            allowed,
        );
        let previous = match self.listed {
            true => std::mem::take(&mut self.records),
            false => carry::remembered(kept, view),
        };
        carry::carry_over(&previous, &mut records, &policies, view, kept);
        self.records = records;
        self.policies = policies;
        self.probes = probes;
        self.listed = true;
    }

    /// Every host name the records' stand-ins and the probes are given (a load
    /// balancer's, for the engine to resolve).
    pub fn host_names(&self) -> BTreeSet<String> {
        let stand_ins = self
            .records
            .values()
            .filter_map(|r| r.stand_ins.as_ref().ok());
        let probes = self.probes.values().filter_map(|p| p.as_ref().ok());
        stand_ins
            .flatten()
            .flat_map(|s| &s.spec.endpoints)
            .chain(probes)
            .flat_map(|source| source.hosts.iter().cloned())
            .collect()
    }

    /// Refuses each record one of whose host names is `unresolved` (with why), so that the
    /// name never reaches the engine, whose plan would not run without it: the record keeps
    /// its last accepted answer, and the other records go on.
    pub fn refuse_unresolved(&mut self, unresolved: &dyn Fn(&str) -> Option<String>) {
        for record in self.records.values_mut() {
            let Ok(stand_ins) = &record.stand_ins else {
                continue;
            };
            let hosts = stand_ins.iter().flat_map(|s| &s.spec.endpoints);
            let why = hosts
                .flat_map(|source| &source.hosts)
                .find_map(|h| unresolved(h).map(|why| (h.clone(), why)));
            if let Some((host, why)) = why {
                record.stand_ins = Err(Refusal::Unresolved { host, why });
            }
        }
    }

    /// The records, per (namespace, name).
    pub fn records(&self) -> &Records {
        &self.records
    }

    /// What became of each DNSPolicy.
    pub fn policies(&self) -> &Policies {
        &self.policies
    }

    /// What each DNSHealthCheckProbe is probed as.
    pub fn probes(&self) -> &Probes {
        &self.probes
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

    /// The records that did not translate, refused as invalid: each of the stand-ins it had
    /// when last accepted (`kept`: the keys admission keeps a last generation of), so every
    /// name of the record keeps its last answer. Before the first complete view, every
    /// kept stand-in of a record is refused as not listed yet, and so keeps its answer.
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
                    message: message.to_string(),
                };
                refused.push((k.clone(), verdict));
            }
        }
        if !self.listed {
            let records = kept.iter().filter(|k| k.1.starts_with("dnsrecord."));
            for k in records {
                let verdict = Verdict::Refused {
                    reason: "NotListed",
                    message: "Kuadrant's resources are not listed yet".to_owned(),
                };
                refused.push((k.clone(), verdict));
            }
        }
        refused
    }
}

/// Whether `object` is being deleted.
pub(super) fn being_deleted(object: &DynamicObject) -> bool {
    object.metadata.deletion_timestamp.is_some()
}

/// Whether `object` holds our finalizer.
pub(super) fn holds_finalizer(object: &DynamicObject) -> bool {
    object
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == FINALIZER)
}
