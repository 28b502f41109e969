//! One run: three clusters sharing a real `pdns_server` zone, each owning one gateway that
//! answers per vantage; cluster `a` runs as two replicas under a Lease held in the
//! Kubernetes API test server, `b` and `c` as one process each. Every process reaches the
//! zone's API through a link of its own that can be cut or slowed and that records the
//! writes passing it. A reader asks the zone every 50 ms while a schedule's faults are
//! applied at their times; the history the checker judges.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::checker::History;
use super::schedule::{Fault, Shape, Step};
use crate::fakes::kube_api::KubeApi;
use crate::services::clusters::{pdns_sink_at, Cluster, VantageGateway, NAME, ZONE};
use crate::services::link::Link;
use crate::services::pdns::{PdnsServer, API_PORT, DNS_PORT};

/// The processes: (cluster id, identity in the Lease if a replica under one).
const PROCESSES: [(&str, Option<&str>); 4] = [
    ("a", Some("a-1")),
    ("a", Some("a-2")),
    ("b", None),
    ("c", None),
];

/// The clusters, in the order their gateways and vantages are numbered.
const CLUSTERS: [&str; 3] = ["a", "b", "c"];

/// The Lease's namespace and name.
const LEASE: (&str, &str) = ("dns", "ho");

/// The shape the schedules act on.
pub fn shape() -> Shape {
    Shape {
        clusters: CLUSTERS.len(),
        gateways: CLUSTERS.len(),
        processes: PROCESSES
            .iter()
            .map(|(c, lease)| (cluster_index(c), lease.is_some()))
            .collect(),
    }
}

fn cluster_index(id: &str) -> usize {
    CLUSTERS
        .iter()
        .position(|c| *c == id)
        .expect("a known cluster")
}

/// The world a schedule acts on.
struct World {
    pdns: PdnsServer,
    kube: KubeApi,
    gateways: Vec<VantageGateway>,
    /// The processes, as [`PROCESSES`] lists them.
    processes: Vec<Cluster>,
    /// Each process's way to the back end's API.
    links: Vec<Link>,
}

impl World {
    async fn start() -> World {
        let pdns = PdnsServer::start(&format!("{ZONE}."));
        let kube = KubeApi::default();
        let kube_addr = kube.start().await;
        let mut gateways = Vec::new();
        for _ in CLUSTERS {
            gateways.push(VantageGateway::start().await);
        }
        let mut links = Vec::new();
        let mut processes = Vec::new();
        for (id, lease) in PROCESSES {
            let link = Link::start(SocketAddr::new(pdns.ip.into(), API_PORT)).await;
            let sink = pdns_sink_at(&pdns, &format!("http://{}", link.addr));
            let mut process = Cluster::new(id, &gateways[cluster_index(id)], &sink);
            if let Some(identity) = lease {
                process.elect(identity, kube_addr, LEASE);
            }
            process.start();
            processes.push(process);
            links.push(link);
        }
        World {
            pdns,
            kube,
            gateways,
            processes,
            links,
        }
    }

    /// Sends `signal` (`STOP`, `CONT`) to process `p`, with bash's builtin `kill` (no
    /// dependency on procps being installed).
    fn signal(&self, p: usize, signal: &str) {
        let pid = self.processes[p]
            .process
            .as_ref()
            .expect("a running process")
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
                let who: Vec<&Cluster> = self
                    .processes
                    .iter()
                    .filter(|p| vantages.contains(&cluster_index(p.id)))
                    .collect();
                self.gateways[*gateway].fail_for(&who);
            }
            (Fault::Gateway { gateway, .. }, true) => self.gateways[*gateway].fail_for(&[]),
            (Fault::Pause(p), false) => self.signal(*p, "STOP"),
            (Fault::Pause(p), true) => self.signal(*p, "CONT"),
            (Fault::Kill(p), false) => self.processes[*p].kill(),
            (Fault::Kill(p), true) => self.processes[*p].start(),
            (Fault::Skew(p, offset), heal) => {
                let process = &mut self.processes[*p];
                process.kill();
                process.clock = (!heal).then_some(*offset);
                process.start();
            }
            (Fault::BackendDown, false) => self.pdns.stop(),
            (Fault::BackendDown, true) => self.pdns.launch(),
            (Fault::BackendCut(p), heal) => self.links[*p].set_cut(!heal),
            (Fault::BackendSlow(p, ms), heal) => {
                self.links[*p].set_delay(Duration::from_millis(if heal { 0 } else { *ms }))
            }
            (Fault::ApiCut(p), heal) => {
                let token = self.processes[*p].token().expect("a replica under a Lease");
                self.kube.set_partitioned(&token, !heal);
            }
        }
    }

    /// The replicas' writes to the back end since `start`, in order.
    fn writes(&self, start: Instant) -> Vec<(Duration, usize)> {
        let mut writes: Vec<(Duration, usize)> = self
            .links
            .iter()
            .enumerate()
            .filter(|(p, _)| PROCESSES[*p].1.is_some())
            .flat_map(|(p, link)| {
                let writes = link.writes().into_iter().filter(|t| *t >= start);
                writes.map(move |t| (t - start, p))
            })
            .collect();
        writes.sort();
        writes
    }

    /// The Lease's holder (a process) after each change, since `start` (changes before it
    /// at zero).
    fn holders(&self, start: Instant) -> Vec<(Duration, Option<usize>)> {
        self.kube
            .lease_history(LEASE.0, LEASE.1)
            .into_iter()
            .map(|(t, holder)| {
                let p = holder.and_then(|h| PROCESSES.iter().position(|(_, l)| *l == Some(&*h)));
                (Instant::from(t).saturating_duration_since(start), p)
            })
            .collect()
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
            world.processes[0].log()
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
    let (writes, holders) = (world.writes(start), world.holders(start));
    History {
        answers,
        faults: applied,
        clusters: CLUSTERS.len(),
        processes: shape().processes.iter().map(|(c, _)| *c).collect(),
        gateways: world.gateways.iter().map(VantageGateway::ip).collect(),
        writes,
        holders,
    }
}
