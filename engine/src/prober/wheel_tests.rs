//! The wheel against real loopback listeners: a seeded set of targets with their own
//! intervals, each listener counting the connections (probe arrivals) it accepts, a real
//! actor taking the results. What each target must see is computed here from the script:
//! every interval's probe and no more while it runs, none after it is stopped, probing back
//! after it is started again.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;
use actix_rt::Arbiter;
use ho_config::{CheckOverrides, Target};
use prometheus_client::metrics::gauge::Gauge;
use tokio::time::Instant;

use super::{Prober, Reporting, Wheel};
use crate::metrics::Metrics;
use crate::observation::TargetId;
use crate::outbox::Observations;
use crate::probe::{Probe, ProbeContext, BUILT_IN};
use crate::probe_limits::ProbeLimits;
use crate::schedule::{Grid, Schedule, LONG_TICK};

/// Takes probe results as the tracker would, counting them per target.
struct Results {
    seen: Arc<Mutex<HashMap<TargetId, (usize, usize)>>>,
    limits: Arc<ProbeLimits>,
}

impl Actor for Results {
    type Context = Context<Self>;
}

impl Handler<Observations> for Results {
    type Result = ();

    fn handle(&mut self, batch: Observations, _: &mut Context<Self>) {
        self.limits.results_taken(batch.0.len());
        let mut seen = self.seen.lock().unwrap();
        for obs in batch.0 {
            let count = seen.entry(obs.target).or_default();
            count.0 += 1;
            count.1 += usize::from(obs.result.ok());
        }
    }
}

/// A loopback listener recording when each connection arrives.
async fn listener() -> (SocketAddr, Arc<Mutex<Vec<Instant>>>) {
    let socket = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = socket.local_addr().unwrap();
    let arrivals = Arc::new(Mutex::new(Vec::new()));
    let seen = arrivals.clone();
    actix_rt::spawn(async move {
        while let Ok((conn, _)) = socket.accept().await {
            seen.lock().unwrap().push(Instant::now());
            drop(conn);
        }
    });
    (addr, arrivals)
}

fn target(addr: SocketAddr, interval: Duration) -> Target {
    let check = CheckOverrides {
        port: Some(addr.port()),
        interval: Some(interval),
        timeout: Some(Duration::from_millis(100)),
        rise: Some(1),
        fall: Some(1),
        ..CheckOverrides::of_kind("tcp")
    };
    Target {
        address: addr.ip(),
        check: ho_config::resolve_standalone_check(&check, &BUILT_IN)
            .unwrap()
            .into(),
    }
}

fn arrivals_within(arrivals: &Mutex<Vec<Instant>>, from: Instant, to: Instant) -> Vec<Instant> {
    let all = arrivals.lock().unwrap();
    all.iter()
        .copied()
        .filter(|&t| t >= from && t < to)
        .collect()
}

/// Every target is probed once per interval while it runs (gaps between arrivals within
/// half an interval of it: none twice in a slot, none skipped), not at all once stopped,
/// and again once started again; the gauge counts the records held.
#[actix_rt::test]
async fn each_target_is_probed_on_its_schedule_and_only_while_started() {
    let mut rng = fastrand::Rng::with_seed(0x3e11);
    let mut targets = Vec::new();
    for _ in 0..12 {
        let (addr, arrivals) = listener().await;
        let interval = Duration::from_millis(rng.u64(4..=8) * 50);
        targets.push((target(addr, interval), interval, arrivals));
    }
    let metrics = Arc::new(Metrics::new());
    let limits = Arc::new(ProbeLimits::new(64, metrics));
    let seen = Arc::new(Mutex::new(HashMap::new()));
    let results = Results {
        seen: seen.clone(),
        limits: limits.clone(),
    }
    .start();
    let arbiter = Arbiter::new();
    let live = Gauge::default();
    let origin = Instant::now();
    let reporting = Reporting {
        tracker: results.recipient(),
        limits,
        sample_share: 0.0,
        grid: Grid {
            origin,
            tick: LONG_TICK,
        },
    };
    let wheel = Wheel::spawn(&arbiter.handle(), reporting, live.clone());
    let start = |id: usize, t: &Target| {
        let probe = Probe::new(t, &mut ProbeContext::default()).unwrap();
        let schedule = Schedule::new(&t.key(), &t.check.timing, origin, LONG_TICK);
        let first = schedule.next_slot(Instant::now());
        let prober = Prober::new(
            id as TargetId,
            probe,
            (schedule, first),
            t.check.clone(),
            None,
        );
        wheel.start(prober)
    };
    let handles: Vec<_> = targets
        .iter()
        .enumerate()
        .map(|(i, (t, _, _))| start(i, t))
        .collect();
    let stopped: Vec<usize> = (0..targets.len()).filter(|_| rng.bool()).collect();
    eventually("every record held", || live.get() == 12).await;

    // Phase 1: everything runs until each target took 5 probes.
    let (began, ended) = window(&targets, 5).await;
    for (i, (_, interval, arrivals)) in targets.iter().enumerate() {
        let seen = arrivals_within(arrivals, began, ended);
        assert_on_schedule(i, *interval, ended - began, &seen);
    }

    // Phase 2: a seeded subset stopped; nothing reaches them once the stop is applied.
    for &i in &stopped {
        handles[i].stop();
    }
    eventually("stopped records dropped", || {
        live.get() == (12 - stopped.len()) as i64
    })
    .await;
    let quiet_from = Instant::now() + Duration::from_millis(20);
    let longest = stopped.iter().map(|&i| targets[i].1).max();
    let quiet_until = quiet_from + 2 * longest.unwrap_or_default();
    eventually("two of the stopped targets' intervals passed", || {
        Instant::now() >= quiet_until
    })
    .await;
    for &i in &stopped {
        let late = arrivals_within(&targets[i].2, quiet_from, Instant::now());
        assert!(
            late.is_empty(),
            "target {i} probed {} times after its stop",
            late.len()
        );
    }

    // Phase 3: started again (a new record), each probed again on its schedule.
    let again: Vec<_> = stopped.iter().map(|&i| start(i, &targets[i].0)).collect();
    eventually("every record held again", || live.get() == 12).await;
    let (began, ended) = window(&targets, 5).await;
    for (i, (_, interval, arrivals)) in targets.iter().enumerate() {
        let seen = arrivals_within(arrivals, began, ended);
        assert_on_schedule(i, *interval, ended - began, &seen);
    }
    drop(again);
    let seen = seen.lock().unwrap();
    for (i, (_, _, arrivals)) in targets.iter().enumerate() {
        let (results, ok) = seen.get(&(i as TargetId)).copied().unwrap_or_default();
        let arrived = arrivals.lock().unwrap().len();
        assert!(
            ok == results,
            "target {i}: {ok} of {results} results healthy"
        );
        // The last attempt's result may still wait in the outbox, and a stop may have cut
        // an attempt whose connection had arrived.
        let unreported = 1 + usize::from(stopped.contains(&i));
        assert!(
            results + unreported >= arrived && results <= arrived,
            "target {i}: {results} results for {arrived} arrivals"
        );
    }
    arbiter.stop();
}

/// The targets and what each listener saw.
type Scripted = [(Target, Duration, Arc<Mutex<Vec<Instant>>>)];

/// A window from now until every target took `probes` probes.
async fn window(targets: &Scripted, probes: usize) -> (Instant, Instant) {
    let began = Instant::now();
    eventually("every target probed in the window", || {
        let now = Instant::now();
        targets
            .iter()
            .all(|(_, _, a)| arrivals_within(a, began, now).len() >= probes)
    })
    .await;
    (began, Instant::now())
}

/// `arrivals` over a window of `length` of target `i` probed every `interval`.
fn assert_on_schedule(i: usize, interval: Duration, length: Duration, arrivals: &[Instant]) {
    let expected = (length.as_millis() / interval.as_millis()) as usize;
    assert!(
        arrivals.len() + 1 >= expected && arrivals.len() <= expected + 1,
        "target {i} (every {interval:?}): {} probes in {length:?}, {expected} expected",
        arrivals.len()
    );
    for pair in arrivals.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap >= interval / 2 && gap <= interval * 3 / 2,
            "target {i} (every {interval:?}): probes {gap:?} apart"
        );
    }
}

async fn eventually(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ok() {
        assert!(Instant::now() < deadline, "not within 5 s: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
