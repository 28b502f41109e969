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
        // A pair is a key's prefix and a tenant's number: 16 bytes, where a shared copy of
        // the key's text and the number were 24 and the text's own allocation.
        assert_eq!(size_of::<(u64, u32)>(), 16);
        let pairs: usize = model.values().map(BTreeSet::len).sum();
        let ptr = size_of::<Arc<str>>();
        assert_eq!(index.own_bytes(), pairs * 16 + tenants.len() * ptr);
    }
}
