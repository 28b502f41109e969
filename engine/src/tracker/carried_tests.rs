//! A reload that gives endpoints other checks, driven through the core with a fake clock:
//! what each published is computed here from the script (the verdict each endpoint had
//! before, kept until its new check's own), never from the core's rules.

use std::sync::Arc;
use std::time::Duration;

use crate::hysteresis::Health;
use crate::observation::TargetId;

use super::tests::{plan, Harness};

/// Endpoints per plan, and the id a changed check's target gets (ids below are the plan's).
const N: usize = 5;
const FRESH: TargetId = 100;
/// Longer than the gap pacing keeps between a tenant's decisions.
const PACED: Duration = Duration::from_secs(1);

/// What `health` publishes: the up endpoints' last octets, or every endpoint when none is up
/// (the tenant's default `on_all_unhealthy = "publish_all"`).
fn oracle(health: &[Health]) -> Vec<u8> {
    let up: Vec<u8> = (0..health.len())
        .filter(|&i| health[i] == Health::Up)
        .map(|i| i as u8 + 1)
        .collect();
    if up.is_empty() {
        (1..=health.len() as u8).collect()
    } else {
        up
    }
}

/// Seeded: endpoints up or down, then reloads each changing some endpoints' checks (a new
/// target id, as the prober pool gives a new check) before or after their first verdict.
/// Until its new check has a verdict an endpoint is decided by the one it had, so a reload
/// alone changes no answer; one result of the new check (rise 1) decides it if a success,
/// two if failures (fall 2), and the first of those failures changes nothing yet.
#[test]
fn a_changed_check_keeps_the_endpoints_verdict_until_its_own_over_generated_reloads() {
    for seed in 1..=300u64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut h = Harness::new(plan(N, "", ""));
        let mut health: Vec<Health> = (0..N)
            .map(|_| if rng.bool() { Health::Up } else { Health::Down })
            .collect();
        let mut ids: Vec<TargetId> = (0..N as TargetId).collect();
        for (i, state) in health.iter().enumerate() {
            let ok = *state == Health::Up;
            h.observe(&[(ids[i], ok), (ids[i], ok)]);
        }
        // Past the start-up grace, and past each decision's pacing before each look.
        h.advance(Duration::from_secs(6));
        assert_eq!(h.hosts(), oracle(&health), "seed {seed}: before any reload");
        let mut fresh = FRESH;
        for round in 0..3 {
            let at = format!("seed {seed}, reload {round}");
            let changed: Vec<usize> = (0..N).filter(|_| rng.u8(0..3) == 0).collect();
            for &i in &changed {
                ids[i] = fresh;
                fresh += 1;
            }
            let mut fx = Vec::new();
            let again = Arc::new((*h.core.plan).clone());
            h.core.reload(again, ids.clone(), h.now, &mut fx);
            h.take(fx);
            h.advance(PACED);
            assert_eq!(h.hosts(), oracle(&health), "{at}: the reload alone");
            // Some changed endpoints get their new check's first result now, others later.
            let now: Vec<usize> = changed.into_iter().filter(|_| rng.bool()).collect();
            for i in now {
                if rng.bool() {
                    h.observe(&[(ids[i], true)]);
                    health[i] = Health::Up;
                } else {
                    h.observe(&[(ids[i], false)]);
                    h.advance(PACED);
                    assert_eq!(h.hosts(), oracle(&health), "{at}: one failure of {i}");
                    h.observe(&[(ids[i], false)]);
                    health[i] = Health::Down;
                }
                h.advance(PACED);
                assert_eq!(h.hosts(), oracle(&health), "{at}: {i}'s new verdict");
            }
        }
    }
}

/// An endpoint the reload renames, or moves to another address, is another endpoint: it
/// carries nothing and joins once its check says it is up.
#[test]
fn another_endpoint_carries_nothing() {
    let mut h = Harness::new(plan(2, "", ""));
    h.observe(&[(0, true), (1, true)]);
    h.advance(Duration::from_secs(6));
    assert_eq!(h.hosts(), [1, 2]);
    let mut next = (*h.core.plan).clone();
    next.endpoints[0].name = "renamed".into();
    next.endpoints[1].address = "10.0.0.9".parse().unwrap();
    let mut fx = Vec::new();
    h.core
        .reload(Arc::new(next), vec![FRESH, FRESH + 1], h.now, &mut fx);
    h.take(fx);
    h.advance(PACED);
    assert_eq!(
        h.hosts(),
        [1, 9],
        "no verdict at all: fail-open publishes both"
    );
    h.observe(&[(FRESH, true)]);
    h.advance(PACED);
    assert_eq!(
        h.hosts(),
        [1],
        "the renamed endpoint is up; the moved one not yet"
    );
}
