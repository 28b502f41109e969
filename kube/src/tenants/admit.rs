//! Admission: which resources become tenants, on top of the config files. Pure: the
//! resources, what discovery found and the base config in; the merged config and one
//! verdict per resource out. Everything a refusal says is decided here, so the status a
//! team reads and the DNS that is published can never disagree.
//!
//! A resource is accepted when its namespace may claim its domains and sinks, it
//! validates exactly as the equivalent `[[tenants]]` entry would, and no earlier resource
//! (by creation time) or file tenant publishes any of its names. Anything else is refused
//! and contributes nothing to the config.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use ho_config::model::{EndpointConfig, NamespaceAllowance, TenantConfig};
use ho_config::validate::{validate, Kinds};
use ho_config::{Config, EndpointSelection};
use kube::ResourceExt;

use super::claims::Claims;
use super::discover::{discover, Found, Lookup};
use super::field_names::{check_path, key_reason, resource_field};
use super::last_accepted::LastAccepted;
use super::resource::DNSFailover;

/// `namespace/name` of a resource.
pub type Key = (String, String);

/// What admission decided for one resource.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Published as tenant `tenant`. `kept_last`: discovery found no gateway right now,
    /// so the addresses found last are kept (a name is never emptied by discovery).
    Accepted {
        /// The tenant's name in `/status`, metrics and sinks' ownership marks.
        tenant: String,
        /// Whether the endpoints are the last ones discovery found.
        kept_last: bool,
    },
    /// Not published; `reason` is one CamelCase word, `message` says what to change.
    Refused {
        /// `NamespaceNotAllowed`, `DomainNotAllowed`, `SinkNotAllowed`, `NodesNotAllowed`,
        /// `Invalid`, `DomainClaimed` or `NameClaimed`.
        reason: &'static str,
        /// For `Invalid`, the lines `check-config` prints, located in the resource.
        message: String,
    },
    /// This generation is refused (`reason`, `message` as for [`Verdict::Refused`]), but an
    /// earlier generation was accepted: that one keeps publishing, as tenant `tenant`, until
    /// a valid edit replaces it or the resource is deleted. A typo never takes a live name
    /// down.
    KeptLast {
        /// The tenant's name.
        tenant: String,
        /// The generation that keeps publishing.
        serving: Option<i64>,
        /// Why the current generation is refused.
        reason: &'static str,
        /// What to change.
        message: String,
    },
    /// Valid and allowed, but no gateway has an address yet: nothing to publish.
    Waiting {
        /// Which sources have nothing yet.
        message: String,
    },
}

/// The merged config and each resource's verdict.
pub struct Admission {
    /// The files' config with the accepted resources' tenants and endpoints added.
    pub config: Config,
    /// One verdict per resource given.
    pub verdicts: BTreeMap<Key, Verdict>,
}

/// Admits resources; remembers each one's last discovered endpoints between rounds.
#[derive(Default)]
pub struct Admitter {
    last: HashMap<Key, Vec<Found>>,
    /// Resources that validated, by the spec and addresses they validated with: a round
    /// re-validates only what changed (a thousand resources validate in ~100 ms; a round
    /// runs at every change of any resource, Node, Service or Gateway).
    checked: HashMap<Key, Checked>,
    /// What the cached validations were made against: the base config, without its
    /// tenants and endpoints.
    fingerprint: u64,
    /// Each resource's last accepted generation: what keeps publishing while a later one
    /// is refused.
    accepted: LastAccepted,
}

/// A resource that validated: which version of it, with which addresses, and what it
/// became.
struct Checked {
    spec: (Option<String>, Option<i64>),
    found: Vec<Found>,
    tenant: TenantConfig,
    endpoints: Vec<EndpointConfig>,
}

impl Admitter {
    /// An admitter that keeps each resource's last accepted generation in `state_dir`
    /// (none: in memory only), starting from what a previous run kept there.
    pub fn keeping_in(state_dir: Option<&Path>) -> Admitter {
        Admitter {
            accepted: LastAccepted::keeping_in(state_dir),
            ..Admitter::default()
        }
    }

    /// The resources a last accepted generation is kept of (what a refusal keeps serving).
    pub fn kept(&self) -> Vec<Key> {
        self.accepted.keys()
    }

    /// Decides every resource, oldest first (the first claimant keeps a name), and merges
    /// the accepted ones into a copy of `base`.
    pub fn admit(
        &mut self,
        base: &Config,
        resources: &[&DNSFailover],
        world: &dyn Lookup,
        catalog: &Kinds<'_>,
    ) -> Admission {
        self.admit_with(base, resources, Vec::new(), world, catalog)
    }

    /// [`Admitter::admit`], with resources refused before admission (Kuadrant records that
    /// no longer translate, by their stand-in's key): each keeps publishing its last accepted
    /// generation as a refused resource does, after every resource given.
    pub fn admit_with(
        &mut self,
        base: &Config,
        resources: &[&DNSFailover],
        refused: Vec<(Key, Verdict)>,
        world: &dyn Lookup,
        catalog: &Kinds<'_>,
    ) -> Admission {
        let mut ordered: Vec<&DNSFailover> = resources.to_vec();
        ordered.sort_by(|a, b| {
            let at = |r: &DNSFailover| r.metadata.creation_timestamp.as_ref().map(|t| t.0);
            at(a).cmp(&at(b)).then_with(|| key(a).cmp(&key(b)))
        });
        let mut claims = Claims::of_files(base);
        let mut alone = base.clone();
        alone.tenants.clear();
        alone.endpoints.clear();
        let fingerprint = fingerprint(&alone);
        if fingerprint != self.fingerprint {
            self.checked.clear();
            self.fingerprint = fingerprint;
        }
        let mut config = base.clone();
        let mut verdicts = BTreeMap::new();
        let mut seen = HashSet::new();
        for resource in ordered {
            let k = key(resource);
            seen.insert(k.clone());
            let verdict = self.decide(resource, &k, &mut alone, &mut claims, world, catalog);
            let generation = resource.metadata.generation;
            let verdict = self.settle(
                &k,
                verdict,
                generation,
                &mut alone,
                &mut claims,
                &mut config,
            );
            verdicts.insert(k, verdict);
        }
        for (k, verdict) in refused {
            seen.insert(k.clone());
            let verdict = self.settle(&k, verdict, None, &mut alone, &mut claims, &mut config);
            verdicts.insert(k, verdict);
        }
        self.last.retain(|k, _| seen.contains(k));
        self.checked.retain(|k, _| seen.contains(k));
        self.accepted.forget_all_but(&seen);
        self.accepted.save();
        Admission { config, verdicts }
    }

    /// One resource; on acceptance its tenant and endpoints are left in `alone`.
    fn decide(
        &mut self,
        resource: &DNSFailover,
        k: &Key,
        alone: &mut Config,
        claims: &mut Claims,
        world: &dyn Lookup,
        catalog: &Kinds<'_>,
    ) -> Verdict {
        let Some(allow) = alone.kubernetes.allow.iter().find(|a| a.namespace == k.0) else {
            return refuse(
                "NamespaceNotAllowed",
                format!(
                    "namespace \"{}\" has no [[kubernetes.allow]] entry in the orchestrator's config: ask the platform team to allow it",
                    k.0
                ),
            );
        };
        // Every problem at once: the allowance's, discovery's, validation's.
        let mut refusals = check_allowance(resource, allow);
        let discovered = discover(resource, &k.0, world);
        let malformed = !discovered.errors.is_empty();
        refusals.extend(discovered.errors.into_iter().map(|e| ("Invalid", e)));
        let kept_last = discovered.found.is_empty() && !malformed;
        let found = match self.found_or_last(k, discovered.found, &discovered.missing) {
            // A malformed source never falls back on the addresses found last.
            Ok(found) if !(malformed && kept_last) => found,
            Err(waiting) if refusals.is_empty() => return waiting,
            _ => return joined(refusals),
        };
        let tenant = tenant_name(k);
        if let Err(message) = self.validated(resource, k, &tenant, &found, alone, catalog) {
            refusals.push(("Invalid", message));
        }
        if !refusals.is_empty() {
            alone.tenants.clear();
            alone.endpoints.clear();
            return joined(refusals);
        }
        if let Err(refusal) = claims.claim(k, &tenant, &alone.tenants[0].domains) {
            alone.tenants.clear();
            alone.endpoints.clear();
            return refusal;
        }
        self.last.insert(k.clone(), found);
        Verdict::Accepted { tenant, kept_last }
    }
}

impl Admitter {
    /// Leaves the resource's tenant and endpoints in `alone` when they validate: from the
    /// cache when neither the resource nor what was found changed, else validated now.
    fn validated(
        &mut self,
        resource: &DNSFailover,
        k: &Key,
        tenant: &str,
        found: &[Found],
        alone: &mut Config,
        catalog: &Kinds<'_>,
    ) -> Result<(), String> {
        let spec = (resource.metadata.uid.clone(), resource.metadata.generation);
        if let Some(c) = self
            .checked
            .get(k)
            .filter(|c| c.spec == spec && c.found == found)
        {
            alone.tenants = vec![c.tenant.clone()];
            alone.endpoints = c.endpoints.clone();
            return Ok(());
        }
        Self::validate(resource, tenant, found, alone, catalog)?;
        self.checked.insert(
            k.clone(),
            Checked {
                spec,
                found: found.to_vec(),
                tenant: alone.tenants[0].clone(),
                endpoints: alone.endpoints.clone(),
            },
        );
        Ok(())
    }

    /// What resource `k`'s `verdict` publishes, merged into `config` from `alone`: an
    /// acceptance is remembered as the last accepted `generation`; a refusal falls back on
    /// the last accepted generation when there is one.
    fn settle(
        &mut self,
        k: &Key,
        verdict: Verdict,
        generation: Option<i64>,
        alone: &mut Config,
        claims: &mut Claims,
        config: &mut Config,
    ) -> Verdict {
        let verdict = match verdict {
            Verdict::Refused { reason, message } => {
                self.accepted.fall_back(k, reason, message, alone, claims)
            }
            Verdict::Accepted { .. } => {
                self.accepted.remember(k, generation, alone);
                verdict
            }
            verdict => verdict,
        };
        if matches!(verdict, Verdict::Accepted { .. } | Verdict::KeptLast { .. }) {
            config.tenants.append(&mut alone.tenants);
            config.endpoints.append(&mut alone.endpoints);
        }
        verdict
    }

    /// What discovery found, or when it found nothing the addresses found last (a name is
    /// never emptied by discovery); `Waiting` when there were none either.
    fn found_or_last(
        &self,
        k: &Key,
        found: Vec<Found>,
        missing: &[String],
    ) -> Result<Vec<Found>, Verdict> {
        if !found.is_empty() {
            return Ok(found);
        }
        match self.last.get(k) {
            Some(last) if !last.is_empty() => Ok(last.clone()),
            _ => Err(Verdict::Waiting {
                message: missing.join("; "),
            }),
        }
    }

    /// Builds the resource's tenant and endpoints into `alone` and validates them as
    /// `check-config` would; a refusal leaves `alone` empty.
    fn validate(
        resource: &DNSFailover,
        tenant: &str,
        found: &[Found],
        alone: &mut Config,
        catalog: &Kinds<'_>,
    ) -> Result<(), String> {
        let (config, mut lines) = tenant_config(resource, tenant, found);
        alone.tenants = vec![config];
        alone.endpoints = endpoint_configs(resource, tenant, found);
        // A field that is no duration is said once: what validation says of the default
        // standing in for it is left out.
        let unread: Vec<String> = lines.iter().filter_map(|l| field_of(l)).collect();
        if let Err(errors) = validate(alone, catalog) {
            let sources: Vec<usize> = found.iter().map(|f| f.source).collect();
            let located = errors.0.iter().map(|e| {
                let own = |s: usize| resource.spec.endpoints[s].check.is_some();
                let at = locate(&e.path, &sources, &own);
                let reason = match at.contains(".check") {
                    true => key_reason(&e.reason),
                    false => e.reason.clone(),
                };
                format!("{at}: {reason}")
            });
            // Every endpoint shares the resource's check: its problem is said once.
            for line in located {
                let repeated = lines.contains(&line);
                if !repeated && !field_of(&line).is_some_and(|f| unread.contains(&f)) {
                    lines.push(line);
                }
            }
        }
        if !lines.is_empty() {
            alone.tenants.clear();
            alone.endpoints.clear();
            return Err(lines.join("\n"));
        }
        Ok(())
    }
}

/// A digest of `config` (the base without tenants and endpoints).
fn fingerprint(config: &Config) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_vec(config)
        .unwrap_or_default()
        .hash(&mut hasher);
    hasher.finish()
}

pub(super) fn refuse(reason: &'static str, message: String) -> Verdict {
    Verdict::Refused { reason, message }
}

/// Several refusals as one: the first one's reason, every message on its own line.
fn joined(refusals: Vec<(&'static str, String)>) -> Verdict {
    let reason = refusals.first().map_or("Invalid", |(r, _)| *r);
    let lines: Vec<String> = refusals.into_iter().map(|(_, m)| m).collect();
    refuse(reason, lines.join("\n"))
}

/// The tenant a resource becomes: `namespace_name` (Kubernetes names hold no `_`, so it
/// is unique), within the config's 63 characters; sinks' ownership marks carry it.
pub fn tenant_name(k: &Key) -> String {
    bounded_name(&format!("{}_{}", k.0, k.1))
}

/// `namespace/name`.
pub fn key(resource: &DNSFailover) -> Key {
    (
        resource.namespace().unwrap_or_default(),
        resource.name_any(),
    )
}

/// Domains under an allowed suffix, sinks the namespace may use, Nodes only when granted:
/// every one that is not, as a reason and a message.
fn check_allowance(
    resource: &DNSFailover,
    allow: &NamespaceAllowance,
) -> Vec<(&'static str, String)> {
    let suffixes: Vec<String> = allow
        .domains
        .iter()
        .filter_map(|d| ho_config::names::normalize_domain(d).ok())
        .collect();
    let mut refusals = Vec::new();
    for (i, raw) in resource.spec.domains.iter().enumerate() {
        let Ok(domain) = ho_config::names::normalize_domain(raw) else {
            continue; // the validation says why, with the path
        };
        let under = |s: &String| domain == *s || domain.ends_with(&format!(".{s}"));
        if !suffixes.iter().any(under) {
            refusals.push((
                "DomainNotAllowed",
                format!(
                    "spec.domains[{i}]: \"{domain}\" is not under a suffix namespace \"{}\" may claim ({})",
                    allow.namespace,
                    suffixes.join(", ")
                ),
            ));
        }
    }
    for (i, sink) in resource.spec.sinks.iter().enumerate() {
        if !allow.sinks.contains(sink) {
            refusals.push((
                "SinkNotAllowed",
                format!(
                    "spec.sinks[{i}]: namespace \"{}\" may not publish to sink \"{sink}\" (allowed: {})",
                    allow.namespace,
                    allow.sinks.join(", ")
                ),
            ));
        }
    }
    let wants_nodes = resource
        .spec
        .endpoints
        .iter()
        .position(|s| s.nodes.is_some());
    if let Some(i) = wants_nodes.filter(|_| !allow.nodes) {
        refusals.push((
            "NodesNotAllowed",
            format!(
                "spec.endpoints[{i}].nodes: namespace \"{}\" may not select Nodes (the platform team grants it with nodes = true)",
                allow.namespace
            ),
        ));
    }
    refusals
}

/// The `[[tenants]]` entry the resource stands for. Deleting the resource withdraws its
/// records (cleanup on removal, under the finalizer); where the clusters vote
/// (`[multi_cluster]`) it withdraws this cluster's report and addresses from the shared
/// name, which the other clusters keep (the engine's `multi_cluster::leave`).
/// A field that is no duration is said, and its default stands in so the rest is judged.
fn tenant_config(
    resource: &DNSFailover,
    name: &str,
    found: &[Found],
) -> (TenantConfig, Vec<String>) {
    let spec = &resource.spec;
    let mut unread = Vec::new();
    let mut duration = |field: &str, value: &str| {
        humantime::parse_duration(value)
            .map_err(|e| {
                unread.push(format!(
                    "spec.{}: \"{value}\" is not a duration ({e}); write e.g. \"30s\"",
                    resource_field(field)
                ))
            })
            .ok()
    };
    let ttl = spec.ttl.as_deref().and_then(|t| duration("ttl", t));
    let degraded_ttl = spec
        .degraded_ttl
        .as_deref()
        .and_then(|t| duration("degraded_ttl", t));
    let ttl = ttl.unwrap_or(std::time::Duration::from_secs(30));
    let config = TenantConfig {
        answer: spec.answer.unwrap_or_default(),
        name: name.to_owned(),
        hosts_key: None,
        domains: spec.domains.clone(),
        endpoints: EndpointSelection::Names(
            found
                .iter()
                .map(|f| endpoint_name(name, &f.address))
                .collect(),
        ),
        selector: BTreeMap::new(),
        sinks: spec.sinks.clone(),
        ttl,
        degraded_ttl,
        on_all_unhealthy: spec.on_all_unhealthy.unwrap_or_default(),
        min_healthy: spec.min_healthy.unwrap_or(0.0),
        cleanup_on_remove: true,
        hold_failback: spec.hold_failback.unwrap_or(false),
        policy: spec.policy.unwrap_or_default(),
        weights: spec.weights.clone(),
        default_weight: spec.default_weight,
        default_geo: spec.default_geo.clone(),
        multi_cluster: None,
        slo: spec.slo.clone(),
        slo_window: spec.slo_window.clone(),
        resource: Some(key(resource)),
    };
    (config, unread)
}

/// The field a problem line names (`spec.ttl` of `spec.ttl: ...`).
pub fn field_of(line: &str) -> Option<String> {
    line.split_once(": ").map(|(at, _)| at.to_owned())
}

fn endpoint_configs(resource: &DNSFailover, tenant: &str, found: &[Found]) -> Vec<EndpointConfig> {
    found
        .iter()
        .map(|f| {
            let source = &resource.spec.endpoints[f.source];
            EndpointConfig {
                name: endpoint_name(tenant, &f.address),
                address: f.address.to_string(),
                labels: source.labels.clone(),
                weight: source.weight,
                priority: source.priority,
                cluster: None,
                hold_failback: false,
                checks: Vec::new(),
                require: None,
                must_pass: false,
                check: match &source.check {
                    Some(own) => own.over(&resource.spec.check.clone().unwrap_or_default()),
                    None => resource.spec.check.clone().unwrap_or_default(),
                },
            }
        })
        .collect()
}

/// The endpoint a resource's `target` (an address or a host name) becomes.
pub(super) fn endpoint_name(tenant: &str, target: &impl std::fmt::Display) -> String {
    let address = target.to_string().replace(':', "-");
    bounded_name(&format!("{tenant}_{address}"))
}

/// `name` if it fits the config's 63 characters, else its first 54 and a hash of the
/// whole: unique, stable across restarts, and still readable.
fn bounded_name(name: &str) -> String {
    if name.len() <= 63 {
        return name.to_owned();
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, name.as_bytes());
    let hash: String = digest.as_ref()[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{}_{hash}", &name[..54])
}

/// A validation path of the one-tenant config, as the resource's field: `tenants[0].x` is
/// `spec.x`, endpoint `j`'s check is `spec.check` (its source's own `check` where it has
/// one), its other fields its source's.
fn locate(path: &str, sources: &[usize], own_check: &dyn Fn(usize) -> bool) -> String {
    if let Some(rest) = path.strip_prefix("tenants[0].") {
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        return format!("spec.{}{}", resource_field(&rest[..end]), &rest[end..]);
    }
    if let Some(rest) = path.strip_prefix("endpoints[") {
        if let Some((j, field)) = rest.split_once(']') {
            let source = j.parse::<usize>().ok().and_then(|j| sources.get(j));
            if let Some(check) = field.strip_prefix(".check") {
                let check = check_path(check);
                return match source {
                    Some(&s) if own_check(s) => format!("spec.endpoints[{s}].check{check}"),
                    _ => format!("spec.check{check}"),
                };
            }
            if let Some(source) = source {
                return format!("spec.endpoints[{source}]{field}");
            }
        }
    }
    path.to_owned()
}
