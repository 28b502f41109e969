//! What a tenant's snapshot looks like as Route53 record sets, and the ownership mark
//! ([`ho_engine::sink::ownership`]) as a record set. Pure: no SDK calls, so every rendering rule is unit-tested.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ho_config::RoutingPolicy;

use super::config::RecordStyle;
use ho_engine::sink::ownership::{mark_text, OWNER_PREFIX, OWNER_TTL};
use ho_engine::snapshot::{PublishedAddress, TenantSnapshot};

/// Set identifier of the geolocation default record set (`CountryCode = "*"`).
pub const GEO_DEFAULT_ID: &str = "default";

/// The label under a tenant's name that holds a location's weighted record sets: a
/// geolocation set can hold one answer, so weights inside a location are a record tree,
/// the location's set an alias of `<location>._weighted.<name>` where weighted sets (one per
/// endpoint) share the answers (as Kuadrant's Route53 provider builds it).
pub const WEIGHTED_LABEL: &str = "_weighted";

/// The name holding location `geo`'s weighted sets under `name` (fully qualified).
pub fn weighted_name(geo: &str, name: &str) -> String {
    format!("{}.{WEIGHTED_LABEL}.{name}", geo.to_ascii_lowercase())
}

/// How Route53 chooses among record sets of one name and type.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Routing {
    /// One record set, every value answered.
    Simple,
    /// Multivalue answer: up to 8 healthy values, at random.
    MultiValue,
    /// Weighted: chosen in proportion to the weight (0-255).
    Weighted(i64),
    /// Geolocation: chosen by the client's location.
    Geo(Location),
    /// Something this sink never writes (alias, latency, failover, health check ...); such a
    /// record set never equals a desired one, so an owned name gets it replaced.
    Other,
}

/// A Route53 geolocation.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Location {
    /// `CountryCode = "*"`: clients no other location matches.
    Default,
    /// An ISO 3166 country code, with a subdivision for `US-CA`-style labels.
    Country {
        /// Two letters, e.g. `DE`.
        country: String,
        /// e.g. `CA` for `US-CA`.
        subdivision: Option<String>,
    },
    /// A continent (`GEO-EU`): clients of a country without a location of its own.
    Continent(String),
}

impl Location {
    /// Reads an endpoint's `geo` label (validated with the config).
    pub fn from_label(label: &str) -> Location {
        if let Some(code) = ho_engine::sink::geo::continent_of_label(label) {
            return Location::Continent(code.to_string());
        }
        match label.split_once('-') {
            Some((country, sub)) => Location::Country {
                country: country.to_string(),
                subdivision: Some(sub.to_string()),
            },
            None => Location::Country {
                country: label.to_string(),
                subdivision: None,
            },
        }
    }
}

/// One Route53 record set, as far as this sink compares them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RecordSet {
    /// Fully qualified, lower case, with the trailing dot.
    pub name: String,
    /// `A`, `AAAA`, `CNAME` or `TXT`.
    pub rtype: String,
    /// Set identifier of routed record sets.
    pub set_id: Option<String>,
    /// Routing policy.
    pub routing: Routing,
    /// TTL in seconds (0 for an alias, which has none).
    pub ttl: i64,
    /// Values, sorted (none for an alias).
    pub values: Vec<String>,
    /// What an alias set answers from: a location's set pointing at its weighted sets, or
    /// an `answer = "cname"` tenant's apex pointing at an AWS load balancer.
    pub alias: Option<Alias>,
}

impl RecordSet {
    /// As compared with what this sink wants, listed in zone `zone_id`: an alias into that
    /// zone is one of [`Alias::here`].
    pub fn listed_in(mut self, zone_id: &str) -> RecordSet {
        if let Some(alias) = &mut self.alias {
            if alias.zone.as_deref() == Some(zone_id) {
                alias.zone = None;
            }
        }
        self
    }
}

/// An alias record set's target.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Alias {
    /// Fully qualified, lower case.
    pub name: String,
    /// The hosted zone the target lives in; `None`: this zone.
    pub zone: Option<String>,
}

impl Alias {
    /// A name of this zone.
    pub fn here(name: &str) -> Alias {
        Alias {
            name: name.to_owned(),
            zone: None,
        }
    }
}

/// Host names the apex may alias, by suffix (`us-east-1.elb.amazonaws.com`), each with the
/// hosted zone id of the AWS targets under it (an ELB's canonical hosted zone id in its
/// region): `alias_zones` in the sink's config.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AliasZones(pub BTreeMap<String, String>);

impl AliasZones {
    /// The hosted zone of `host`'s longest matching suffix, if any.
    pub fn of(&self, host: &str) -> Option<&str> {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.0
            .iter()
            .filter(|(suffix, _)| {
                let suffix = suffix.trim_end_matches('.').to_ascii_lowercase();
                host == suffix || host.ends_with(&format!(".{suffix}"))
            })
            .max_by_key(|(suffix, _)| suffix.len())
            .map(|(_, zone)| zone.as_str())
    }
}

/// The ownership record of `name` for `owner_id`.
pub fn owner_record(name: &str, owner_id: &str) -> RecordSet {
    RecordSet {
        name: format!("{OWNER_PREFIX}{name}"),
        rtype: "TXT".into(),
        set_id: None,
        routing: Routing::Simple,
        ttl: i64::from(OWNER_TTL),
        values: vec![format!("\"{}\"", mark_text(owner_id))],
        alias: None,
    }
}

/// The record sets the tenant wants at each of its names (fully qualified), with the
/// weighted names of a `geo` tenant's locations; a name mapping to an empty list must hold
/// no A/AAAA/CNAME record sets (a location's weighted name no longer used). An
/// `answer = "cname"` tenant's names below the zone's `apex` hold one CNAME to the first
/// healthy host (`TenantSnapshot::cname`); the apex, which cannot hold a CNAME, holds A and
/// AAAA aliases of that host where `aliases` names its hosted zone (an AWS load
/// balancer), else the addresses. `apex`: the zone's name, with or without its trailing
/// dot.
pub fn desired(
    snapshot: &TenantSnapshot,
    style: RecordStyle,
    apex: &str,
    aliases: &AliasZones,
) -> BTreeMap<String, Vec<RecordSet>> {
    let ttl = i64::try_from(snapshot.ttl.as_secs().max(1)).unwrap_or(i64::MAX);
    let mut out: BTreeMap<String, Vec<RecordSet>> = BTreeMap::new();
    for domain in &snapshot.domains {
        let name = format!("{}.", domain.trim_end_matches('.'));
        let at_apex = name.eq_ignore_ascii_case(&format!("{}.", apex.trim_end_matches('.')));
        if let Some(sets) = cname_sets(snapshot, &name, at_apex, ttl, aliases) {
            out.insert(name, sets);
            continue;
        }
        if snapshot.policy == RoutingPolicy::Geo {
            let locations = snapshot
                .geos
                .iter()
                .map(String::as_str)
                .chain([GEO_DEFAULT_ID]);
            for geo in locations {
                out.entry(weighted_name(geo, &name)).or_default();
            }
        }
        let at = NameSets {
            snapshot,
            style,
            name: &name,
            ttl,
        };
        let mut sets = Vec::new();
        for v6 in [false, true] {
            at.family(v6, &mut sets, &mut out);
        }
        sets.sort();
        out.insert(name, sets);
    }
    for sets in out.values_mut() {
        sets.sort();
    }
    out
}

/// What an `answer = "cname"` tenant's `name` holds: a CNAME to the picked host below the
/// apex, A and AAAA aliases of it at the apex when `aliases` names the host's hosted zone;
/// `None` for the addresses (any other tenant, or an apex whose host has no alias zone).
fn cname_sets(
    snapshot: &TenantSnapshot,
    name: &str,
    at_apex: bool,
    ttl: i64,
    aliases: &AliasZones,
) -> Option<Vec<RecordSet>> {
    let host = snapshot.cname()?;
    let set = |rtype: &str, ttl, values, alias| RecordSet {
        name: name.to_owned(),
        rtype: rtype.into(),
        set_id: None,
        routing: Routing::Simple,
        ttl,
        values,
        alias,
    };
    if !at_apex {
        return Some(vec![set("CNAME", ttl, vec![format!("{host}.")], None)]);
    }
    let zone = aliases.of(host)?;
    let alias = || {
        Some(Alias {
            name: format!("{}.", host.trim_end_matches('.').to_ascii_lowercase()),
            zone: Some(zone.to_owned()),
        })
    };
    Some(vec![
        set("A", 0, Vec::new(), alias()),
        set("AAAA", 0, Vec::new(), alias()),
    ])
}

/// One name's address record sets being made: the tenant, the record style, the name
/// (fully qualified) and its TTL.
struct NameSets<'a> {
    snapshot: &'a TenantSnapshot,
    style: RecordStyle,
    name: &'a str,
    ttl: i64,
}

impl NameSets<'_> {
    /// The sets of one family (A, or AAAA when `v6`) by the tenant's policy, into `sets`
    /// (the name's own) or `out` (a `geo` location's weighted name).
    fn family(
        &self,
        v6: bool,
        sets: &mut Vec<RecordSet>,
        out: &mut BTreeMap<String, Vec<RecordSet>>,
    ) {
        let snapshot = self.snapshot;
        let rtype = if v6 { "AAAA" } else { "A" };
        let family: Vec<&PublishedAddress> = snapshot
            .addresses
            .iter()
            .filter(|a| matches!(a.address, IpAddr::V6(_)) == v6)
            .collect();
        if family.is_empty() {
            return;
        }
        let set = |set_id: Option<String>, routing: Routing, list: &[&PublishedAddress]| {
            let mut values: Vec<String> = list.iter().map(|a| a.address.to_string()).collect();
            values.sort();
            values.dedup();
            RecordSet {
                name: self.name.to_owned(),
                rtype: rtype.into(),
                set_id,
                routing,
                ttl: self.ttl,
                values,
                alias: None,
            }
        };
        let per_endpoint = |routing: &dyn Fn(&PublishedAddress) -> Routing| {
            family
                .iter()
                .map(|a| set(Some(a.endpoint.name.to_string()), routing(a), &[*a]))
                .collect::<Vec<_>>()
        };
        match snapshot.policy {
            RoutingPolicy::All | RoutingPolicy::Failover => match self.style {
                RecordStyle::Simple => sets.push(set(None, Routing::Simple, &family)),
                RecordStyle::Multivalue => sets.extend(per_endpoint(&|_| Routing::MultiValue)),
            },
            RoutingPolicy::Weighted => {
                sets.extend(per_endpoint(&|a| Routing::Weighted(i64::from(a.weight))));
            }
            RoutingPolicy::Geo => {
                let geos = &snapshot.geos;
                for (at, set) in geo_sets(&family, snapshot.default_geo.as_deref(), geos, &set) {
                    match at {
                        None => sets.push(set),
                        Some(weighted) => out.entry(weighted).or_default().push(set),
                    }
                }
            }
        }
    }
}

/// Builds one record set of a family: (set identifier, routing, addresses).
type MakeSet<'a> = dyn Fn(Option<String>, Routing, &[&PublishedAddress]) -> RecordSet + 'a;

/// One record set per location with healthy addresses, one per location of the tenant whose
/// addresses are all down answering the nearest location up (Route53 would otherwise send
/// its clients to the default), plus the default location answering the `default_geo`
/// addresses (or every address when those are all down). A location whose addresses differ
/// in weight is an alias of its weighted name, where one weighted set per endpoint answers;
/// those come with the name they live at (`Some`), the rest live at the tenant's name.
fn geo_sets(
    family: &[&PublishedAddress],
    default_geo: Option<&str>,
    geos: &[String],
    set: &MakeSet,
) -> Vec<(Option<String>, RecordSet)> {
    let mut by_geo: BTreeMap<&str, Vec<&PublishedAddress>> = BTreeMap::new();
    for a in family {
        if let Some(geo) = a.endpoint.labels.get("geo") {
            by_geo.entry(geo).or_default().push(a);
        }
    }
    let mut out = Vec::new();
    let mut answer = |id: &str, location: Location, list: &[&PublishedAddress]| {
        let routing = Routing::Geo(location);
        if list.windows(2).all(|w| w[0].weight == w[1].weight) {
            out.push((None, set(Some(id.to_owned()), routing, list)));
            return;
        }
        let mut alias = set(Some(id.to_owned()), routing, &[]);
        let weighted = weighted_name(id, &alias.name);
        (alias.ttl, alias.alias) = (0, Some(Alias::here(&weighted)));
        for a in list {
            let mut one = set(
                Some(a.endpoint.name.to_string()),
                Routing::Weighted(i64::from(a.weight)),
                &[*a],
            );
            one.name.clone_from(&weighted);
            out.push((Some(weighted.clone()), one));
        }
        out.push((None, alias));
    };
    for (geo, list) in &by_geo {
        answer(geo, Location::from_label(geo), list);
    }
    for geo in geos.iter().filter(|g| !by_geo.contains_key(g.as_str())) {
        if let Some(near) = ho_engine::sink::geo::stand_in(geo, by_geo.keys().copied()) {
            answer(geo, Location::from_label(geo), &by_geo[near]);
        }
    }
    let fallback = default_geo
        .and_then(|g| by_geo.get(g))
        .map_or(family, Vec::as_slice);
    answer(GEO_DEFAULT_ID, Location::Default, fallback);
    out
}

#[cfg(test)]
#[path = "records_tests.rs"]
mod tests;
