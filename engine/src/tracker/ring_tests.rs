//! `[ring]` in the tracker core: this replica's own verdicts and the other members'
//! combine as `crate::ring::combine` says (fail fast, recover on agreement, an impaired
//! vantage never withdraws alone), and a target nobody probes keeps its last verdict.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::tests::{plan, Harness};
use super::Part;
use crate::hysteresis::Health;
use crate::ring::combine::Vantage;
use crate::ring::handover::Assignment;
use crate::ring::members::Member;
use crate::ring::ownership::Ownership;
use crate::ring::rendezvous::{member_hash, target_hash};

/// A harness over three endpoints whose replica `me` is alone in its ring (it probes every
/// target), with shared verdicts on.
fn alone() -> Harness {
    let mut h = Harness::new(plan(3, "", ""));
    let me = Member {
        identity: "me".into(),
        hash: member_hash("me"),
        peer: None,
    };
    let ownership = Arc::new(Ownership::new(Assignment::new(
        me.hash,
        2,
        Duration::from_secs(2),
    )));
    let _ = ownership.ring(vec![me], Instant::now());
    h.core.share_verdicts(ownership);
    h
}

fn key(h: &Harness, target: usize) -> String {
    h.core.plan.targets[target].key()
}

fn peer(h: &mut Harness, from: &str, part: Part, verdicts: &[(usize, Health, bool)]) {
    let verdicts = verdicts
        .iter()
        .map(|&(t, health, impaired)| (key(h, t), Vantage { health, impaired }))
        .collect();
    let mut fx = Vec::new();
    h.core.vantages(from, part, verdicts, h.now, &mut fx);
    h.take(fx);
}

#[test]
fn own_verdicts_are_shared_and_a_peers_down_withdraws_at_once() {
    let mut h = alone();
    h.observe(&[(0, true), (1, true), (2, true)]);
    assert_eq!(h.hosts(), [1, 2, 3]);
    assert_eq!(
        h.shared.len(),
        3,
        "each first verdict goes to the other members"
    );
    assert!(h.shared.iter().all(|(_, health)| *health == Health::Up));

    // Another owner of e2 judges it down: withdrawn, though this replica sees it up.
    peer(&mut h, "b", Part::WHOLE, &[(1, Health::Down, false)]);
    h.advance(Duration::from_millis(100));
    assert_eq!(h.hosts(), [1, 3]);
    // It recovers there: every owner agrees again.
    peer(&mut h, "b", Part::Changes, &[(1, Health::Up, false)]);
    h.advance(Duration::from_millis(100));
    assert_eq!(h.hosts(), [1, 2, 3]);

    // An impaired vantage's down verdict never withdraws alone.
    peer(&mut h, "b", Part::WHOLE, &[(1, Health::Down, true)]);
    h.advance(Duration::from_millis(100));
    assert_eq!(h.hosts(), [1, 2, 3]);
}

#[test]
fn a_target_nobody_probes_keeps_its_last_verdict_until_a_new_owners_first() {
    let mut h = alone();
    h.observe(&[(0, true), (1, true), (2, true)]);
    peer(&mut h, "b", Part::WHOLE, &[(2, Health::Down, false)]);
    h.advance(Duration::from_millis(100));
    assert_eq!(h.hosts(), [1, 2]);

    // This replica stops probing e3 (it moved to b): it tells the others and forgets its
    // own verdict; b's verdict decides.
    let mut fx = Vec::new();
    let k = key(&h, 2);
    h.core.probing(&[target_hash(&k)], false, h.now, &mut fx);
    h.take(fx);
    assert_eq!(h.shared.last(), Some(&(k, Health::Unknown)));
    assert_eq!(h.hosts(), [1, 2]);
    // Its observations, if a probe in flight finishes late, are not counted.
    h.observe(&[(2, true)]);
    h.advance(Duration::from_millis(100));
    assert_eq!(h.hosts(), [1, 2]);

    // b leaves the ring: nobody probes e3, its last verdict (down) stands...
    let mut fx = Vec::new();
    h.core.forget_member("b", h.now, &mut fx);
    h.take(fx);
    h.advance(Duration::from_millis(100));
    assert_eq!(h.hosts(), [1, 2]);
    let unowned = |h: &Harness| {
        let names = std::collections::HashSet::from(["e2".to_owned()]);
        h.core.endpoints_named(&names, h.now)[0].unowned_seconds
    };
    assert!(
        unowned(&h).is_some_and(|s| s >= 0.1),
        "/status says how long nobody has probed it: {:?}",
        unowned(&h)
    );
    // ...until its new owner's first verdict.
    peer(&mut h, "c", Part::WHOLE, &[(2, Health::Up, false)]);
    h.advance(Duration::from_millis(100));
    assert_eq!(h.hosts(), [1, 2, 3]);
    assert_eq!(unowned(&h), None, "owned again");
}

#[test]
fn a_replica_that_probes_nothing_yet_is_ready_once_the_owners_verdicts_arrive() {
    let mut h = alone();
    // Joining a running ring: the owners probe every target, this replica none.
    let hashes: Vec<u64> = (0..3).map(|t| target_hash(&key(&h, t))).collect();
    let mut fx = Vec::new();
    h.core.probing(&hashes, false, h.now, &mut fx);
    h.take(fx);
    assert!(!h.core.ready(), "nothing known yet");

    peer(
        &mut h,
        "b",
        Part::WHOLE,
        &[(0, Health::Up, false), (1, Health::Down, false)],
    );
    assert!(!h.core.ready(), "e3 still has no verdict anywhere");
    peer(&mut h, "c", Part::WHOLE, &[(2, Health::Up, false)]);
    assert!(
        h.core.ready(),
        "every target has an owner's verdict: the replica answers, so it is ready"
    );
    h.advance(Duration::from_millis(100));
    assert_eq!(
        h.hosts(),
        [1, 3],
        "and it answers with the owners' verdicts"
    );
}
