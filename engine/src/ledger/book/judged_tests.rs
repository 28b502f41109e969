//! The sorted index against a map of key to tenant set built here from the same generated
//! tenants: every key of the pool (judged or not) answers the same tenants, in the order
//! the tenants were given.

use std::collections::{BTreeMap, BTreeSet};
use std::mem::size_of;
use std::sync::Arc;

use super::{CheckKey, JudgedBy};

/// Tenants `t0`.. each with endpoints whose checks are drawn from a pool of keys, so keys
/// are shared within and across tenants, and some of the pool judges nothing.
fn generated(rng: &mut fastrand::Rng, pool: &[String]) -> Vec<(String, Vec<CheckKey>)> {
    (0..rng.usize(0..8))
        .map(|t| {
            let checks = (0..rng.usize(0..12))
                .map(|_| CheckKey::of(&pool[rng.usize(..pool.len() - 2)]))
                .collect();
            (format!("t{t}"), checks)
        })
        .collect()
}

#[test]
fn every_key_answers_the_tenants_a_map_of_sets_answers_in_generated_plans() {
    let pool: Vec<String> = (0..20)
        .map(|i| format!("http://10.0.{}.{}:80/healthz", i % 3, i))
        .collect();
    for seed in 0..500 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let tenants = generated(&mut rng, &pool);
        let mut model: BTreeMap<CheckKey, BTreeSet<usize>> = BTreeMap::new();
        for (ti, (_, checks)) in tenants.iter().enumerate() {
            for key in checks {
                model.entry(*key).or_default().insert(ti);
            }
        }
        let index =
            JudgedBy::of((tenants.iter()).map(|(t, checks)| (t.as_str(), checks.iter().copied())));
        for text in pool
            .iter()
            .map(String::as_str)
            .chain(["", "http://10.0.0.0:80/"])
        {
            let key = CheckKey::of(text);
            let expected = model.get(&key).map(|ts| {
                ts.iter()
                    .map(|&ti| tenants[ti].0.as_str())
                    .collect::<Vec<_>>()
            });
            let got = index.tenants(key);
            let got: Option<Vec<&str>> = got.as_ref().map(|ts| ts.iter().map(|t| &**t).collect());
            assert_eq!(got, expected, "seed {seed}, key {text:?}");
        }
        // A pair is a key's prefix and a tenant's number: 8 bytes, where a shared copy of
        // the key's text and the number were 24 and the text's own allocation.
        assert_eq!(size_of::<(u32, u32)>(), 8);
        let pairs: usize = model.values().map(BTreeSet::len).sum();
        let ptr = size_of::<Arc<str>>();
        assert_eq!(index.own_bytes(), pairs * 8 + tenants.len() * ptr);
    }
}

/// Two target keys whose prefixes are the same (found by search): the index answers both
/// tenants for either key, and a check of one going down charges only the tenant whose
/// endpoint it judges, the other tenant's name staying answered.
#[test]
fn keys_of_one_prefix_charge_only_the_tenant_they_judge() {
    use std::net::IpAddr;
    use std::time::{Duration, UNIX_EPOCH};

    use super::super::{Book, EndpointPlan, Served, TenantPlan};
    use crate::clock::Timestamp;
    use crate::events::Event;

    let texts = [
        "http://10.0.56.210:80/healthz",
        "http://10.0.94.55:80/healthz",
    ];
    let keys = texts.map(CheckKey::of);
    assert_eq!(keys[0].prefix(), keys[1].prefix(), "the search's pair");
    assert_ne!(keys[0], keys[1]);
    let at = |ms: u64| Timestamp(UNIX_EPOCH + Duration::from_millis(ms));
    let address = |i: usize| texts[i][7..texts[i].len() - 11].parse::<IpAddr>().unwrap();
    let tenant = |i: usize| TenantPlan {
        tenant: format!("t{i}"),
        names: vec![format!("n{i}.example")],
        sinks: vec!["zone".into()],
        observed: BTreeSet::new(),
        shared: BTreeSet::new(),
        vantages: BTreeSet::new(),
        endpoints: vec![EndpointPlan {
            name: format!("e{i}"),
            address: address(i),
            checks: [keys[i]].into(),
            composite: None,
        }],
    };
    let mut book = Book::new(Vec::new());
    book.plan(vec![tenant(0), tenant(1)], 0);
    let index = JudgedBy::of([("t0", [keys[0]]), ("t1", [keys[1]])]);
    let both = index.tenants(keys[0]).expect("judged");
    assert_eq!(both.iter().map(|t| &**t).collect::<Vec<_>>(), ["t0", "t1"]);
    for i in 0..2 {
        written(&mut book, &format!("t{i}"), address(i));
    }
    for (i, other) in [(0, 1), (1, 0)] {
        let changes = book.event(&Event::Transition {
            at: at(1_000),
            target: texts[i].into(),
            endpoints: vec![format!("e{i}")],
            address: address(i),
            from: "up",
            to: "down",
            failing_since: Some(at(900)),
            reason: "refused".into(),
        });
        let charged: Vec<(&str, Served)> = (changes.iter())
            .map(|c| (c.name.as_str(), c.condition.served))
            .collect();
        assert_eq!(
            charged,
            [(format!("n{i}.example").as_str(), Served::DeadAddress)]
        );
        let current: BTreeMap<&str, Served> =
            book.current().map(|(n, c, _)| (n, c.served)).collect();
        let expected = if i == 0 {
            Served::Answered
        } else {
            Served::DeadAddress
        };
        assert_eq!(current[format!("n{other}.example").as_str()], expected);
    }
}

/// `tenant` published `address` and its sink `zone` wrote it.
fn written(book: &mut super::super::Book, tenant: &str, address: std::net::IpAddr) {
    use std::time::{Duration, UNIX_EPOCH};

    use crate::clock::Timestamp;
    use crate::events::Event;

    let at = |ms: u64| Timestamp(UNIX_EPOCH + Duration::from_millis(ms));
    book.event(&Event::Publish {
        at: at(10),
        tenant: tenant.into(),
        seq: 1,
        mode: "healthy",
        addresses: vec![address],
        hosts: Vec::new(),
        voted_down: None,
    });
    book.event(&Event::SinkWrite {
        at: at(20),
        sink: "zone".into(),
        tenant: tenant.into(),
        seq: 1,
        result: "changed",
        error: None,
    });
}
