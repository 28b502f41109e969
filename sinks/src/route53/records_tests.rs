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
    let d = desired(
        &snapshot(RoutingPolicy::All, TWO),
        RecordStyle::Simple,
        "example.org",
        &AliasZones::default(),
    );
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
        "example.org",
        &AliasZones::default(),
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
    let d = desired(
        &snapshot(RoutingPolicy::Weighted, TWO),
        RecordStyle::Simple,
        "example.org",
        &AliasZones::default(),
    );
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
    let d = desired(
        &s,
        RecordStyle::Simple,
        "example.org",
        &AliasZones::default(),
    );
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
    let d = desired(
        &snapshot(RoutingPolicy::Geo, TWO),
        RecordStyle::Simple,
        "example.org",
        &AliasZones::default(),
    );
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

/// A location whose addresses differ in weight is an alias of its weighted name, where
/// one weighted set per endpoint answers; every location of the tenant has its weighted
/// name (empty when not weighted now, so stale sets there are removed).
#[test]
fn weights_inside_a_location_are_a_record_tree() {
    let mut s = snapshot(
        RoutingPolicy::Geo,
        &[
            ("gw-1", "10.0.0.1", 30, "IE"),
            ("gw-2", "10.0.0.2", 10, "IE"),
            ("gw-3", "10.0.0.3", 5, "DE"),
        ],
    );
    s.geos = vec!["DE".into(), "IE".into()];
    let d = desired(
        &s,
        RecordStyle::Simple,
        "example.org",
        &AliasZones::default(),
    );
    let at_name: Vec<(Option<&str>, Option<&str>)> = d["api.example.org."]
        .iter()
        .map(|r| {
            (
                r.set_id.as_deref(),
                r.alias.as_ref().map(|a| a.name.as_str()),
            )
        })
        .collect();
    assert_eq!(
        at_name,
        [
            (Some("DE"), None),
            (Some("IE"), Some("ie._weighted.api.example.org.")),
            (Some("default"), Some("default._weighted.api.example.org."))
        ]
    );
    assert_eq!(
        summary(&d["ie._weighted.api.example.org."]),
        [
            "A gw-1 Weighted(30) [\"10.0.0.1\"] 30",
            "A gw-2 Weighted(10) [\"10.0.0.2\"] 30"
        ]
    );
    assert_eq!(
        d["default._weighted.api.example.org."].len(),
        2,
        "default_geo IE"
    );
    assert!(
        d["de._weighted.api.example.org."].is_empty(),
        "DE has one weight"
    );
    let ie_alias = &d["api.example.org."][1];
    assert_eq!(
        (ie_alias.ttl, ie_alias.values.len()),
        (0, 0),
        "an alias has neither"
    );
}

#[test]
fn a_continent_label_is_a_continent_location() {
    let s = snapshot(
        RoutingPolicy::Geo,
        &[
            ("gw-1", "10.0.0.1", 1, "GEO-EU"),
            ("gw-2", "10.0.0.2", 1, "IE"),
        ],
    );
    let d = desired(
        &s,
        RecordStyle::Simple,
        "example.org",
        &AliasZones::default(),
    );
    assert_eq!(
        summary(&d["api.example.org."])[0],
        "A GEO-EU Geo(Continent(\"EU\")) [\"10.0.0.1\"] 30"
    );
}

#[test]
fn geo_default_answers_everything_when_the_default_geo_is_down() {
    let d = desired(
        &snapshot(RoutingPolicy::Geo, &[("gw-2", "10.0.0.2", 1, "DE")]),
        RecordStyle::Simple,
        "example.org",
        &AliasZones::default(),
    );
    assert_eq!(d["api.example.org."][1].values, vec!["10.0.0.2"]);
}

#[test]
fn no_address_means_no_sets() {
    let d = desired(
        &snapshot(RoutingPolicy::All, &[]),
        RecordStyle::Multivalue,
        "example.org",
        &AliasZones::default(),
    );
    assert!(d["api.example.org."].is_empty());
}

#[test]
fn the_ownership_record_carries_the_mark_at_its_own_name() {
    let r = owner_record("api.example.org.", "eu-1");
    assert_eq!(r.name, "_health-orchestrator.api.example.org.");
    assert_eq!(
        ho_engine::sink::ownership::owner_in(&r.values[0]),
        Some("eu-1")
    );
}

#[test]
fn a_cname_tenant_holds_one_cname_below_the_apex_and_addresses_at_it() {
    let s = TenantSnapshot {
        answer: ho_engine::snapshot::Answer::Cname,
        ..TenantSnapshot::healthy(
            "t",
            &["api.example.org", "example.org"],
            RoutingPolicy::Failover,
            vec![
                PublishedAddress::of_host("b.elb.example.net", "10.0.0.2".parse().unwrap(), 0, 1),
                PublishedAddress::of_host("a.elb.example.net", "10.0.0.1".parse().unwrap(), 0, 1),
                PublishedAddress::of_host(
                    "a.elb.example.net",
                    "2001:db8::1".parse().unwrap(),
                    0,
                    1,
                ),
            ],
        )
    };
    let d = desired(
        &s,
        RecordStyle::Simple,
        "example.org.",
        &AliasZones::default(),
    );
    assert_eq!(
        summary(&d["api.example.org."]),
        vec!["CNAME - Simple [\"a.elb.example.net.\"] 30"],
        "the first host by name within the tier, alone at the name"
    );
    assert_eq!(d["example.org."].len(), 2, "the apex: A and AAAA");
    assert!(d["example.org."].iter().all(|r| r.alias.is_none()));

    // With the load balancers' hosted zone known, the apex aliases the same host.
    let aliases = AliasZones(
        [
            ("elb.example.net".to_owned(), "ZWIDE".to_owned()),
            ("a.elb.example.net".to_owned(), "ZNARROW".to_owned()),
        ]
        .into(),
    );
    let d = desired(&s, RecordStyle::Simple, "example.org.", &aliases);
    let apex: Vec<(&str, Option<&Alias>, i64)> = d["example.org."]
        .iter()
        .map(|r| (r.rtype.as_str(), r.alias.as_ref(), r.ttl))
        .collect();
    let to = Alias {
        name: "a.elb.example.net.".into(),
        zone: Some("ZNARROW".into()),
    };
    assert_eq!(apex, [("A", Some(&to), 0), ("AAAA", Some(&to), 0)]);
    assert_eq!(aliases.of("b.elb.example.net"), Some("ZWIDE"));
    assert_eq!(aliases.of("elb.example.net.evil.test"), None);
}
