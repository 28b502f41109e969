//! `max_in_flight` in virtual time: a few cases by hand, then seeded generated sequences
//! (snapshots, ends of writes, failures, forgets, reconciles, takeovers over many tenants)
//! checked against an oracle kept from the sequence itself.

use std::collections::BTreeMap;

use super::*;

/// A sink taking `max_in_flight` writes at once, otherwise as [`delivery`] says.
fn capped(rate: f64, burst: u32, max_in_flight: u32) -> Run {
    Run::new(Delivery {
        max_in_flight,
        ..delivery(rate, burst)
    })
}

fn tenants_in_flight(run: &Run) -> Vec<&str> {
    run.in_flight.iter().map(|w| w.tenant.as_str()).collect()
}

#[test]
fn writes_beyond_the_cap_wait_for_one_to_end_in_the_order_asked() {
    let mut run = capped(1000.0, 1000, 2);
    for tenant in ["a", "b", "c", "d"] {
        run.publish(snap(tenant, 1, &[]));
    }
    assert_eq!(tenants_in_flight(&run), ["a", "b"]);
    run.finish("b", ok());
    assert_eq!(tenants_in_flight(&run), ["a", "c"]);
    run.finish("a", Err(SinkError::retriable("503")));
    assert_eq!(tenants_in_flight(&run), ["c", "d"]);
    run.advance(Duration::from_secs(1)); // a's retry is due while both places are taken
    assert_eq!(tenants_in_flight(&run), ["c", "d"]);
    run.finish("d", ok());
    assert_eq!(tenants_in_flight(&run), ["c", "a"]);
    assert_eq!(run.last_write().cause, Cause::Retry);
}

#[test]
fn a_change_goes_ahead_of_reconciles_waiting_for_a_place() {
    let mut run = capped(1000.0, 1000, 1);
    for tenant in ["a", "b", "c"] {
        run.publish(snap(tenant, 1, &[]));
        run.finish(tenant, ok());
    }
    run.reconcile();
    assert_eq!(tenants_in_flight(&run), ["a"]);
    run.publish(snap("c", 2, &[]));
    run.finish("a", ok());
    assert_eq!(
        (run.last_write().cause, run.last_write().snapshot.seq),
        (Cause::Snapshot, 2)
    );
    run.finish("c", ok());
    assert_eq!(tenants_in_flight(&run), ["b"]);
    assert_eq!(run.last_write().cause, Cause::Reconcile);
}

#[test]
fn a_forgotten_tenants_write_holds_its_place_until_it_ends() {
    let mut run = capped(1000.0, 1000, 1);
    run.publish(snap("gone", 1, &[]));
    run.publish(snap("next", 1, &[]));
    run.core.forget("gone");
    assert_eq!(tenants_in_flight(&run), ["gone"]);
    assert_eq!(run.finish("gone", ok()), None);
    assert_eq!(tenants_in_flight(&run), ["next"]);
}

#[test]
fn a_tenant_added_again_waits_for_its_forgotten_write() {
    let mut run = capped(1000.0, 1000, 4);
    run.publish(snap("t", 5, &[]));
    run.core.forget("t");
    run.publish(snap("t", 1, &[])); // added again: its seq starts over
    run.reconcile();
    assert_eq!(
        run.writes(),
        [("t".into(), 5)],
        "the old state must not land last"
    );
    assert_eq!(
        run.finish("t", ok()),
        None,
        "the old write's result is not the new slot's"
    );
    assert_eq!(run.writes(), [("t".into(), 5), ("t".into(), 1)]);
    let finished = run.finish("t", ok()).expect("the new slot's write");
    assert!(finished.first_of_seq);
}

#[test]
fn quiesce_counts_a_forgotten_tenants_write_and_starts_none_queued() {
    let mut run = capped(1000.0, 1000, 2);
    for tenant in ["a", "b", "c"] {
        run.publish(snap(tenant, 1, &[]));
    }
    run.core.forget("a");
    assert_eq!(run.core.quiesce(), 2);
    run.finish("a", ok());
    run.finish("b", ok());
    assert_eq!(run.core.quiesce(), 0);
    assert_eq!(run.writes().len(), 2, "c stays queued");
}

/// What the test knows of one tenant from the sequence it drove.
#[derive(Default)]
struct Known {
    /// Its latest snapshot's seq; `None` while forgotten.
    latest: Option<u64>,
    /// The seq last written with success since it was (last) added.
    written: Option<u64>,
    /// A write failed and no success followed: a retry is owed.
    failed: bool,
    /// Reconcile or takeover rounds that asked for a write not yet started.
    rounds: Vec<Cause>,
}

/// The oracle: the cap, and each write started checked against what the sequence asked.
struct Oracle {
    cap: usize,
    /// The token bucket never runs dry: a free place in flight must be taken at once.
    tokens_galore: bool,
    /// The most writes seen in flight at once.
    peak: usize,
    tenants: BTreeMap<String, Known>,
    /// Writes of `Run::started` already checked.
    checked: usize,
    /// The next seq per tenant name (kept over forgets: seqs only grow).
    next_seq: BTreeMap<String, u64>,
}

impl Oracle {
    /// Checks the writes started since the last call: within the cap, of the tenant's
    /// latest snapshot, and each for a reason.
    fn check(&mut self, run: &Run) {
        assert!(
            run.in_flight.len() <= self.cap,
            "{} in flight",
            run.in_flight.len()
        );
        self.peak = self.peak.max(run.in_flight.len());
        if self.tokens_galore && run.in_flight.len() < self.cap {
            let waiting = self.tenants.iter().find(|(tenant, k)| {
                k.latest.is_some()
                    && k.written != k.latest
                    && !k.failed
                    && !run.in_flight.iter().any(|w| &&w.tenant == tenant)
            });
            assert_eq!(waiting.map(|(t, _)| t), None, "waits with a place free");
        }
        for (_, w) in &run.started[self.checked..] {
            let known = self.tenants.entry(w.tenant.clone()).or_default();
            assert_eq!(
                Some(w.snapshot.seq),
                known.latest,
                "{}: not its latest",
                w.tenant
            );
            match w.cause {
                Cause::Snapshot => assert_ne!(
                    known.written,
                    Some(w.snapshot.seq),
                    "{}: written twice",
                    w.tenant
                ),
                Cause::Retry => assert!(known.failed, "{}: a retry of no failure", w.tenant),
                round => assert!(known.rounds.contains(&round), "{}: no {round:?}", w.tenant),
            }
            known.rounds.clear();
        }
        self.checked = run.started.len();
    }

    fn publish(&mut self, run: &mut Run, tenant: String) {
        let seq = self.next_seq.entry(tenant.clone()).or_insert(0);
        *seq += 1;
        self.tenants.entry(tenant.clone()).or_default().latest = Some(*seq);
        run.publish(snap(&tenant, *seq, &[]));
    }

    fn finish(&mut self, run: &mut Run, i: usize, fail: bool) {
        let write = run.in_flight[i].clone();
        let result = if fail {
            Err(SinkError::retriable("503"))
        } else {
            ok()
        };
        let finished = run.finish(&write.tenant, result);
        let Some(known) = self.tenants.get_mut(&write.tenant) else {
            return;
        };
        if finished.is_none() {
            return; // a forgotten slot's write
        }
        known.failed = fail;
        if !fail {
            known.written = Some(write.snapshot.seq);
        }
    }

    /// A round asked of every tenant run: each may be written for it once.
    fn round(&mut self, cause: Cause) {
        for known in self.tenants.values_mut().filter(|k| k.latest.is_some()) {
            known.rounds.push(cause);
        }
    }
}

/// One generated step.
fn step(run: &mut Run, oracle: &mut Oracle, rng: &mut fastrand::Rng, tenants: usize) {
    let tenant = format!("t{}", rng.usize(..tenants));
    match rng.u32(..100) {
        0..40 => oracle.publish(run, tenant),
        40..75 if !run.in_flight.is_empty() => {
            let i = rng.usize(..run.in_flight.len());
            oracle.finish(run, i, rng.u32(..5) == 0);
        }
        75..80 => {
            run.core.forget(&tenant);
            let known = oracle.tenants.entry(tenant).or_default();
            *known = Known::default();
        }
        80..83 => {
            oracle.round(Cause::Reconcile);
            run.reconcile();
        }
        83..84 => {
            oracle.round(Cause::Takeover);
            run.step(DeliveryCore::takeover);
        }
        _ => run.advance(ms(rng.u64(..400))),
    }
    oracle.check(run);
}

/// Ends every write with success and lets every timer fire until nothing is left to write.
fn drain(run: &mut Run, oracle: &mut Oracle) {
    for _ in 0..10_000 {
        if run.in_flight.is_empty() && run.timers.is_empty() {
            return;
        }
        if run.in_flight.is_empty() {
            run.advance(Duration::from_secs(10));
        } else {
            oracle.finish(run, 0, false);
        }
        oracle.check(run);
    }
    panic!("writes never ended");
}

/// Seeded sequences over 60 tenants, with and without a binding token bucket: never more
/// than the cap in flight, only latest snapshots written and each for a reason, and in
/// the end every tenant's latest snapshot written.
#[test]
fn generated_sequences_keep_the_cap_and_write_every_latest_snapshot() {
    for seed in 0..12 {
        let (rate, burst, cap) = [(1000.0, 1000, 4), (20.0, 5, 8), (1000.0, 1000, 1)][seed % 3];
        let mut rng = fastrand::Rng::with_seed(seed as u64);
        let mut run = capped(rate, burst, cap);
        let mut oracle = Oracle {
            cap: cap as usize,
            tokens_galore: rate == 1000.0,
            peak: 0,
            tenants: BTreeMap::new(),
            checked: 0,
            next_seq: BTreeMap::new(),
        };
        for _ in 0..3_000 {
            step(&mut run, &mut oracle, &mut rng, 60);
        }
        drain(&mut run, &mut oracle);
        for (tenant, known) in &oracle.tenants {
            if known.latest.is_some() {
                assert_eq!(known.written, known.latest, "seed {seed}: {tenant}");
            }
        }
        let live = oracle
            .tenants
            .values()
            .filter(|k| k.latest.is_some())
            .count();
        assert_eq!(run.core.status().len(), live, "seed {seed}");
        assert!(run.core.status().iter().all(|s| !s.pending), "seed {seed}");
        assert_eq!(run.core.quiesce(), 0);
        assert_eq!(
            oracle.peak, cap as usize,
            "seed {seed}: the cap was never reached"
        );
    }
}

/// 150 tenants, 2 places and a reconcile every 5 s: a round that still waits at the next
/// tick is said once, with its tenants, the writes still waiting, the time and the cap;
/// again only after a round that kept up. The queue behind the cap is counted.
#[test]
fn a_late_reconcile_round_is_said_once_until_one_keeps_up() {
    let (tenants, cap, interval) = (150usize, 2usize, Duration::from_secs(5));
    let mut run = Run::new(Delivery {
        max_in_flight: cap as u32,
        reconcile_interval: interval,
        ..delivery(1000.0, 1000)
    });
    let drain = |run: &mut Run| {
        while let Some(w) = run.in_flight.first().map(|w| w.tenant.clone()) {
            run.finish(&w, ok());
        }
    };
    for i in 0..tenants {
        run.publish(snap(&format!("t{i:03}"), 1, &[]));
    }
    assert_eq!(run.core.queued(), tenants - cap);
    drain(&mut run);
    assert_eq!(run.core.queued(), 0);
    run.advance(interval);
    assert_eq!(run.reconcile(), None, "the first round begins");
    assert_eq!(run.core.queued(), tenants - cap);
    // 170 ms a write: 29 pairs end within the interval.
    let ended = 2 * 29;
    for _ in 0..ended {
        let w = run.in_flight[0].tenant.clone();
        run.finish(&w, ok());
    }
    run.advance(interval);
    let overrun = run.reconcile().expect("the round is late");
    let waiting = tenants - ended - cap;
    assert_eq!(
        overrun,
        Overrun {
            tenants,
            waiting,
            after: interval,
            interval,
            max_in_flight: cap,
        }
    );
    assert_eq!(overrun.round(), Some(interval * 150 / 60));
    run.advance(interval);
    assert_eq!(run.reconcile(), None, "said once");
    drain(&mut run);
    run.advance(interval);
    assert_eq!(
        run.reconcile(),
        None,
        "this round kept up: a new one begins"
    );
    run.advance(interval);
    assert!(
        run.reconcile().is_some(),
        "a late round after one that kept up"
    );
}
