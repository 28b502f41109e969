//! `answer = "cname"` tenants: a CNAME to one host below the apex, picked by the policy per
//! query; the addresses at the apex, which cannot hold a CNAME; one CNAME in a transfer.

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{RData, RecordType};
use ho_config::RoutingPolicy;
use ho_engine::snapshot::{Answer, PublishedAddress, TenantSnapshot};

use super::tests::{ask, config};
use super::Authority;
use crate::server::build;
use crate::server::records::Records;

/// An address of host `host` (tier `priority`, weight `weight`).
fn of_host(host: &str, ip: &str, priority: u32, weight: u32) -> PublishedAddress {
    PublishedAddress::of_host(host, ip.parse().unwrap(), priority, weight)
}

fn authority(
    policy: RoutingPolicy,
    domains: &[&str],
    addresses: Vec<PublishedAddress>,
) -> Authority {
    let mut records = Records::default();
    records.publish(&TenantSnapshot {
        answer: Answer::Cname,
        ..TenantSnapshot::healthy("t", domains, policy, addresses)
    });
    build::authority(&config(), records).unwrap()
}

fn cname(m: &Message) -> Option<String> {
    m.answers.iter().find_map(|r| match &r.data {
        RData::CNAME(c) => Some(c.0.to_ascii()),
        _ => None,
    })
}

fn two_hosts() -> Vec<PublishedAddress> {
    vec![
        of_host("lb-a.elb.example.net", "192.0.2.1", 0, 1),
        of_host("lb-a.elb.example.net", "192.0.2.2", 0, 1),
        of_host("lb-b.elb.example.net", "192.0.2.3", 1, 1),
    ]
}

/// `all` rotates the hosts as it rotates addresses: each answer one CNAME, both hosts in turn.
#[test]
fn a_name_answers_one_cname_for_every_type_and_nothing_beside_it() {
    let a = authority(RoutingPolicy::All, &["api.example.org"], two_hosts());
    let mut seen = std::collections::BTreeSet::new();
    for qtype in [
        RecordType::A,
        RecordType::AAAA,
        RecordType::TXT,
        RecordType::CNAME,
    ] {
        let m = ask(&a, "api.example.org.", qtype);
        assert_eq!(m.metadata.response_code, ResponseCode::NoError);
        assert_eq!(m.answers.len(), 1, "{qtype}: one CNAME alone: {m:?}");
        assert_eq!(m.answers[0].name.to_ascii(), "api.example.org.");
        seen.insert(cname(&m).unwrap());
    }
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        ["lb-a.elb.example.net.", "lb-b.elb.example.net."]
    );
}

/// A transfer holds one CNAME per name: the first host by tier, weight and name.
#[test]
fn a_transfer_carries_the_first_host() {
    let mut cfg = config();
    cfg.transfer = Some(crate::server::config::TransferConfig {
        notify: Vec::new(),
        allow: vec!["127.0.0.0/8".into()],
        tsig: None,
    });
    let mut records = Records::default();
    records.publish(&TenantSnapshot {
        answer: Answer::Cname,
        ..TenantSnapshot::healthy("t", &["api.example.org"], RoutingPolicy::All, two_hosts())
    });
    let a = build::authority(&cfg, records).unwrap();
    let Some(super::Transfer::Answer(messages)) = a.transfer(
        &super::tests::query("example.org.", RecordType::AXFR, None),
        "127.0.0.1".parse().unwrap(),
    ) else {
        panic!("transferred")
    };
    let records: Vec<String> = messages
        .iter()
        .flat_map(|m| Message::from_vec(m).unwrap().answers)
        .filter(|r| r.name.to_ascii() == "api.example.org.")
        .map(|r| r.data.to_string())
        .collect();
    assert_eq!(records, ["lb-a.elb.example.net."]);
}

#[test]
fn the_apex_answers_the_hosts_addresses() {
    let a = authority(RoutingPolicy::All, &["example.org"], two_hosts());
    let m = ask(&a, "example.org.", RecordType::A);
    assert_eq!(cname(&m), None, "no CNAME at the apex: {m:?}");
    assert_eq!(m.answers.len(), 3);
}

#[test]
fn a_wildcard_answers_the_cname_as_the_name_asked() {
    let a = authority(RoutingPolicy::All, &["*.apps.example.org"], two_hosts());
    let m = ask(&a, "shop.apps.example.org.", RecordType::A);
    assert_eq!(cname(&m).as_deref(), Some("lb-a.elb.example.net."));
    assert_eq!(m.answers[0].name.to_ascii(), "shop.apps.example.org.");
}

#[test]
fn weighted_draws_one_host_per_query_by_weight() {
    let a = authority(
        RoutingPolicy::Weighted,
        &["api.example.org"],
        vec![
            of_host("heavy.example.net", "192.0.2.1", 0, 30),
            of_host("light.example.net", "192.0.2.2", 0, 10),
        ],
    );
    let mut heavy = 0;
    for _ in 0..2000 {
        let m = ask(&a, "api.example.org.", RecordType::A);
        assert_eq!(m.answers.len(), 1);
        match cname(&m).as_deref() {
            Some("heavy.example.net.") => heavy += 1,
            Some("light.example.net.") => {}
            other => panic!("{other:?}"),
        }
    }
    // 3:1 expected (1,500 of 2,000); 1,400-1,600 is over 6 standard deviations wide.
    assert!((1400..1600).contains(&heavy), "{heavy}");
}

#[test]
fn nothing_published_is_nodata_not_a_cname() {
    let a = authority(RoutingPolicy::All, &["api.example.org"], Vec::new());
    let m = ask(&a, "api.example.org.", RecordType::A);
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert!(m.answers.is_empty());
}
