//! Generated edit sequences end to end: the real binary following the Kubernetes API test
//! server (`fakes::kube_api`; no real API server can run here) publishes through its
//! embedded DNS server, and the test's own resolver asks every name over UDP on loopback
//! every 20 ms. Each sequence mixes creates, valid and refused edits (and reverts of
//! them) and deletions of DNSFailovers, DNSRecords, a DNSPolicy written as `v1` and as
//! `v1alpha1`, a DNSHealthCheckProbe and a Gateway (listeners, IP and host-name
//! addresses), with restarts of the process, a watch cache gone stale or empty, and
//! expired watches. After every step ([`world`]): a published name leaves only by a
//! deletion or an accepted edit dropping it, untouched names answer exactly as before, a
//! reverted refusal restores what was served, every refusal is on a status `kubectl get`
//! shows, and the answers settle on the oracle's ([`oracle`], worked out from the steps).
//!
//! The seed is printed; `HO_SEED=N` replays it. A failing sequence is printed with the
//! invariant it broke at once, then shrunk by dropping steps while it still fails (each try
//! a fresh world, for [`SHRINK_FOR`] at most) and printed as a test to paste.

mod objects;
mod oracle;
mod resolver;
mod status;
mod steps;
mod world;

use steps::{generate, Step};
use world::{Violation, World};

/// Sequences per run, steps per sequence, and how many run side by side.
const SEQUENCES: u64 = 24;
const STEPS: usize = 8;
const SIDE_BY_SIDE: usize = 4;
/// Fresh worlds a shrink may start, and for how long: the whole test stays within about
/// two minutes (its nextest budget in `.config/nextest.toml`).
const SHRINK_RUNS: usize = 24;
const SHRINK_FOR: std::time::Duration = std::time::Duration::from_secs(40);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_kubernetes_edit_sequences_keep_every_answer() {
    let seed = std::env::var("HO_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("kube sequences: seed {seed} (replay: HO_SEED={seed})");
    let start = tokio::time::Instant::now();
    let all: Vec<(u64, Vec<Step>)> = (0..SEQUENCES)
        .map(|i| (seed.wrapping_add(i), generate(seed.wrapping_add(i), STEPS)))
        .collect();
    let mut failed = None;
    for batch in all.chunks(SIDE_BY_SIDE) {
        let mut side_by_side = tokio::task::JoinSet::new();
        for (i, (_, steps)) in batch.iter().enumerate() {
            let steps = steps.clone();
            side_by_side.spawn(async move { (i, run(&steps).await) });
        }
        let mut runs: Vec<(usize, Result<(), Violation>)> = side_by_side.join_all().await;
        runs.sort_by_key(|(i, _)| *i);
        let runs = runs.into_iter().map(|(_, r)| r);
        let first = batch
            .iter()
            .zip(runs)
            .find_map(|((s, steps), r)| r.err().map(|v| (*s, steps.clone(), v)));
        if let Some(f) = first {
            failed = Some(f);
            break;
        }
    }
    if let Some((seed, steps, violation)) = failed {
        // Said before shrinking, so a run cut short still says what broke.
        eprintln!(
            "kube sequences: sequence {seed} broke an invariant at step {}: {}\n{steps:?}\nshrinking",
            violation.step, violation.what
        );
        let (steps, violation) = shrink(steps, violation).await;
        panic!(
            "sequence {seed} broke an invariant at step {}: {}\nshrunk to {} steps; as a test:\n\n{}",
            violation.step,
            violation.what,
            steps.len(),
            as_test(seed, &steps)
        );
    }
    eprintln!(
        "kube sequences: {SEQUENCES} sequences of {STEPS} steps held in {:?}",
        start.elapsed()
    );
}

/// Runs `steps` in a fresh world.
async fn run(steps: &[Step]) -> Result<(), Violation> {
    World::start().await.run(steps).await
}

/// Drops steps one at a time while the sequence still fails (cut after the failing step
/// each time), within [`SHRINK_RUNS`] fresh worlds and [`SHRINK_FOR`].
async fn shrink(steps: Vec<Step>, violation: Violation) -> (Vec<Step>, Violation) {
    let until = tokio::time::Instant::now() + SHRINK_FOR;
    let mut best = (steps[..=violation.step].to_vec(), violation);
    let (mut runs, mut drop) = (0, best.0.len());
    while drop > 0 && runs < SHRINK_RUNS && tokio::time::Instant::now() < until {
        drop -= 1;
        let mut fewer = best.0.clone();
        fewer.remove(drop);
        runs += 1;
        if let Err(v) = run(&fewer).await {
            fewer.truncate(v.step + 1);
            drop = fewer.len();
            best = (fewer, v);
        }
    }
    best
}

/// `steps` as a test to paste into this file.
fn as_test(seed: u64, steps: &[Step]) -> String {
    let lines: Vec<String> = steps
        .iter()
        .map(|s| format!("        {},", rust(s)))
        .collect();
    format!(
        "#[tokio::test(flavor = \"multi_thread\", worker_threads = 2)]\n\
         async fn kube_sequence_{seed}() {{\n    use steps::{{Addresses, Object, Step}};\n    \
         let steps = [\n{}\n    ];\n    \
         if let Err(v) = run(&steps).await {{\n        panic!(\"step {{}}: {{}}\", v.step, v.what);\n    }}\n}}",
        lines.join("\n")
    )
}

/// A step as Rust source.
fn rust(step: &Step) -> String {
    match step {
        Step::Delete(o) => format!("Step::Delete(Object::{o:?})"),
        Step::Gateway {
            listeners,
            addresses,
        } => format!(
            "Step::Gateway {{ listeners: {listeners}, addresses: Addresses::{addresses:?} }}"
        ),
        other => format!("Step::{other:?}"),
    }
}

/// Shrunk from a generated sequence: a restarted process opens its DNS server before its
/// first Kubernetes round has admitted the resources; for that round's time (tens of
/// milliseconds) the names declared there answer SERVFAIL, never NXDOMAIN, which resolvers
/// would cache for the SOA minimum.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_keeps_every_kubernetes_name_answering() {
    use steps::Step;
    let steps = [
        Step::Record {
            slot: 1,
            addrs: 5,
            valid: true,
        },
        Step::Policy {
            v1alpha1: true,
            valid: true,
        },
        Step::Restart,
    ];
    if let Err(v) = run(&steps).await {
        panic!("step {}: {}", v.step, v.what);
    }
}

/// Shrunk from a generated sequence: a DNSPolicy on a Gateway whose only address is a
/// `Hostname` (a load balancer's name, here one of the listeners' own zone, which the
/// embedded server answers) publishes each listener as a CNAME to that name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_known_by_host_name_publishes_its_listeners() {
    use steps::{Addresses, Step};
    let steps = [
        Step::Policy {
            v1alpha1: false,
            valid: true,
        },
        Step::Gateway {
            listeners: 2,
            addresses: Addresses::Hostname,
        },
    ];
    if let Err(v) = run(&steps).await {
        panic!("step {}: {}", v.step, v.what);
    }
}

/// Shrunk from a generated sequence: a refused DNSHealthCheckProbe (its address no address)
/// corrected to name an address a DNSRecord publishes gives that address the probe's check,
/// new to the engine; the record's name keeps the address, as healthy as before, while the
/// new check has no verdict yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrected_probe_keeps_its_address_answering() {
    use steps::Step;
    let steps = [
        Step::Probe {
            at: 0,
            valid: false,
        },
        Step::Outsider,
        Step::Record {
            slot: 1,
            addrs: 6,
            valid: true,
        },
        Step::Probe { at: 1, valid: true },
    ];
    if let Err(v) = run(&steps).await {
        panic!("step {}: {}", v.step, v.what);
    }
}

/// A generated sequence that broke the refused probe's status in CI: the probe deleted, a
/// failover made, then a refused probe created, deleted and created refused again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_sequence_4615227603370118725() {
    use steps::{Object, Step};
    let steps = [
        Step::Delete(Object::Probe),
        Step::Failover {
            slot: 0,
            addrs: 1,
            valid: true,
        },
        Step::Probe {
            at: 1,
            valid: false,
        },
        Step::Delete(Object::Probe),
        Step::Probe {
            at: 2,
            valid: false,
        },
    ];
    if let Err(v) = run(&steps).await {
        panic!("step {}: {}", v.step, v.what);
    }
}

/// A generated sequence that broke a listener's record in CI: a Gateway of three listeners
/// with host-name addresses, a DNSPolicy, then the Gateway down to one listener.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_sequence_7538599577391567938() {
    use steps::{Addresses, Step};
    let steps = [
        Step::Gateway {
            listeners: 3,
            addresses: Addresses::Hostname,
        },
        Step::Policy {
            v1alpha1: true,
            valid: true,
        },
        Step::Gateway {
            listeners: 1,
            addresses: Addresses::Hostname,
        },
    ];
    if let Err(v) = run(&steps).await {
        panic!("step {}: {}", v.step, v.what);
    }
}
