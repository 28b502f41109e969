//! Kuadrant's `DNSPolicy` in our terms, in both shapes Kuadrant has published: the RFCs'
//! `kuadrant.io/v1alpha1` (`loadBalancing.weighted {defaultWeight, custom}`,
//! `loadBalancing.GEO.defaultGeo`) and today's `kuadrant.io/v1` (`loadBalancing {weight,
//! geo, defaultGeo: bool}`, the geo and weight of the gateways the policy targets), and
//! which records a policy governs (its `targetRef`).

use super::objects::{DnsPolicy, Geo, LoadBalancing};
use super::*;

/// The ManagedCluster label Kuadrant's custom weights match when they name no attribute.
const CUSTOM_WEIGHT_LABEL: &str = "kuadrant.io/lb-attribute-custom-weight";

/// The label Kuadrant puts on the DNSRecord it makes for one listener of a Gateway (the
/// record is named `GATEWAY-LISTENER`).
const LISTENER_LABEL: &str = "kuadrant.io/listener-name";

/// What a DNSPolicy says, in our terms.
#[derive(Default)]
pub(super) struct Policy {
    pub(super) name: String,
    /// `targetRef.name` (a Gateway of the policy's namespace) and `sectionName` (a listener).
    gateway: Option<String>,
    section: Option<String>,
    pub(super) check: Table,
    default_weight: Option<i64>,
    /// (label, value, weight)
    rules: Vec<(String, String, i64)>,
    default_geo: Option<String>,
    /// v1: the geo of the gateways this policy targets.
    geo: Option<String>,
    /// Why the policy cannot be applied (its records keep what they published).
    pub(super) invalid: Option<String>,
}

impl Policy {
    /// The policy `typed` (written as `raw`, whose keys without an equivalent are noted);
    /// without a `healthCheck` its gateways are checked as `fallback`'s. One that cannot be
    /// applied still knows its name and target, with `invalid` saying why.
    pub(super) fn read(
        typed: &DnsPolicy,
        raw: &Value,
        fallback: &Policy,
        notes: &mut Vec<String>,
    ) -> Policy {
        // The RFC's drafts put `name` at the top; resources have it under `metadata`.
        let name = (typed.metadata.as_ref().and_then(|m| m.name.as_deref()))
            .or(typed.name.as_deref())
            .unwrap_or("(unnamed)");
        let target = typed.spec.as_ref().and_then(|s| s.target_ref.as_ref());
        let mut policy = Policy {
            name: name.to_owned(),
            gateway: target.and_then(|t| t.name.clone()),
            section: target.and_then(|t| t.section_name.clone()),
            ..Policy::default()
        };
        if let Err(e) = policy.read_spec(typed, raw, fallback, notes) {
            policy.invalid = Some(format!("{e:#}"));
        }
        policy
    }

    /// A policy whose document does not read: known by its name and target, invalid for
    /// the field that does not read.
    pub(super) fn malformed(doc: &Document, malformed: &Malformed) -> Policy {
        let target = |key: &str| doc.text(&["spec", "targetRef", key]).map(str::to_owned);
        Policy {
            name: malformed.object.name.clone(),
            gateway: target("name"),
            section: target("sectionName"),
            invalid: Some(malformed.to_string()),
            ..Policy::default()
        }
    }

    fn read_spec(
        &mut self,
        typed: &DnsPolicy,
        raw: &Value,
        fallback: &Policy,
        notes: &mut Vec<String>,
    ) -> anyhow::Result<()> {
        let name = self.name.clone();
        let (Some(spec), Some(raw_spec)) = (&typed.spec, raw.get("spec")) else {
            bail!("DNSPolicy {name} has no spec");
        };
        unknown_keys(
            raw_spec,
            &[
                "targetRef",
                "healthCheck",
                "health",
                "loadBalancing",
                "providerRefs",
            ],
            "DNSPolicy.spec",
            notes,
        );
        if spec.target_ref.is_some() {
            notes.push(format!("DNSPolicy {name} targetRef (a Gateway: the policy governs the DNSRecords made for it, and the addresses published are those records', not discovered from the Gateway)"));
        }
        if spec.provider_refs.is_some() {
            notes.push(format!("DNSPolicy {name}.spec.providerRefs (the DNS provider's secret: the tenants publish through the sink named dns)"));
        }
        let defaults = CheckDefaults::policy(typed.api_version.as_deref());
        let raw_check = ["healthCheck", "health"]
            .iter()
            .zip([&spec.health_check, &spec.health])
            .find_map(|(key, typed)| typed.as_ref().and(raw_spec.get(key)));
        match raw_check {
            Some(hc) => {
                self.check = check_of(
                    hc,
                    &format!("DNSPolicy {name}.spec.healthCheck"),
                    defaults,
                    notes,
                )?
            }
            None if fallback.check.is_empty() => {}
            None => {
                self.check.clone_from(&fallback.check);
                notes.push(format!("no healthCheck in the DNSPolicy {name} (Kuadrant then publishes unchecked): the gateways get a TCP check on port 443"));
            }
        }
        if let (Some(lb), Some(raw_lb)) = (&spec.load_balancing, raw_spec.get("loadBalancing")) {
            self.load_balancing(lb, raw_lb, notes)?;
        }
        Ok(())
    }

    /// The Gateway its `targetRef` names.
    pub(super) fn gateway(&self) -> Option<&str> {
        self.gateway.as_deref()
    }

    /// The listener its `targetRef.sectionName` names.
    pub(super) fn section(&self) -> Option<&str> {
        self.section.as_deref()
    }

    /// What governs a record no policy governs: round robin, checked by a TCP connect to
    /// 443 (`tcp_443`) or else as the config's defaults say (an empty check).
    pub(super) fn fallback(tcp_443: bool) -> Policy {
        let mut check = Table::new();
        if tcp_443 {
            check.insert("kind".into(), "tcp".into());
            check.insert("port".into(), 443.into());
        }
        Policy {
            check,
            ..Policy::default()
        }
    }

    fn load_balancing(
        &mut self,
        lb: &LoadBalancing,
        raw: &Value,
        notes: &mut Vec<String>,
    ) -> anyhow::Result<()> {
        let at = format!("DNSPolicy {}.spec.loadBalancing", self.name);
        unknown_keys(
            raw,
            &["weighted", "GEO", "geo", "weight", "defaultGeo"],
            &at,
            notes,
        );
        // v1: the targeted gateways' own weight and geo.
        if let Some(w) = lb.weight {
            self.default_weight = Some(w);
        }
        if let Some(Geo::Code(geo)) = &lb.geo {
            self.geo = Some(geo.clone());
            if lb.default_geo == Some(true) {
                self.default_geo = Some(geo.clone());
            }
        }
        // v1alpha1: weights by cluster attribute, and the default of a GEO layout.
        if let (Some(w), Some(raw_w)) = (&lb.weighted, raw.get("weighted")) {
            unknown_keys(
                raw_w,
                &["defaultWeight", "custom"],
                &format!("{at}.weighted"),
                notes,
            );
            self.default_weight = w.default_weight;
            let raw_custom = raw_w.get("custom").and_then(Value::as_sequence);
            let custom = w
                .custom
                .iter()
                .flatten()
                .zip(raw_custom.into_iter().flatten());
            for (i, (c, raw_c)) in custom.enumerate() {
                let at = format!("{at}.weighted.custom[{i}]");
                unknown_keys(raw_c, &["attribute", "value", "weight"], &at, notes);
                let value = (c.value.as_deref()).with_context(|| format!("{at} has no value"))?;
                let weight = c.weight.with_context(|| format!("{at} has no weight"))?;
                let label = c.attribute.as_deref().unwrap_or(CUSTOM_WEIGHT_LABEL);
                self.rules
                    .push((label.to_owned(), value.to_owned(), weight));
            }
        }
        let layout = match (&lb.geo_layout, &lb.geo) {
            (Some(layout), _) | (None, Some(Geo::Layout(layout))) => Some(layout),
            _ => None,
        };
        if let Some(layout) = layout {
            let geo = layout.default_geo.as_deref().with_context(|| {
                format!("{at}.GEO has no defaultGeo (Kuadrant requires it in this shape)")
            })?;
            self.default_geo = Some(geo.to_owned());
        }
        Ok(())
    }

    /// Whether this policy governs `record`: Kuadrant owns the record by the policy, or the
    /// record is the one Kuadrant makes for the targeted Gateway (`GATEWAY-LISTENER`,
    /// labelled with the listener; only `sectionName`'s listener when the policy names one).
    fn governs(&self, record: &Value) -> bool {
        let meta = record.get("metadata");
        let owned = meta
            .and_then(|m| m.get("ownerReferences"))
            .and_then(Value::as_sequence)
            .into_iter()
            .flatten()
            .any(|o| text(o, "kind") == Some("DNSPolicy") && text(o, "name") == Some(&self.name));
        if owned {
            return true;
        }
        let (Some(gateway), Some(name)) = (&self.gateway, meta.and_then(|m| text(m, "name")))
        else {
            return false;
        };
        let listener = meta
            .and_then(|m| m.get("labels"))
            .and_then(|l| text(l, LISTENER_LABEL))
            .map(str::to_owned)
            .or_else(|| name.strip_prefix(&format!("{gateway}-")).map(str::to_owned));
        match listener {
            Some(l) if name == format!("{gateway}-{l}") => {
                self.section.as_ref().is_none_or(|s| *s == l)
            }
            _ => false,
        }
    }

    /// Sets `t`'s policy: `geo` when a default geo is known (the record's `*` geo, else
    /// the policy's) and every endpoint has a location (a v1 policy gives its gateways its
    /// `geo`), `weighted` when weights differ, else `all` (Kuadrant's round robin). What
    /// the operator must still do (locations to set, weight rules that match nothing) goes
    /// to `to_do`.
    pub(super) fn apply(&self, t: &mut Tenant, endpoints: &mut Endpoints, to_do: &mut Vec<String>) {
        if let Some(geo) = &self.geo {
            for e in &t.endpoints {
                if !endpoints.has_geo(e) {
                    let table = endpoints.table_mut(e).expect("a tenant's endpoint");
                    let mut labels = Table::new();
                    labels.insert("geo".into(), geo.clone().into());
                    table.insert("labels".into(), labels.into());
                }
            }
        }
        let weighted = !self.rules.is_empty() || t.endpoints.iter().any(|e| endpoints.weighted(e));
        let located = t.endpoints.iter().all(|e| endpoints.has_geo(e));
        let geos: BTreeSet<&str> = t
            .endpoints
            .iter()
            .filter_map(|e| endpoints.label(e, "geo"))
            .collect();
        let default = t.default_geo.clone().or(self.default_geo.clone());
        match default {
            Some(geo) if located => {
                t.policy = "geo";
                t.default_geo = Some(geo);
            }
            Some(geo) => {
                t.default_geo = None;
                to_do.push(format!("GEO for tenant {}: its endpoints have no geo-code; set labels.geo on each, then policy = \"geo\" and default_geo = \"{geo}\"", t.name));
            }
            // A geo layout with no `*` geo: Kuadrant answers nothing outside its geos; an
            // empty answer takes the name down, so the first geo is the default, and said.
            None if located && geos.len() > 1 => {
                let first = (*geos.first().expect("two geos")).to_owned();
                to_do.push(format!("GEO for tenant {}: the record names no default geo (`*`), so clients outside {} got no answer from Kuadrant; here they get {first}'s: set default_geo to the one you mean", t.name, geos.iter().copied().collect::<Vec<_>>().join(", ")));
                t.policy = "geo";
                t.default_geo = Some(first);
            }
            None => {}
        }
        if weighted {
            if t.policy != "geo" {
                t.policy = "weighted";
            }
            t.default_weight = self.default_weight;
            t.rules.clone_from(&self.rules);
            for (label, value, weight) in &self.rules {
                let matched = t
                    .endpoints
                    .iter()
                    .any(|e| endpoints.label(e, label) == Some(value.as_str()));
                if !matched {
                    to_do.push(format!("tenant {}: the weight rule {label} = {value:?} (weight {weight}) matches none of its endpoints, so it changes nothing; set labels.{label:?} on the endpoints it means", t.name));
                }
            }
        }
    }
}

/// The policy governing `record` among `policies`: the one that targets its Gateway (or
/// owns it), else the only one (the RFCs' drafts, and records written by hand beside one
/// policy: a policy's `targetRef` defaults to the Gateways of its namespace). `None`:
/// several policies and none targets it.
pub(super) fn governing<'p>(policies: &'p [Policy], record: &Value) -> Option<&'p Policy> {
    match policies {
        [only] => Some(only),
        _ => policies.iter().find(|p| p.governs(record)),
    }
}
