//! `[ring]` in one engine: a replica holds probers only for the targets it probes. The
//! test plays the binary's Kubernetes side, handing the engine listings of the ring's
//! Leases (a seeded sequence of member sets, each member renewing), and computes which
//! targets this replica owns from the member list with the rendezvous function; the engine
//! counts the targets it holds probers for (`prober_tasks`), and the loopback gateways count the
//! probes they take.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ho_engine::ring::members::Sighting;
use ho_engine::ring::rendezvous::{member_hash, owners, target_hash};
use ho_engine::Engine;
use ho_testkit::Gateway;
use tokio::time::Instant;

use crate::harness::*;

const GATEWAYS: usize = 24;
const ME: &str = "me";
const REPLICATION: usize = 2;
/// The Lease duration, which is the make-before-break grace (longer than the 200 ms checks).
const GRACE: Duration = Duration::from_secs(2);

/// Targets (by place in the plan) `ME` owns in a ring of `others` and `ME`, computed here
/// from the targets' keys.
fn owned(keys: &[String], others: &BTreeSet<&str>) -> BTreeSet<usize> {
    let mut members: Vec<&str> = others.iter().copied().chain([ME]).collect();
    members.sort_unstable();
    let hashes: Vec<u64> = members.iter().map(|m| member_hash(m)).collect();
    let me = member_hash(ME);
    (0..keys.len())
        .filter(|&i| {
            owners(target_hash(&keys[i]), &hashes, REPLICATION)
                .iter()
                .any(|&m| hashes[m] == me)
        })
        .collect()
}

/// Hands the engine a listing of the ring's Leases every 100 ms, each member's Lease renewed
/// (a new version) at each, as the binary's Lease watch would.
fn renew_leases(engine: &Engine, members: Arc<Mutex<BTreeSet<&'static str>>>) {
    let link = engine.ring().expect("the engine runs a ring");
    actix_rt::spawn(async move {
        for version in 0u64.. {
            let listing: Vec<Sighting> = members
                .lock()
                .unwrap()
                .iter()
                .chain([&ME])
                .map(|m| Sighting {
                    identity: (*m).to_owned(),
                    peer: None,
                    version: version.to_string(),
                    renewed_ago: Some(Duration::ZERO),
                })
                .collect();
            if link.listings.send(listing).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
}

fn tasks(engine: &Engine) -> i64 {
    engine.metrics().prober_tasks.get()
}

fn requests(gws: &[Gateway]) -> Vec<u64> {
    gws.iter().map(Gateway::requests).collect()
}

/// What one change of members must bring: every gained target probed within the grace,
/// lost targets probed on for the grace (make-before-break), then exactly the owned
/// targets' prober tasks.
async fn follow_change(
    engine: &Engine,
    gws: &[Gateway],
    before: &BTreeSet<usize>,
    after: &BTreeSet<usize>,
    changed: Instant,
) {
    let at_change = requests(gws);
    let gained: Vec<usize> = after.difference(before).copied().collect();
    let lost: Vec<usize> = before.difference(after).copied().collect();
    eventually("every gained target probed", || {
        gained.iter().all(|&i| gws[i].requests() > at_change[i])
    })
    .await;
    assert!(
        changed.elapsed() < GRACE,
        "gained targets first probed {:?} after the change, past the grace",
        changed.elapsed()
    );
    eventually("a prober task per owned target", || {
        tasks(engine) == after.len() as i64
    })
    .await;
    if !lost.is_empty() {
        assert!(
            changed.elapsed() >= GRACE,
            "lost targets' probers stopped {:?} after the change, within the grace",
            changed.elapsed()
        );
        let probed_on = lost.iter().all(|&i| gws[i].requests() > at_change[i]);
        assert!(probed_on, "a lost target was not probed during the grace");
    }
}

/// With the tasks settled: owned gateways are probed, the others are not, and the count of
/// prober tasks stays.
async fn only_owned_probed(engine: &Engine, gws: &[Gateway], owned: &BTreeSet<usize>) {
    // A probe of a just-stopped prober may still be in flight: counted from after it.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let from = requests(gws);
    holds_for("one prober task per owned target", GRACE / 2, || {
        tasks(engine) == owned.len() as i64
    })
    .await;
    let now = requests(gws);
    for (i, gw) in gws.iter().enumerate() {
        let probed = now[i] > from[i];
        assert_eq!(
            probed,
            owned.contains(&i),
            "gateway {i} ({}) probed: {probed}, owned: {}",
            gw.addr(),
            owned.contains(&i)
        );
    }
}

#[actix_rt::test]
async fn a_replica_runs_probers_only_for_the_targets_it_owns() {
    let gws = gateways(GATEWAYS);
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("ring-secret");
    std::fs::write(&secret, "s3cret").unwrap();
    let text = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
        .with(&format!(
            "[ring]\nenabled = true\nidentity = \"{ME}\"\nreplication = {REPLICATION}\n\
             lease_duration = \"2s\"\nrenew_period = \"300ms\"\nlisten = \"{}\"\n\
             secret_file = {:?}\n\n\
             [[tenants]]\nname = \"a\"\ndomains = [\"api.tenant-a.io\"]\nsinks = [\"local\"]\n\n{}",
            loopback(),
            secret.display().to_string(),
            hosts_sink(&dir.path().join("hosts")),
        ))
        .render();
    let engine = start_engine(dir.path(), &text).await;
    let plan = engine.plan();
    let keys: Vec<String> = plan.targets.iter().map(|t| t.key()).collect();
    let place = |gw: &Gateway| keys.iter().position(|k| k.contains(&gw.addr().to_string()));
    assert!(
        gws.iter().enumerate().all(|(i, g)| place(g) == Some(i)),
        "the plan's targets are the gateways in order"
    );
    assert_eq!(tasks(&engine), 0, "no ring listed yet: no prober task");

    let members = Arc::new(Mutex::new(BTreeSet::new()));
    renew_leases(&engine, members.clone());
    let mut rng = fastrand::Rng::with_seed(0x51ab);
    let pool = ["b", "c", "d", "e", "f"];
    let mut before = BTreeSet::new();
    for step in 0..5 {
        let current = members.lock().unwrap().clone();
        let mut next = BTreeSet::new();
        while next.is_empty() || next == current {
            next = pool.iter().copied().filter(|_| rng.bool()).collect();
        }
        let after = owned(&keys, &next);
        println!(
            "step {step}: members {next:?}, owns {} of {GATEWAYS}",
            after.len()
        );
        *members.lock().unwrap() = next;
        let changed = Instant::now();
        follow_change(&engine, &gws, &before, &after, changed).await;
        only_owned_probed(&engine, &gws, &after).await;
        before = after;
    }
}
