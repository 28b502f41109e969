//! The sorted index against a map of key to tenant set built here from the same generated
//! tenants: every key of the pool (judged or not) answers the same tenants, in the order
//! the tenants were given, with the plan's own copy of the key.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::JudgedBy;

/// Tenants `t0`.. each with endpoints whose checks are drawn from a pool of keys, so keys
/// are shared within and across tenants, and some of the pool judges nothing.
fn generated(rng: &mut fastrand::Rng, pool: &[Arc<str>]) -> Vec<(String, Vec<Arc<str>>)> {
    (0..rng.usize(0..8))
        .map(|t| {
            let checks = (0..rng.usize(0..12))
                .map(|_| pool[rng.usize(..pool.len() - 2)].clone())
                .collect();
            (format!("t{t}"), checks)
        })
        .collect()
}

#[test]
fn every_key_answers_the_tenants_a_map_of_sets_answers_in_generated_plans() {
    let pool: Vec<Arc<str>> = (0..20)
        .map(|i| format!("http://10.0.{}.{}:80/healthz", i % 3, i).into())
        .collect();
    for seed in 0..500 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let tenants = generated(&mut rng, &pool);
        let mut model: BTreeMap<&str, BTreeSet<usize>> = BTreeMap::new();
        for (ti, (_, checks)) in tenants.iter().enumerate() {
            for key in checks {
                model.entry(key).or_default().insert(ti);
            }
        }
        let index = JudgedBy::of(tenants.iter().map(|(t, checks)| (t.as_str(), checks)));
        for key in pool.iter().map(|k| &**k).chain(["", "http://10.0.0.0:80/"]) {
            let expected = model.get(key).map(|ts| {
                ts.iter()
                    .map(|&ti| tenants[ti].0.as_str())
                    .collect::<Vec<_>>()
            });
            let got = index.tenants(key);
            let got: Option<Vec<&str>> = got.as_ref().map(|ts| ts.iter().map(|t| &**t).collect());
            assert_eq!(got, expected, "seed {seed}, key {key:?}");
            let copy = index.key(key);
            assert_eq!(copy.is_some(), model.contains_key(key), "seed {seed}");
            if let Some(copy) = copy {
                let planned = pool.iter().find(|k| &***k == key).unwrap();
                assert!(Arc::ptr_eq(copy, planned), "the plan's copy, not a new one");
            }
        }
        let pairs: usize = model.values().map(BTreeSet::len).sum();
        let ptr = std::mem::size_of::<Arc<str>>();
        assert_eq!(index.own_bytes(), pairs * (ptr + 8) + tenants.len() * ptr);
    }
}
