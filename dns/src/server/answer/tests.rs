use std::collections::BTreeMap;
use std::net::IpAddr;

use hickory_proto::op::{Edns, Message, Query, ResponseCode};
use hickory_proto::rr::rdata::opt::{ClientSubnet, EdnsCode, EdnsOption};
use hickory_proto::rr::{Name, RData, RecordType};
use ho_config::RoutingPolicy;
use ho_engine::snapshot::{PublishedAddress, TenantSnapshot};

use super::Authority;
use crate::server::build;
use crate::server::config::{DnsServerConfig, GeoConfig, SoaConfig};
use crate::server::records::Records;

pub(super) fn config() -> DnsServerConfig {
    DnsServerConfig {
        listen: vec!["127.0.0.1:0".parse().unwrap()],
        zones: vec!["example.org".into()],
        soa: SoaConfig::default(),
        nameservers: Vec::new(),
        answers: 1,
        geo: GeoConfig {
            networks: BTreeMap::from([("10.1.0.0/16".into(), "IE".into())]),
            geoip_db: None,
        },
        max_udp_payload: 1232,
        rate_limit: None,
        cookies: Default::default(),
        dnssec: None,
        transfer: None,
        reports: None,
        acme: None,
        static_records: None,
        xdp: None,
    }
}

pub(super) fn address(a: &str, weight: u32, geo: &str) -> PublishedAddress {
    let labels = [("geo".to_string(), geo.to_string())].into();
    PublishedAddress::of(a, a.parse().unwrap(), weight, labels)
}

fn authority(policy: RoutingPolicy, addresses: Vec<PublishedAddress>) -> Authority {
    let mut records = Records::default();
    records.follow_plan([("pending", &["later.example.org".to_owned()][..])]);
    let snapshot = TenantSnapshot {
        default_geo: Some("US".into()),
        ..TenantSnapshot::healthy("t", &["api.a.example.org"], policy, addresses)
    };
    records.publish(&snapshot);
    build::authority(&config(), records).unwrap()
}

fn three() -> Vec<PublishedAddress> {
    vec![
        address("192.0.2.1", 1, "US"),
        address("192.0.2.2", 1, "US"),
        address("192.0.2.3", 1, "IE"),
    ]
}

pub(super) fn query(name: &str, qtype: RecordType, edns: Option<Edns>) -> Vec<u8> {
    let mut m = Message::query();
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    if let Some(e) = edns {
        m.set_edns(e);
    }
    m.to_vec().unwrap()
}

pub(super) fn ask(a: &Authority, name: &str, qtype: RecordType) -> Message {
    ask_from(a, name, qtype, None, "192.0.2.200")
}

fn ask_from(
    a: &Authority,
    name: &str,
    qtype: RecordType,
    edns: Option<Edns>,
    client: &str,
) -> Message {
    let reply = a
        .answer(&query(name, qtype, edns), client.parse().unwrap(), true)
        .unwrap();
    Message::from_vec(&reply.bytes).unwrap()
}

fn addresses(m: &Message) -> Vec<IpAddr> {
    m.answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            RData::AAAA(a) => Some(IpAddr::V6(a.0)),
            _ => None,
        })
        .collect()
}

/// EDNS carrying the client subnet 10.1.7.0/24 (a client in IE by the test networks).
fn irish_subnet() -> Edns {
    let mut edns = Edns::new();
    edns.options_mut()
        .insert(EdnsOption::Subnet(ClientSubnet::new(
            "10.1.7.0".parse().unwrap(),
            24,
            0,
        )));
    edns
}

/// The client subnet option a response echoes.
fn echoed_subnet(m: &Message) -> ClientSubnet {
    match m.edns.as_ref().unwrap().option(EdnsCode::Subnet) {
        Some(EdnsOption::Subnet(echo)) => *echo,
        other => panic!("client subnet not echoed: {other:?}"),
    }
}

/// Asks 2,000 times from `client`; how often 192.0.2.1 (weight 30 against 10) is the one
/// address answered. Every answer holds exactly one address, never `never`.
fn heavy_count(a: &Authority, client: &str, never: Option<&str>) -> usize {
    let heavy: IpAddr = "192.0.2.1".parse().unwrap();
    let never: Option<IpAddr> = never.map(|n| n.parse().unwrap());
    let mut count = 0;
    for _ in 0..2000 {
        let got = addresses(&ask_from(
            a,
            "api.a.example.org.",
            RecordType::A,
            None,
            client,
        ));
        assert_eq!(got.len(), 1, "answers = 1");
        assert_ne!(Some(got[0]), never, "never another geo");
        count += usize::from(got[0] == heavy);
    }
    // 3:1 means 1,500 of 2,000 expected; 1,350..1,650 is more than 7 standard deviations.
    assert!(
        (1350..=1650).contains(&count),
        "{count} of 2000 for weight 30 against 10"
    );
    count
}

fn has_soa_authority(m: &Message) -> bool {
    m.authorities
        .iter()
        .any(|r| r.record_type() == RecordType::SOA)
}

#[test]
fn all_answers_every_address_authoritatively_in_a_rotating_order() {
    let a = authority(RoutingPolicy::All, three());
    let first = ask(&a, "API.a.example.org.", RecordType::A);
    assert_eq!(first.metadata.response_code, ResponseCode::NoError);
    assert!(first.metadata.authoritative);
    assert!(first.metadata.recursion_desired && !first.metadata.recursion_available);
    assert_eq!(
        first.answers[0].name.to_ascii(),
        "API.a.example.org.",
        "case kept (0x20)"
    );
    assert_eq!(first.answers[0].ttl, 30);
    let mut firsts = std::collections::BTreeSet::new();
    for _ in 0..3 {
        let m = ask(&a, "api.a.example.org.", RecordType::A);
        let mut got = addresses(&m);
        firsts.insert(got[0]);
        got.sort();
        assert_eq!(got.len(), 3);
    }
    assert_eq!(firsts.len(), 3, "each address comes first in turn");
}

#[test]
fn nodata_nxdomain_and_empty_non_terminals_carry_the_soa() {
    let a = authority(RoutingPolicy::All, three());
    let nodata = ask(&a, "api.a.example.org.", RecordType::AAAA);
    assert_eq!(nodata.metadata.response_code, ResponseCode::NoError);
    assert!(nodata.answers.is_empty() && has_soa_authority(&nodata));
    let ent = ask(&a, "a.example.org.", RecordType::A);
    assert_eq!(
        ent.metadata.response_code,
        ResponseCode::NoError,
        "parent of a domain"
    );
    assert!(ent.answers.is_empty() && has_soa_authority(&ent));
    let nx = ask(&a, "nope.example.org.", RecordType::A);
    assert_eq!(nx.metadata.response_code, ResponseCode::NXDomain);
    assert!(nx.metadata.authoritative && has_soa_authority(&nx));
    let apex = ask(&a, "example.org.", RecordType::A);
    assert_eq!(
        apex.metadata.response_code,
        ResponseCode::NoError,
        "the apex exists"
    );
}

#[test]
fn the_apex_has_soa_and_ns() {
    let a = authority(RoutingPolicy::All, three());
    let soa = ask(&a, "example.org.", RecordType::SOA);
    let RData::SOA(s) = &soa.answers[0].data else {
        panic!("SOA answered")
    };
    assert_eq!(s.mname.to_ascii(), "ns1.example.org.");
    assert_eq!(s.minimum, 5);
    let ns = ask(&a, "example.org.", RecordType::NS);
    assert!(matches!(&ns.answers[0].data, RData::NS(n) if n.0.to_ascii() == "ns1.example.org."));
}

#[test]
fn outside_the_zones_transfers_and_other_classes_are_refused() {
    let a = authority(RoutingPolicy::All, three());
    let other = ask(&a, "example.com.", RecordType::A);
    assert_eq!(other.metadata.response_code, ResponseCode::Refused);
    assert!(!other.metadata.authoritative && other.answers.is_empty());
    let axfr = ask(&a, "example.org.", RecordType::AXFR);
    assert_eq!(axfr.metadata.response_code, ResponseCode::Refused);
}

#[test]
fn a_domain_before_its_first_snapshot_is_servfail_never_nxdomain() {
    let a = authority(RoutingPolicy::All, three());
    let m = ask(&a, "later.example.org.", RecordType::A);
    assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
}

#[test]
fn a_big_answer_over_udp_is_truncated_and_whole_over_tcp() {
    // 50 A records: ~850 bytes, over 512 (no EDNS) but under the server's 1232.
    let many = (1..=50).map(|i| address(&format!("10.0.0.{i}"), 1, "US"));
    let a = authority(RoutingPolicy::All, many.collect());
    let udp = ask(&a, "api.a.example.org.", RecordType::A);
    assert!(udp.metadata.truncation && udp.answers.is_empty());
    let tcp = a
        .answer(
            &query("api.a.example.org.", RecordType::A, None),
            "192.0.2.9".parse().unwrap(),
            false,
        )
        .unwrap();
    let tcp = Message::from_vec(&tcp.bytes).unwrap();
    assert!(!tcp.metadata.truncation);
    assert_eq!(tcp.answers.len(), 50);
    let mut edns = Edns::new();
    edns.set_max_payload(4096);
    let big = ask_from(
        &a,
        "api.a.example.org.",
        RecordType::A,
        Some(edns),
        "192.0.2.9",
    );
    assert!(!big.metadata.truncation);
    assert_eq!(big.answers.len(), 50, "EDNS lifts the 512-byte limit");
}

#[test]
fn weighted_answers_follow_the_weights() {
    let a = authority(
        RoutingPolicy::Weighted,
        vec![
            address("192.0.2.1", 30, "US"),
            address("192.0.2.2", 10, "US"),
        ],
    );
    heavy_count(&a, "192.0.2.200", None);
}

#[test]
fn geo_answers_by_client_subnet_then_source_then_default() {
    let a = authority(RoutingPolicy::Geo, three());
    let by_subnet = ask_from(
        &a,
        "api.a.example.org.",
        RecordType::A,
        Some(irish_subnet()),
        "192.0.2.50",
    );
    assert_eq!(
        addresses(&by_subnet),
        vec!["192.0.2.3".parse::<IpAddr>().unwrap()]
    );
    let echo = echoed_subnet(&by_subnet);
    assert_eq!((echo.source_prefix(), echo.scope_prefix()), (24, 24));
    let by_source = ask_from(&a, "api.a.example.org.", RecordType::A, None, "10.1.0.9");
    assert_eq!(
        addresses(&by_source),
        vec!["192.0.2.3".parse::<IpAddr>().unwrap()]
    );
    let mut fallback = addresses(&ask(&a, "api.a.example.org.", RecordType::A));
    fallback.sort();
    assert_eq!(
        fallback,
        vec![
            "192.0.2.1".parse::<IpAddr>().unwrap(),
            "192.0.2.2".parse().unwrap()
        ],
        "unknown location: default_geo US"
    );
}

#[test]
fn non_geo_answers_echo_the_subnet_with_scope_zero() {
    let a = authority(RoutingPolicy::All, three());
    let m = ask_from(
        &a,
        "api.a.example.org.",
        RecordType::A,
        Some(irish_subnet()),
        "192.0.2.50",
    );
    assert_eq!(echoed_subnet(&m).scope_prefix(), 0);
}

#[test]
fn an_unknown_edns_version_is_badvers_and_garbage_is_formerr() {
    let a = authority(RoutingPolicy::All, three());
    let mut edns = Edns::new();
    edns.set_version(1);
    let m = ask_from(
        &a,
        "api.a.example.org.",
        RecordType::A,
        Some(edns),
        "192.0.2.9",
    );
    // BADVERS and BADSIG share code 16; the parser names it BADSIG.
    assert_eq!(u16::from(m.metadata.response_code), 16);
    let mut garbage = query("api.a.example.org.", RecordType::A, None);
    garbage.truncate(14);
    let reply = a
        .answer(&garbage, "192.0.2.9".parse().unwrap(), true)
        .unwrap();
    assert_eq!(reply.rcode, "FORMERR");
    assert!(a
        .answer(&garbage[..5], "192.0.2.9".parse().unwrap(), true)
        .is_none());
}

#[test]
fn a_label_holding_a_dot_matches_no_domain() {
    let a = authority(RoutingPolicy::All, three());
    // One label "api.a" then "example.org": not the name api.a.example.org.
    let name = Name::from_labels(vec![&b"api.a"[..], b"example", b"org"]).unwrap();
    let mut m = Message::query();
    m.add_query(Query::query(name, RecordType::A));
    let reply = a
        .answer(&m.to_vec().unwrap(), "192.0.2.9".parse().unwrap(), true)
        .unwrap();
    let reply = Message::from_vec(&reply.bytes).unwrap();
    assert_eq!(reply.metadata.response_code, ResponseCode::NXDomain);
}

#[test]
fn weights_inside_a_geo_draw_one_address_of_the_clients_location() {
    let a = authority(
        RoutingPolicy::Geo,
        vec![
            address("192.0.2.1", 30, "IE"),
            address("192.0.2.2", 10, "IE"),
            address("192.0.2.3", 10, "US"),
        ],
    );
    heavy_count(&a, "10.1.0.9", Some("192.0.2.3"));
}

/// A client of a country the tenant has no location for gets its continent's location
/// (`GEO-EU`, as Kuadrant writes continents) before the nearest one or the default.
#[test]
fn clients_of_a_country_without_a_location_get_their_continents() {
    let mut records = Records::default();
    records.publish(&TenantSnapshot {
        default_geo: Some("US".into()),
        ..TenantSnapshot::healthy(
            "t",
            &["api.a.example.org"],
            RoutingPolicy::Geo,
            vec![
                address("192.0.2.1", 1, "US"),
                address("192.0.2.2", 1, "GEO-EU"),
            ],
        )
    });
    let a = build::authority(&config(), records).unwrap();
    let irish = ask_from(&a, "api.a.example.org.", RecordType::A, None, "10.1.0.9");
    assert_eq!(
        addresses(&irish),
        vec!["192.0.2.2".parse::<IpAddr>().unwrap()]
    );
    let unknown = ask(&a, "api.a.example.org.", RecordType::A);
    assert_eq!(
        addresses(&unknown),
        vec!["192.0.2.1".parse::<IpAddr>().unwrap()],
        "no location: default_geo"
    );
}

/// A `geo` tenant with US and GB up (IE, one of its locations, down), `default_geo` US,
/// answered with `cfg`.
fn us_and_gb_up(cfg: &DnsServerConfig) -> Authority {
    let mut records = Records::default();
    let snapshot = TenantSnapshot {
        default_geo: Some("US".into()),
        geos: vec!["GB".into(), "IE".into(), "US".into()],
        votes: None,
        ..TenantSnapshot::healthy(
            "t",
            &["api.a.example.org"],
            RoutingPolicy::Geo,
            vec![address("192.0.2.1", 1, "US"), address("192.0.2.2", 1, "GB")],
        )
    };
    records.publish(&snapshot);
    build::authority(cfg, records).unwrap()
}

#[test]
fn clients_of_a_location_that_is_down_get_the_nearest_one_up() {
    let a = us_and_gb_up(&config());
    let irish = ask_from(&a, "api.a.example.org.", RecordType::A, None, "10.1.0.9");
    assert_eq!(
        addresses(&irish),
        vec!["192.0.2.2".parse::<IpAddr>().unwrap()],
        "IE is down: GB, not default US"
    );
    let unknown = ask(&a, "api.a.example.org.", RecordType::A);
    assert_eq!(
        addresses(&unknown),
        vec!["192.0.2.1".parse::<IpAddr>().unwrap()],
        "no location: default_geo"
    );
}

#[test]
fn clients_of_a_place_without_a_gateway_get_the_nearest_location_up() {
    let mut cfg = config();
    cfg.geo.networks.insert("10.3.0.0/16".into(), "PL".into());
    cfg.geo
        .networks
        .insert("10.4.0.0/16".into(), "eu-central".into());
    let a = us_and_gb_up(&cfg);
    let polish = ask_from(&a, "api.a.example.org.", RecordType::A, None, "10.3.0.9");
    assert_eq!(
        addresses(&polish),
        vec!["192.0.2.2".parse::<IpAddr>().unwrap()],
        "no gateway in PL: GB is nearer than US (default_geo)"
    );
    let custom = ask_from(&a, "api.a.example.org.", RecordType::A, None, "10.4.0.9");
    assert_eq!(
        addresses(&custom),
        vec!["192.0.2.1".parse::<IpAddr>().unwrap()],
        "a custom label has no coordinates: default_geo"
    );
}

#[test]
fn a_transfer_waits_while_a_name_awaits_its_first_snapshot() {
    use super::Transfer;
    let mut cfg = config();
    cfg.transfer = Some(crate::server::config::TransferConfig {
        notify: Vec::new(),
        allow: vec!["192.0.2.0/24".into()],
        tsig: None,
    });
    let mut records = Records::default();
    records.follow_plan([("t", &["api.a.example.org".to_owned()][..])]);
    let a = build::authority(&cfg, records).unwrap();
    let axfr = query("example.org.", RecordType::AXFR, None);
    let client = "192.0.2.53".parse().unwrap();
    assert!(matches!(
        a.transfer(&axfr, client),
        Some(Transfer::NotReady(_))
    ));
    a.publish(&TenantSnapshot::healthy(
        "t",
        &["api.a.example.org"],
        RoutingPolicy::All,
        three(),
    ));
    let Some(Transfer::Answer(messages)) = a.transfer(&axfr, client) else {
        panic!("the zone is whole: transferred");
    };
    let records: usize = messages
        .iter()
        .map(|m| Message::from_vec(m).unwrap().answers.len())
        .sum();
    assert_eq!(records, 6, "SOA, NS, three addresses, SOA");
    let outsider = "198.51.100.1".parse().unwrap();
    let Some(Transfer::Answer(refused)) = a.transfer(&axfr, outsider) else {
        panic!("answered");
    };
    let refused = Message::from_vec(&refused[0]).unwrap();
    assert_eq!(refused.metadata.response_code, ResponseCode::Refused);
    assert!(a
        .transfer(&query("example.org.", RecordType::A, None), client)
        .is_none());
}

/// A zone handing `cloud.example.org` to other name servers, as a parent zone does while
/// k8gb's CoreDNS serves it, with a tenant published below the delegation.
fn delegating() -> Authority {
    let mut records = Records::default();
    let snapshot = TenantSnapshot::healthy(
        "t",
        &["app.cloud.example.org", "www.example.org"],
        RoutingPolicy::All,
        three(),
    );
    records.publish(&snapshot);
    let config = DnsServerConfig {
        static_records: Some(
            "cloud 300 NS gslb-ns-eu.example.org.\ncloud 300 NS ns.elsewhere.test.\n\
             gslb-ns-eu 300 A 192.0.2.53\n"
                .into(),
        ),
        ..config()
    };
    build::authority(&config, records).unwrap()
}

#[test]
fn names_at_and_below_a_delegation_are_referred_with_glue() {
    let a = delegating();
    for (name, qtype) in [
        ("app.cloud.example.org.", RecordType::A),
        ("cloud.example.org.", RecordType::A),
        ("deep.app.cloud.example.org.", RecordType::AAAA),
        ("cloud.example.org.", RecordType::NS),
    ] {
        let m = ask(&a, name, qtype);
        assert_eq!(m.metadata.response_code, ResponseCode::NoError, "{name}");
        assert!(
            !m.metadata.authoritative,
            "{name}: a referral is not authoritative"
        );
        assert!(m.answers.is_empty(), "{name}: {:?}", m.answers);
        let mut servers: Vec<String> = (m.authorities.iter())
            .filter_map(|r| match &r.data {
                RData::NS(ns) => Some(ns.0.to_ascii()),
                _ => None,
            })
            .collect();
        servers.sort();
        assert_eq!(servers, ["gslb-ns-eu.example.org.", "ns.elsewhere.test."]);
        let glue: Vec<String> = m.additionals.iter().map(|r| r.data.to_string()).collect();
        assert_eq!(
            glue,
            ["192.0.2.53"],
            "{name}: the in-zone server's address only"
        );
    }
    // Beside the delegation the zone answers as before.
    let m = ask(&a, "www.example.org.", RecordType::A);
    assert!(m.metadata.authoritative);
    assert_eq!(addresses(&m).len(), 3);
    // DS at the cut is the parent's own: no data, authoritatively.
    let m = ask(&a, "cloud.example.org.", RecordType::DS);
    assert!(m.metadata.authoritative && m.answers.is_empty());
}
