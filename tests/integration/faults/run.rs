//! One run, in one of two setups ([`Setup`]): three clusters sharing a real `pdns_server`
//! zone, cluster `a` as two replicas under a Lease held in the Kubernetes API test server,
//! every process reaching the zone's API through a link of its own that can be cut or
//! slowed and that records the writes passing it; or three clusters each serving the zone
//! from its own `dns_server` and reading the others' reports through a link per reader and
//! peer that a partition cuts. Each cluster owns one gateway that answers per vantage. A
//! reader asks each server every 50 ms while a schedule's faults are applied at their
//! times; the histories the checker judges, one per server read.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::checker::History;
use super::loss::Losses;
use super::schedule::{Fault, Shape, Step};
use crate::fakes::kube_api::KubeApi;
use crate::harness::loopback_ip;
use crate::services::clusters::{pdns_sink_at, Cluster, VantageGateway, NAME, ZONE};
use crate::services::link::Link;
use crate::services::pdns::{PdnsServer, API_PORT, DNS_PORT};

/// How the clusters meet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setup {
    /// A shared PowerDNS zone holds the name and the reports; cluster `a` runs as two
    /// replicas under a Lease.
    SharedZone,
    /// Each cluster's own `dns_server` serves the name and its reports (the distributed-DNS RFC's shape,
    /// no provider); one process per cluster.
    OwnServers,
}

/// The clusters, in the order their gateways and vantages are numbered.
const CLUSTERS: [&str; 3] = ["a", "b", "c"];

/// The clusters that keep a `state_dir`: a restart of theirs recalls what they knew of
/// their peers (with the clusters' own servers); the others learn it again from their
/// peers' relays.
const RECALLING: [&str; 1] = ["a"];

/// How long every server must answer every gateway before the faults start: the
/// clusters' `report_ttl`.
const SETTLE: Duration = Duration::from_secs(2);

/// The Lease's namespace and name.
const LEASE: (&str, &str) = ("dns", "ho");

/// The reports' TSIG secret, shared by the clusters serving the zone themselves.
const REPORTS_SECRET: &str = "c2VjcmV0LXNoYXJlZC1ieS1ldmVyeS1jbHVzdGVyLTAxMjM=";

impl Setup {
    /// The processes: (cluster id, identity in the Lease if a replica under one).
    fn processes(self) -> &'static [(&'static str, Option<&'static str>)] {
        match self {
            Setup::SharedZone => &[
                ("a", Some("a-1")),
                ("a", Some("a-2")),
                ("b", None),
                ("c", None),
            ],
            Setup::OwnServers => &[("a", None), ("b", None), ("c", None)],
        }
    }

    /// The shape its schedules act on.
    pub fn shape(self) -> Shape {
        Shape {
            clusters: CLUSTERS.len(),
            gateways: CLUSTERS.len(),
            processes: self
                .processes()
                .iter()
                .map(|(c, lease)| (cluster_index(c), lease.is_some()))
                .collect(),
            back_end: self == Setup::SharedZone,
        }
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
    setup: Setup,
    /// The shared zone's server (`SharedZone`).
    pdns: Option<PdnsServer>,
    /// The API server holding the Lease, and its address (`SharedZone`).
    kube: Option<(KubeApi, SocketAddr)>,
    gateways: Vec<VantageGateway>,
    /// The processes, as the setup lists them.
    processes: Vec<Cluster>,
    /// Each process's way to the back end's API (`SharedZone`).
    links: Vec<Link>,
    /// `peer_links[reader][peer]`: the way cluster `reader` reads `peer`'s reports
    /// (`OwnServers`; none to itself).
    peer_links: Vec<Vec<Option<Link>>>,
    /// Where the name is read: the zone's server, or each cluster's own.
    servers: Vec<SocketAddr>,
    /// The reports' TSIG secret file (`OwnServers`).
    _secret: Option<tempfile::NamedTempFile>,
    /// The packet loss in place.
    losses: Losses,
}

impl World {
    async fn start(setup: Setup) -> World {
        let mut gateways = Vec::new();
        for _ in CLUSTERS {
            gateways.push(VantageGateway::start().await);
        }
        let mut world = World {
            setup,
            pdns: None,
            kube: None,
            gateways,
            processes: Vec::new(),
            links: Vec::new(),
            peer_links: Vec::new(),
            servers: Vec::new(),
            _secret: None,
            losses: Losses::new(),
        };
        let sinks = match setup {
            Setup::SharedZone => world.shared_zone().await,
            Setup::OwnServers => world.own_servers().await,
        };
        for ((id, lease), sink) in setup.processes().iter().zip(sinks) {
            let mut process = Cluster::new(id, &world.gateways[cluster_index(id)], &sink);
            if RECALLING.contains(id) {
                process.keep_state();
            }
            if let (Some(identity), Some((_, kube))) = (lease, &world.kube) {
                process.elect(identity, *kube, LEASE);
            }
            process.start();
            world.processes.push(process);
        }
        world
    }

    /// Starts the shared zone, the API server and a link per process; each process's sink.
    async fn shared_zone(&mut self) -> Vec<String> {
        let pdns = PdnsServer::start(&format!("{ZONE}."));
        let kube = KubeApi::default();
        let kube_addr = kube.start().await;
        let mut sinks = Vec::new();
        for _ in self.setup.processes() {
            let link = Link::start(SocketAddr::new(pdns.ip.into(), API_PORT)).await;
            sinks.push(pdns_sink_at(&pdns, &format!("http://{}", link.addr)));
            self.links.push(link);
        }
        self.servers = vec![SocketAddr::new(pdns.ip.into(), DNS_PORT)];
        self.pdns = Some(pdns);
        self.kube = Some((kube, kube_addr));
        sinks
    }

    /// Picks each cluster's server address and starts a link per reader and peer; each
    /// cluster's sink (its server, reading its peers through the links).
    async fn own_servers(&mut self) -> Vec<String> {
        let secret = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(secret.path(), REPORTS_SECRET).unwrap();
        self.servers = CLUSTERS
            .iter()
            .map(|_| SocketAddr::new(IpAddr::V4(loopback_ip()), DNS_PORT))
            .collect();
        let mut sinks = Vec::new();
        for (reader, own) in self.servers.iter().enumerate() {
            let mut links = Vec::new();
            for (peer, server) in self.servers.iter().enumerate() {
                links.push(if peer == reader {
                    None
                } else {
                    Some(Link::start(*server).await)
                });
            }
            let peers: Vec<String> = links
                .iter()
                .flatten()
                .map(|l| format!("\"{}\"", l.addr))
                .collect();
            sinks.push(format!(
                "[sinks.zone]\nkind = \"dns_server\"\nlisten = [\"{own}\"]\nzones = [\"{ZONE}\"]\n\
                 reports = {{ peers = [{}], timeout = \"500ms\", tsig = {{ name = \"reports\", secret_file = {:?} }} }}\n",
                peers.join(", "),
                secret.path().display().to_string()
            ));
            self.peer_links.push(links);
        }
        self._secret = Some(secret);
        sinks
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

    /// The addresses only process `p` uses: its probes' source, its link to the back end,
    /// the links its cluster reads its peers through.
    fn paths(&self, p: usize) -> Vec<IpAddr> {
        let cluster = cluster_index(self.processes[p].id);
        let mut paths = vec![self.processes[p].source];
        paths.extend(self.links.get(p).map(|l| l.addr.ip()));
        let peers = self.peer_links.get(cluster).into_iter().flatten().flatten();
        paths.extend(peers.map(|l| l.addr.ip()));
        paths
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
            (Fault::BackendDown, false) => self.pdns.as_mut().expect("a shared zone").stop(),
            (Fault::BackendDown, true) => self.pdns.as_mut().expect("a shared zone").launch(),
            (Fault::BackendCut(p), heal) => self.links[*p].set_cut(!heal),
            (Fault::BackendSlow(p, ms), heal) => {
                self.links[*p].set_delay(Duration::from_millis(if heal { 0 } else { *ms }))
            }
            (Fault::Loss(p, percent), false) => {
                let paths = self.paths(*p);
                self.losses.lose(*p, &paths, f64::from(*percent) / 100.0);
            }
            (Fault::Loss(p, _), true) => self.losses.heal(*p),
            (Fault::ApiCut(p), heal) => {
                let token = self.processes[*p].token().expect("a replica under a Lease");
                let (kube, _) = self.kube.as_ref().expect("an API server");
                kube.set_partitioned(&token, !heal);
            }
            (Fault::Partition { reader, peer, both }, heal) => {
                let mut cut = vec![(*reader, *peer)];
                if *both {
                    cut.push((*peer, *reader));
                }
                for (r, p) in cut {
                    let link = self.peer_links[r][p]
                        .as_ref()
                        .expect("a link between clusters");
                    link.set_cut(!heal);
                }
            }
        }
    }

    /// The replicas' writes to the back end since `start`, in order.
    fn writes(&self, start: Instant) -> Vec<(Duration, usize)> {
        let mut writes: Vec<(Duration, usize)> = self
            .links
            .iter()
            .enumerate()
            .filter(|(p, _)| self.setup.processes()[*p].1.is_some())
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
        let Some((kube, _)) = &self.kube else {
            return Vec::new();
        };
        let processes = self.setup.processes();
        kube.lease_history(LEASE.0, LEASE.1)
            .into_iter()
            .map(|(t, holder)| {
                let p = holder.and_then(|h| processes.iter().position(|(_, l)| *l == Some(&*h)));
                (Instant::from(t).saturating_duration_since(start), p)
            })
            .collect()
    }
}

/// The answers read, since the run's start.
type Answers = Arc<Mutex<Vec<(Duration, Vec<String>)>>>;

/// Asks `server` for the name every 50 ms; answers (sorted) by when they came since
/// `start`, reads that got no answer (the server down) left out.
fn read_answers(
    server: SocketAddr,
    start: Instant,
    stop: Arc<AtomicBool>,
) -> (tokio::task::JoinHandle<()>, Answers) {
    let answers: Answers = Arc::default();
    let kept = answers.clone();
    let task = tokio::spawn(async move {
        while !stop.load(Ordering::Relaxed) {
            let got = crate::services::dig::dig(server, &[NAME, "A"]).await;
            // When the answer came, not when it was asked: a paused server answers on
            // waking, with what it holds then.
            let answered = start.elapsed();
            if let Some(answer) = got
                .first()
                .filter(|a| a.status == "NOERROR" || a.status == "NXDOMAIN")
            {
                kept.lock().unwrap().push((answered, answer.sorted()));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    (task, answers)
}

/// Runs `steps` for `length` on a fresh world of `setup`; the history of each server read.
pub async fn run(setup: Setup, steps: &[Step], length: Duration) -> Vec<History> {
    let mut world = World::start(setup).await;
    let mut all: Vec<String> = world.gateways.iter().map(VantageGateway::ip).collect();
    all.sort();
    // The cold start settles first: every server answers every gateway for a report_ttl
    // on end (a cluster that counted before another's first report was in may still be
    // writing its first, smaller set).
    let ready = Instant::now();
    let mut settled_since = Instant::now();
    while settled_since.elapsed() < SETTLE {
        for server in world.servers.clone() {
            let got = crate::services::dig::dig(server, &[NAME, "A"]).await;
            if got.first().is_none_or(|a| a.sorted() != all) {
                settled_since = Instant::now();
            }
            assert!(
                ready.elapsed() < Duration::from_secs(30),
                "the clusters never settled on every gateway at {server}; last: {got:?}\n{}",
                world.processes[0].log()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let start = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = world
        .servers
        .iter()
        .map(|server| read_answers(*server, start, stop.clone()))
        .collect();
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
    let (writes, holders) = (world.writes(start), world.holders(start));
    let own_servers = setup == Setup::OwnServers;
    let mut histories = Vec::new();
    for (i, (task, answers)) in readers.into_iter().enumerate() {
        task.await.unwrap();
        let answers = answers.lock().unwrap().clone();
        histories.push(History {
            answers,
            faults: applied.clone(),
            clusters: CLUSTERS.len(),
            processes: setup.shape().processes.iter().map(|(c, _)| *c).collect(),
            gateways: world.gateways.iter().map(VantageGateway::ip).collect(),
            writes: writes.clone(),
            holders: holders.clone(),
            logs: world.processes.iter().map(Cluster::log).collect(),
            reader: own_servers.then_some(i),
            recalling: RECALLING.iter().map(|c| cluster_index(c)).collect(),
        });
    }
    histories
}
