//! One run: three clusters (orchestrator processes) sharing a real `pdns_server` zone, each
//! owning one gateway that answers per vantage and reaching the zone's API through a link
//! of its own that can be cut, a reader asking the zone every 50 ms, and a schedule's
//! faults applied at their times; the history the checker judges.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::checker::History;
use super::schedule::{Fault, Step};
use crate::services::clusters::{pdns_sink_at, Cluster, VantageGateway, NAME, ZONE};
use crate::services::link::Link;
use crate::services::pdns::{PdnsServer, API_PORT, DNS_PORT};

/// The clusters' ids.
const IDS: [&str; 3] = ["a", "b", "c"];

/// The world a schedule acts on.
struct World {
    pdns: PdnsServer,
    gateways: Vec<VantageGateway>,
    clusters: Vec<Cluster>,
    /// Each cluster's way to the back end's API.
    links: Vec<Link>,
}

impl World {
    async fn start() -> World {
        let pdns = PdnsServer::start(&format!("{ZONE}."));
        let mut gateways = Vec::new();
        let mut links = Vec::new();
        for _ in IDS {
            gateways.push(VantageGateway::start().await);
            links.push(Link::start(SocketAddr::new(pdns.ip.into(), API_PORT)).await);
        }
        let mut clusters: Vec<Cluster> = IDS
            .iter()
            .zip(&gateways)
            .zip(&links)
            .map(|((id, g), link)| {
                let sink = pdns_sink_at(&pdns, &format!("http://{}", link.addr));
                Cluster::new(id, g, &sink)
            })
            .collect();
        for c in &mut clusters {
            c.start();
        }
        World {
            pdns,
            gateways,
            clusters,
            links,
        }
    }

    /// Sends `signal` (`STOP`, `CONT`) to cluster `c`'s process, with bash's builtin `kill`
    /// (no dependency on procps being installed).
    fn signal(&self, c: usize, signal: &str) {
        let pid = self.clusters[c]
            .process
            .as_ref()
            .expect("a running cluster")
            .0
            .id();
        let sent = std::process::Command::new("bash")
            .args(["-c", &format!("kill -{signal} {pid}")])
            .status()
            .is_ok_and(|s| s.success());
        assert!(sent, "kill -{signal} {pid} failed");
    }

    /// Starts `fault` (`heal`: ends it).
    fn apply(&mut self, fault: &Fault, heal: bool) {
        match (fault, heal) {
            (Fault::Gateway { gateway, vantages }, false) => {
                let who: Vec<&Cluster> = vantages.iter().map(|&c| &self.clusters[c]).collect();
                self.gateways[*gateway].fail_for(&who);
            }
            (Fault::Gateway { gateway, .. }, true) => self.gateways[*gateway].fail_for(&[]),
            (Fault::Pause(c), false) => self.signal(*c, "STOP"),
            (Fault::Pause(c), true) => self.signal(*c, "CONT"),
            (Fault::Kill(c), false) => self.clusters[*c].kill(),
            (Fault::Kill(c), true) => self.clusters[*c].start(),
            (Fault::Skew(c, offset), heal) => {
                let cluster = &mut self.clusters[*c];
                cluster.kill();
                cluster.clock = (!heal).then_some(*offset);
                cluster.start();
            }
            (Fault::BackendDown, false) => self.pdns.stop(),
            (Fault::BackendDown, true) => self.pdns.launch(),
            (Fault::BackendCut(c), heal) => self.links[*c].set_cut(!heal),
        }
    }
}

/// The answers read, since the run's start.
type Answers = Arc<Mutex<Vec<(Duration, Vec<String>)>>>;

/// Asks the zone for the name every 50 ms; answers (sorted) since `start`, reads that got
/// no answer (the back end down) left out.
fn read_answers(
    server: SocketAddr,
    start: Instant,
    stop: Arc<AtomicBool>,
) -> (tokio::task::JoinHandle<()>, Answers) {
    let answers: Answers = Arc::default();
    let kept = answers.clone();
    let task = tokio::spawn(async move {
        while !stop.load(Ordering::Relaxed) {
            let asked = start.elapsed();
            let got = crate::services::dig::dig(server, &[NAME, "A"]).await;
            if let Some(answer) = got
                .first()
                .filter(|a| a.status == "NOERROR" || a.status == "NXDOMAIN")
            {
                kept.lock().unwrap().push((asked, answer.sorted()));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    (task, answers)
}

/// Runs `steps` for `length` on a fresh world; the history.
pub async fn run(steps: &[Step], length: Duration) -> History {
    let mut world = World::start().await;
    let server = SocketAddr::new(world.pdns.ip.into(), DNS_PORT);
    let mut all: Vec<String> = world.gateways.iter().map(VantageGateway::ip).collect();
    all.sort();
    let ready = Instant::now();
    loop {
        let got = crate::services::dig::dig(server, &[NAME, "A"]).await;
        if got.first().is_some_and(|a| a.sorted() == all) {
            break;
        }
        assert!(
            ready.elapsed() < Duration::from_secs(20),
            "the clusters never published every gateway; last: {got:?}\n{}",
            world.clusters[0].log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let start = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let (reader, answers) = read_answers(server, start, stop.clone());
    let mut timeline: Vec<(Duration, usize, bool)> = steps
        .iter()
        .enumerate()
        .flat_map(|(i, s)| [(s.at, i, false), (s.heal, i, true)])
        .collect();
    timeline.sort_by_key(|(t, _, heal)| (*t, *heal));
    let mut applied: Vec<(Fault, Duration, Option<Duration>)> = steps
        .iter()
        .map(|s| (s.fault.clone(), Duration::MAX, None))
        .collect();
    for (at, i, heal) in timeline {
        tokio::time::sleep_until(start + at).await;
        world.apply(&steps[i].fault, heal);
        let now = start.elapsed();
        if heal {
            applied[i].2 = Some(now);
        } else {
            applied[i].1 = now;
        }
    }
    tokio::time::sleep_until(start + length).await;
    stop.store(true, Ordering::Relaxed);
    reader.await.unwrap();
    let answers = answers.lock().unwrap().clone();
    History {
        answers,
        faults: applied,
        clusters: IDS.len(),
        gateways: world.gateways.iter().map(VantageGateway::ip).collect(),
    }
}
