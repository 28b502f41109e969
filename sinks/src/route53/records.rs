//! What a tenant's snapshot looks like as Route53 record sets, and the ownership mark
//! ([`crate::ownership`]) as a record set. Pure: no SDK calls, so every rendering rule is unit-tested.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ho_config::RoutingPolicy;

use super::config::RecordStyle;
use crate::ownership::{mark_text, OWNER_PREFIX, OWNER_TTL};
use ho_engine::snapshot::{PublishedAddress, TenantSnapshot};

/// Set identifier of the geolocation default record set (`CountryCode = "*"`).
pub const GEO_DEFAULT_ID: &str = "default";

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
}

impl Location {
    /// Reads an endpoint's `geo` label (validated with the config).
    pub fn from_label(label: &str) -> Location {
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
    /// `A`, `AAAA` or `TXT`.
    pub rtype: String,
    /// Set identifier of routed record sets.
    pub set_id: Option<String>,
    /// Routing policy.
    pub routing: Routing,
    /// TTL in seconds.
    pub ttl: i64,
    /// Values, sorted.
    pub values: Vec<String>,
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
    }
}

/// The record sets the tenant wants at each of its names (fully qualified); a name mapping
/// to an empty list must hold no A/AAAA record sets.
pub fn desired(snapshot: &TenantSnapshot, style: RecordStyle) -> BTreeMap<String, Vec<RecordSet>> {
    let ttl = i64::try_from(snapshot.ttl.as_secs().max(1)).unwrap_or(i64::MAX);
    let mut out = BTreeMap::new();
    for domain in &snapshot.domains {
        let name = format!("{}.", domain.trim_end_matches('.'));
        let mut sets = Vec::new();
        for (rtype, v6) in [("A", false), ("AAAA", true)] {
            let family: Vec<&PublishedAddress> = snapshot
                .addresses
                .iter()
                .filter(|a| matches!(a.address, IpAddr::V6(_)) == v6)
                .collect();
            if family.is_empty() {
                continue;
            }
            let set = |set_id: Option<String>, routing: Routing, list: &[&PublishedAddress]| {
                let mut values: Vec<String> = list.iter().map(|a| a.address.to_string()).collect();
                values.sort();
                values.dedup();
                RecordSet {
                    name: name.clone(),
                    rtype: rtype.into(),
                    set_id,
                    routing,
                    ttl,
                    values,
                }
            };
            let per_endpoint = |routing: &dyn Fn(&PublishedAddress) -> Routing| {
                family
                    .iter()
                    .map(|a| set(Some(a.endpoint.name.clone()), routing(a), &[*a]))
                    .collect::<Vec<_>>()
            };
            match snapshot.policy {
                RoutingPolicy::All | RoutingPolicy::Failover => match style {
                    RecordStyle::Simple => sets.push(set(None, Routing::Simple, &family)),
                    RecordStyle::Multivalue => sets.extend(per_endpoint(&|_| Routing::MultiValue)),
                },
                RoutingPolicy::Weighted => {
                    sets.extend(per_endpoint(&|a| Routing::Weighted(i64::from(a.weight))));
                }
                RoutingPolicy::Geo => {
                    sets.extend(geo_sets(
                        &family,
                        snapshot.default_geo.as_deref(),
                        &snapshot.geos,
                        &set,
                    ));
                }
            }
        }
        sets.sort();
        out.insert(name, sets);
    }
    out
}

/// Builds one record set of a family: (set identifier, routing, addresses).
type MakeSet<'a> = dyn Fn(Option<String>, Routing, &[&PublishedAddress]) -> RecordSet + 'a;

/// One record set per location with healthy addresses, one per location of the tenant whose
/// addresses are all down answering the nearest location up (Route53 would otherwise send
/// its clients to the default), plus the default location answering the `default_geo`
/// addresses (or every address when those are all down).
fn geo_sets(
    family: &[&PublishedAddress],
    default_geo: Option<&str>,
    geos: &[String],
    set: &MakeSet,
) -> Vec<RecordSet> {
    let mut by_geo: BTreeMap<&str, Vec<&PublishedAddress>> = BTreeMap::new();
    for a in family {
        if let Some(geo) = a.endpoint.labels.get("geo") {
            by_geo.entry(geo).or_default().push(a);
        }
    }
    let mut sets: Vec<RecordSet> = by_geo
        .iter()
        .map(|(geo, list)| {
            set(
                Some((*geo).to_string()),
                Routing::Geo(Location::from_label(geo)),
                list,
            )
        })
        .collect();
    for geo in geos.iter().filter(|g| !by_geo.contains_key(g.as_str())) {
        if let Some(near) = crate::geo_fallback::stand_in(geo, by_geo.keys().copied()) {
            sets.push(set(
                Some(geo.clone()),
                Routing::Geo(Location::from_label(geo)),
                &by_geo[near],
            ));
        }
    }
    let fallback = default_geo
        .and_then(|g| by_geo.get(g))
        .map_or(family, Vec::as_slice);
    sets.push(set(
        Some(GEO_DEFAULT_ID.into()),
        Routing::Geo(Location::Default),
        fallback,
    ));
    sets
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(policy: RoutingPolicy, addrs: &[(&str, &str, u32, &str)]) -> TenantSnapshot {
        let addresses = addrs
            .iter()
            .map(|(name, a, w, geo)| {
                let labels = [("geo".to_string(), geo.to_string())].into();
                PublishedAddress::of(name, a.parse().unwrap(), *w, labels)
            })
            .collect();
        TenantSnapshot {
            default_geo: Some("IE".into()),
            ..TenantSnapshot::healthy("t", &["api.example.org"], policy, addresses)
        }
    }

    fn summary(sets: &[RecordSet]) -> Vec<String> {
        sets.iter()
            .map(|s| {
                format!(
                    "{} {} {:?} {:?} {}",
                    s.rtype,
                    s.set_id.as_deref().unwrap_or("-"),
                    s.routing,
                    s.values,
                    s.ttl
                )
            })
            .collect()
    }

    const TWO: &[(&str, &str, u32, &str)] = &[
        ("gw-2", "10.0.0.2", 10, "DE"),
        ("gw-1", "10.0.0.1", 30, "IE"),
        ("gw-6", "2001:db8::1", 1, "US-CA"),
    ];

    #[test]
    fn simple_style_puts_each_family_in_one_set() {
        let d = desired(&snapshot(RoutingPolicy::All, TWO), RecordStyle::Simple);
        assert_eq!(
            summary(&d["api.example.org."]),
            vec![
                "A - Simple [\"10.0.0.1\", \"10.0.0.2\"] 30",
                "AAAA - Simple [\"2001:db8::1\"] 30"
            ]
        );
    }

    #[test]
    fn multivalue_style_gives_each_endpoint_its_set() {
        let d = desired(
            &snapshot(RoutingPolicy::Failover, TWO),
            RecordStyle::Multivalue,
        );
        assert_eq!(
            summary(&d["api.example.org."]),
            vec![
                "A gw-1 MultiValue [\"10.0.0.1\"] 30",
                "A gw-2 MultiValue [\"10.0.0.2\"] 30",
                "AAAA gw-6 MultiValue [\"2001:db8::1\"] 30"
            ]
        );
    }

    #[test]
    fn weighted_sets_carry_the_weights() {
        let d = desired(&snapshot(RoutingPolicy::Weighted, TWO), RecordStyle::Simple);
        assert_eq!(
            summary(&d["api.example.org."])[..2],
            [
                "A gw-1 Weighted(30) [\"10.0.0.1\"] 30",
                "A gw-2 Weighted(10) [\"10.0.0.2\"] 30"
            ]
        );
    }

    #[test]
    fn a_location_that_is_down_gets_a_set_of_the_nearest_location_up() {
        let mut s = snapshot(RoutingPolicy::Geo, &TWO[..2]);
        s.geos = vec!["DE".into(), "GB".into(), "IE".into()];
        s.addresses.retain(|a| a.address.to_string() != "10.0.0.1");
        let d = desired(&s, RecordStyle::Simple);
        assert_eq!(
            summary(&d["api.example.org."]),
            vec![
                "A DE Geo(Country { country: \"DE\", subdivision: None }) [\"10.0.0.2\"] 30",
                "A GB Geo(Country { country: \"GB\", subdivision: None }) [\"10.0.0.2\"] 30",
                "A IE Geo(Country { country: \"IE\", subdivision: None }) [\"10.0.0.2\"] 30",
                "A default Geo(Default) [\"10.0.0.2\"] 30",
            ],
            "IE (the default_geo) and GB are down: DE, the nearest up, answers both"
        );
    }

    #[test]
    fn geo_sets_per_location_and_a_default_of_the_default_geo() {
        let d = desired(&snapshot(RoutingPolicy::Geo, TWO), RecordStyle::Simple);
        let sets = &d["api.example.org."];
        assert_eq!(
            summary(sets),
            vec![
                "A DE Geo(Country { country: \"DE\", subdivision: None }) [\"10.0.0.2\"] 30",
                "A IE Geo(Country { country: \"IE\", subdivision: None }) [\"10.0.0.1\"] 30",
                "A default Geo(Default) [\"10.0.0.1\"] 30",
                "AAAA US-CA Geo(Country { country: \"US\", subdivision: Some(\"CA\") }) [\"2001:db8::1\"] 30",
                "AAAA default Geo(Default) [\"2001:db8::1\"] 30",
            ]
        );
    }

    #[test]
    fn geo_default_answers_everything_when_the_default_geo_is_down() {
        let d = desired(
            &snapshot(RoutingPolicy::Geo, &[("gw-2", "10.0.0.2", 1, "DE")]),
            RecordStyle::Simple,
        );
        assert_eq!(d["api.example.org."][1].values, vec!["10.0.0.2"]);
    }

    #[test]
    fn no_address_means_no_sets() {
        let d = desired(&snapshot(RoutingPolicy::All, &[]), RecordStyle::Multivalue);
        assert!(d["api.example.org."].is_empty());
    }

    #[test]
    fn the_ownership_record_carries_the_mark_at_its_own_name() {
        let r = owner_record("api.example.org.", "eu-1");
        assert_eq!(r.name, "_health-orchestrator.api.example.org.");
        assert_eq!(crate::ownership::owner_in(&r.values[0]), Some("eu-1"));
    }
}
