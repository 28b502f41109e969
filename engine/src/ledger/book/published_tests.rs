use std::collections::BTreeSet;

use super::*;

/// Seeded sequences of publishes (sequence numbers mostly rising, sometimes repeated or
/// going back; sets drawn from a pool, with repeats, growing and shrinking) answer as the
/// list of copies the book kept before: the last [`PUBLISHED_KEPT`] sets, each as given.
#[test]
fn bitmaps_answer_as_the_kept_copies_in_generated_sequences() {
    let pool: Vec<IpAddr> = (0..150)
        .map(|i| IpAddr::from([10, 2, (i / 100) as u8, i as u8]))
        .collect();
    for seed in 0..50 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut model: VecDeque<(u64, Vec<IpAddr>)> = VecDeque::new();
        let mut published = Published::default();
        let mut seq = 0u64;
        // A moving window of the pool, so old addresses leave and compaction runs.
        let mut low = 0;
        for step in 0..120 {
            seq = match rng.u8(..10) {
                0 => seq.saturating_sub(rng.u64(0..3)),
                _ => seq + 1,
            };
            low = (low + rng.usize(0..3)).min(pool.len() - 20);
            let width = rng.usize(0..20);
            let set: Vec<IpAddr> = (0..width).map(|_| pool[low + rng.usize(..20)]).collect();
            if model.len() == PUBLISHED_KEPT {
                model.pop_front();
            }
            model.push_back((seq, set.clone()));
            published.push(seq, &set);
            assert!(!published.is_empty());
            for from in [0, seq.saturating_sub(3), seq, seq + 1] {
                let held = published.held_since(from);
                for a in &pool[low.saturating_sub(20)..(low + 40).min(pool.len())] {
                    let expected = (model.iter()).any(|(s, set)| *s >= from && set.contains(a));
                    assert_eq!(
                        held.contains(a),
                        expected,
                        "seed {seed}, step {step}, from {from}, {a}"
                    );
                }
            }
            for s in seq.saturating_sub(40)..=seq + 1 {
                let expected = (model.iter())
                    .find(|(m, _)| *m == s)
                    .map(|(_, set)| set.iter().copied().collect::<BTreeSet<_>>());
                let got = published.set(s).map(|set| set.iter().copied().collect());
                assert_eq!(got, expected, "seed {seed}, step {step}, seq {s}");
            }
        }
    }
}

/// A tenant of 100 addresses that published [`PUBLISHED_KEPT`] sets, each one address
/// different from the one before, holds its addresses once and a few words a set: under
/// an eighth of the copies.
#[test]
fn kept_sets_of_a_hundred_addresses_hold_the_addresses_once() {
    let pool: Vec<IpAddr> = (0..=255).map(|i| IpAddr::from([10, 3, 0, i])).collect();
    let mut published = Published::default();
    let mut copies = 0;
    for seq in 0..100u64 {
        let start = seq as usize % 150;
        let set = &pool[start..start + 100];
        published.push(seq, set);
        copies = PUBLISHED_KEPT * size_of_val(set);
    }
    let bytes = published.own_bytes();
    assert!(bytes * 8 < copies, "{bytes} B against {copies} B");
    assert!(published.addresses.len() <= 2 * (100 + PUBLISHED_KEPT));
}

/// After a start a tenant has published one set: its sinks' writes of it share the one
/// copy the kept sets are bitmaps over, so the set is held once, not twice.
#[test]
fn a_set_holding_every_kept_address_is_the_one_copy() {
    let set: Vec<IpAddr> = (0..100).map(|i| IpAddr::from([10, 4, 0, i])).collect();
    let mut published = Published::default();
    published.push(7, &set);
    let written = published.set(7).expect("published");
    assert_eq!(*written, *set);
    assert!(Arc::ptr_eq(&written, &published.set(7).expect("published")));
    published.push(8, &set[1..]);
    let older = published.set(7).expect("kept");
    assert!(Arc::ptr_eq(&older, &written), "7 still holds every address");
    assert_eq!(*published.set(8).expect("published"), set[1..]);
}
