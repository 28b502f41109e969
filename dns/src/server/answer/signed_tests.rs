//! Signed answers (`dnssec`), each signature checked against the published DNSKEY with
//! hickory's verifier; `tests/integration/dns_server_dnssec.rs` validates them with BIND's
//! `delv` from a trust anchor.

use std::time::SystemTime;

use hickory_proto::dnssec::rdata::{DNSSECRData, DNSKEY, RRSIG};
use hickory_proto::dnssec::{Algorithm, Verifier};
use hickory_proto::op::{Edns, Message, ResponseCode};
use hickory_proto::rr::{DNSClass, RData, Record, RecordType};
use ho_config::RoutingPolicy;
use ho_engine::snapshot::TenantSnapshot;

use super::tests::{address, config, query};
use super::Authority;
use crate::server::build;
use crate::server::config::DnssecConfig;
use crate::server::dnssec::keys::{generate, NewKey, Timing};
use crate::server::records::Records;

/// An authority for example.org signed with `keys` (algorithm, KSK?, times), with
/// `api.a.example.org` answering `ips`; the keys' tags in order.
fn signed_with(
    keys: &[(Algorithm, bool, Timing)],
    ips: &[&str],
) -> (Authority, tempfile::TempDir, Vec<u16>) {
    let dir = tempfile::tempdir().unwrap();
    let tags = keys
        .iter()
        .map(|(algorithm, ksk, timing)| {
            let key = NewKey {
                zone: "example.org".into(),
                algorithm: *algorithm,
                ksk: *ksk,
                timing: *timing,
            };
            let path = generate(&key, dir.path(), SystemTime::now()).unwrap();
            crate::server::dnssec::keys::read_key(&path).unwrap().tag
        })
        .collect();
    let mut cfg = config();
    cfg.dnssec = Some(DnssecConfig {
        keys: dir.path().to_owned(),
        dnskey_ttl: 3600,
    });
    let mut records = Records::default();
    records.publish(&TenantSnapshot::healthy(
        "t",
        &["api.a.example.org"],
        RoutingPolicy::All,
        ips.iter().map(|ip| address(ip, 1, "US")).collect(),
    ));
    (build::authority(&cfg, records).unwrap(), dir, tags)
}

/// An authority signed by a KSK (ECDSA P-256) and a ZSK (Ed25519), with
/// `api.a.example.org` answering two IPv4 addresses.
fn signed() -> (Authority, tempfile::TempDir) {
    let keys = [
        (Algorithm::ECDSAP256SHA256, true, Timing::default()),
        (Algorithm::ED25519, false, Timing::default()),
    ];
    let (a, dir, _) = signed_with(&keys, &["192.0.2.1", "192.0.2.2"]);
    (a, dir)
}

fn ask(a: &Authority, name: &str, qtype: RecordType, dnssec_ok: bool) -> Message {
    let mut edns = Edns::new();
    edns.set_dnssec_ok(dnssec_ok);
    let reply = a
        .answer(
            &query(name, qtype, Some(edns)),
            "192.0.2.9".parse().unwrap(),
            false,
        )
        .unwrap();
    Message::from_vec(&reply.bytes).unwrap()
}

fn dnskeys(a: &Authority) -> Vec<DNSKEY> {
    ask(a, "example.org.", RecordType::DNSKEY, true)
        .answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::DNSSEC(DNSSECRData::DNSKEY(k)) => Some(k.clone()),
            _ => None,
        })
        .collect()
}

/// Every RRset of `section` has an RRSIG that one of `keys` verifies; the types signed.
fn verified(section: &[Record], keys: &[DNSKEY]) -> Vec<RecordType> {
    let mut covered = Vec::new();
    for r in section {
        let RData::DNSSEC(DNSSECRData::RRSIG(sig)) = &r.data else {
            continue;
        };
        let sig: &RRSIG = sig;
        let rrset = section
            .iter()
            .filter(|x| x.record_type() == sig.input().type_covered && x.name == r.name);
        let ok = keys.iter().any(|k| {
            k.calculate_key_tag().unwrap() == sig.input().key_tag
                && k.verify_rrsig(&r.name, DNSClass::IN, sig, rrset.clone())
                    .is_ok()
        });
        assert!(ok, "the RRSIG over {:?} verifies", sig.input().type_covered);
        covered.push(sig.input().type_covered);
    }
    covered
}

#[test]
fn answers_with_the_do_bit_carry_signatures_that_verify() {
    let (a, _dir) = signed();
    let keys = dnskeys(&a);
    assert_eq!(keys.len(), 2, "both keys published");
    let reply = ask(&a, "api.a.example.org.", RecordType::A, true);
    assert!(reply.edns.as_ref().unwrap().flags().dnssec_ok, "DO copied");
    assert_eq!(verified(&reply.answers, &keys), vec![RecordType::A]);
    let soa = ask(&a, "example.org.", RecordType::SOA, true);
    assert_eq!(verified(&soa.answers, &keys), vec![RecordType::SOA]);
    let ns = ask(&a, "example.org.", RecordType::NS, true);
    assert_eq!(verified(&ns.answers, &keys), vec![RecordType::NS]);
    let dnskey = ask(&a, "example.org.", RecordType::DNSKEY, true);
    let sigs: Vec<u16> = dnskey
        .answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::DNSSEC(DNSSECRData::RRSIG(s)) => Some(s.input().key_tag),
            _ => None,
        })
        .collect();
    let ksk = keys.iter().find(|k| k.secure_entry_point()).unwrap();
    assert_eq!(
        sigs,
        vec![ksk.calculate_key_tag().unwrap()],
        "the KSK signs DNSKEY"
    );
    assert_eq!(verified(&dnskey.answers, &keys), vec![RecordType::DNSKEY]);
    let plain = ask(&a, "api.a.example.org.", RecordType::A, false);
    assert_eq!(plain.answers.len(), 2, "no DO bit: no signatures");
}

#[test]
fn a_name_that_does_not_exist_is_denied_compactly() {
    let (a, _dir) = signed();
    let keys = dnskeys(&a);
    let reply = ask(&a, "nope.example.org.", RecordType::A, true);
    assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
    assert!(reply.answers.is_empty());
    assert_eq!(
        verified(&reply.authorities, &keys),
        vec![RecordType::SOA, RecordType::NSEC]
    );
    let nsec = reply
        .authorities
        .iter()
        .find_map(|r| match &r.data {
            RData::DNSSEC(DNSSECRData::NSEC(n)) => Some((r.name.clone(), n.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!(nsec.0.to_ascii(), "nope.example.org.");
    assert_eq!(
        nsec.1.next_domain_name().to_ascii(),
        "\\000.nope.example.org."
    );
    let types: Vec<RecordType> = nsec.1.type_bit_maps().collect();
    assert!(types.contains(&RecordType::from(128)), "NXNAME: {types:?}");
    let unsigned = ask(&a, "nope.example.org.", RecordType::A, false);
    assert_eq!(unsigned.metadata.response_code, ResponseCode::NXDomain);
}

/// The types the NSEC of a negative answer lists.
fn nsec_types(reply: &Message) -> Vec<RecordType> {
    reply
        .authorities
        .iter()
        .find_map(|r| match &r.data {
            RData::DNSSEC(DNSSECRData::NSEC(n)) => Some(n.type_bit_maps().collect()),
            _ => None,
        })
        .expect("an NSEC in the authority section")
}

#[test]
fn a_type_the_name_lacks_lists_the_types_it_has() {
    let (a, _dir) = signed();
    let keys = dnskeys(&a);
    let reply = ask(&a, "api.a.example.org.", RecordType::AAAA, true);
    assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
    verified(&reply.authorities, &keys);
    assert_eq!(
        nsec_types(&reply),
        vec![RecordType::A, RecordType::RRSIG, RecordType::NSEC],
        "A exists there, AAAA does not"
    );
    let types = nsec_types(&ask(&a, "example.org.", RecordType::A, true));
    for t in [RecordType::SOA, RecordType::NS, RecordType::DNSKEY] {
        assert!(types.contains(&t), "{t} at the apex: {types:?}");
    }
}

/// Kept answers (the packet cache) are made again when the signing keys change: after a
/// ZSK's `Activate` second, the same query is signed by the new key.
#[test]
fn kept_answers_follow_a_change_of_signing_key() {
    let now = ho_engine::clock::since_epoch(SystemTime::now()).as_secs();
    let switch = now + 1000;
    let old = Timing {
        inactive: Some(switch),
        ..Timing::default()
    };
    let new = Timing {
        activate: Some(switch),
        ..Timing::default()
    };
    let keys = [
        (Algorithm::ED25519, true, Timing::default()),
        (Algorithm::ED25519, false, old),
        (Algorithm::ED25519, false, new),
    ];
    let (a, _dir, tags) = signed_with(&keys, &["192.0.2.1"]);
    let signer_of = |m: &Message| -> Vec<u16> {
        m.answers
            .iter()
            .filter_map(|r| match &r.data {
                RData::DNSSEC(DNSSECRData::RRSIG(s)) => Some(s.input().key_tag),
                _ => None,
            })
            .collect()
    };
    for _ in 0..2 {
        let reply = ask(&a, "api.a.example.org.", RecordType::A, true);
        assert_eq!(signer_of(&reply), vec![tags[1]], "the old ZSK signs");
    }
    assert!(a.signer.as_ref().unwrap().refresh(switch));
    let reply = ask(&a, "api.a.example.org.", RecordType::A, true);
    assert_eq!(
        signer_of(&reply),
        vec![tags[2]],
        "the new ZSK signs at once"
    );
}
