//! Several clusters share one zone (`[multi_cluster]`): three orchestrator processes
//! (clusters a, b, c), each listing only its own gateway, against one real `pdns_server`
//! zone and, separately, one moto Route53 zone. The gateways answer per client address and
//! each cluster probes from its own loopback `source_address`, so a fault can be seen from
//! one vantage point only. A cluster's wall clock can be set apart with libfaketime
//! (Debian's `faketime`, installed by `.ci/test`).

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use crate::fakes::azure_dns::{AzureDns, RESOURCE_GROUP, SUBSCRIPTION};
use crate::fakes::google_dns::{GoogleDns, MANAGED_ZONE, PROJECT};
use crate::fakes::route53::Moto;
use crate::fakes::webhook::{wait_for_delivery, Receiver, SECRET};
use crate::harness::*;
use crate::services::clusters::{pdns_sink, Cluster, VantageGateway, NAME, ZONE};
use crate::services::pdns::{PdnsServer, DNS_PORT};

/// The down votes `votes` holds for `address`.
fn down_votes(votes: &Value, address: &str) -> Vec<String> {
    votes["addresses"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["address"] == address)
        .map(|a| {
            a["down_votes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The strings of a JSON array (none when `v` is not one).
fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect()
}

/// How a test reads the shared name: through DNS (PowerDNS), the zone API (Route53), or
/// every cluster's own server (`dns_server` with `reports`).
#[derive(Clone)]
enum Zone {
    Dns(SocketAddr),
    /// The clusters' servers: the answer is theirs when every server that answers
    /// NOERROR says the same (a stopped or SERVFAILing server is skipped, as resolvers
    /// skip it for the zone's next name server).
    Servers(Vec<SocketAddr>),
    Route53 {
        client: aws_sdk_route53::Client,
        zone_id: String,
    },
    /// Cloud DNS's API test server, read directly.
    Google(GoogleDns),
    /// Azure DNS's Resource Manager test server, read directly.
    Azure(AzureDns),
}

impl Zone {
    /// The name's A addresses, sorted (none when it cannot be read).
    async fn addresses(&self) -> Vec<String> {
        match self {
            Zone::Dns(server) => crate::services::dig::dig(*server, &[NAME, "A"])
                .await
                .first()
                .map(crate::services::dig::Answer::sorted)
                .unwrap_or_default(),
            Zone::Servers(servers) => {
                let mut answers = Vec::new();
                for server in servers {
                    let answer = crate::services::dig::dig(*server, &[NAME, "A"]).await;
                    if let Some(a) = answer.first().filter(|a| a.status == "NOERROR") {
                        answers.push(a.sorted());
                    }
                }
                answers.dedup();
                match answers.len() {
                    0 => Vec::new(),
                    1 => answers.remove(0),
                    _ => vec![format!("the servers disagree: {answers:?}")],
                }
            }
            Zone::Google(server) => server.addresses(NAME).unwrap_or_default(),
            Zone::Azure(server) => server.addresses(NAME).unwrap_or_default(),
            Zone::Route53 { client, zone_id } => {
                let listed = client
                    .list_resource_record_sets()
                    .hosted_zone_id(zone_id)
                    .send()
                    .await;
                let mut addresses: Vec<String> = listed
                    .map(|o| o.resource_record_sets().to_vec())
                    .unwrap_or_default()
                    .iter()
                    .filter(|s| s.name() == format!("{NAME}.") && s.r#type().as_str() == "A")
                    .flat_map(|s| s.resource_records().iter().map(|r| r.value().to_owned()))
                    .collect();
                addresses.sort();
                addresses
            }
        }
    }

    /// Polls until the name's addresses are `want`; returns how long it took.
    async fn wait_for(&self, want: &[String]) -> Duration {
        let start = Instant::now();
        let want = sorted(want);
        loop {
            let got = self.addresses().await;
            if got == want {
                return start.elapsed();
            }
            assert!(
                start.elapsed() < LIMIT,
                "{NAME}: wanted {want:?}, the zone says {got:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// Polls the name every 20 ms until stopped, counting answers without any address once
/// the name had one.
struct Reader {
    stop: Arc<AtomicBool>,
    empty: Arc<AtomicUsize>,
    polls: Arc<AtomicUsize>,
    started: Instant,
    task: tokio::task::JoinHandle<()>,
}

impl Reader {
    fn start(zone: Zone) -> Reader {
        let stop = Arc::new(AtomicBool::new(false));
        let empty = Arc::new(AtomicUsize::new(0));
        let polls = Arc::new(AtomicUsize::new(0));
        let (s, e, p) = (stop.clone(), empty.clone(), polls.clone());
        let task = tokio::spawn(async move {
            let mut seen = false;
            while !s.load(Ordering::Relaxed) {
                let found = zone.addresses().await.len();
                p.fetch_add(1, Ordering::Relaxed);
                if found == 0 && seen {
                    e.fetch_add(1, Ordering::Relaxed);
                }
                seen |= found > 0;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        Reader {
            stop,
            empty,
            polls,
            started: Instant::now(),
            task,
        }
    }

    /// Stops polling; returns (polls, empty answers), having checked that the reader kept
    /// polling throughout (at least twice a second: each poll asks every server with
    /// `dig`, slower on a loaded machine).
    async fn finish(self) -> (usize, usize) {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap();
        let polls = self.polls.load(Ordering::Relaxed);
        let least = (self.started.elapsed().as_secs_f64() * 2.0) as usize;
        assert!(
            polls >= least.max(10),
            "the reader polled {polls} times in {:?}",
            self.started.elapsed()
        );
        (polls, self.empty.load(Ordering::Relaxed))
    }
}

/// Trials of the measured fault (fault at 2 of 3 vantages -> the answer changes): 1 in
/// the suite, `MC_TRIALS` for the numbers in bench/README.md.
pub(crate) fn trials() -> usize {
    std::env::var("MC_TRIALS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

/// The quantile `q` of `times` (nearest rank).
pub(crate) fn quantile(times: &mut [Duration], q: f64) -> Duration {
    times.sort();
    let rank = ((q * times.len() as f64).ceil() as usize).clamp(1, times.len());
    times[rank - 1]
}

/// Kills and starts `cluster`, then waits until its vote has `ip` among its candidates.
async fn restart_knowing(cluster: &mut Cluster, ip: &str) {
    cluster.kill();
    cluster.start();
    cluster
        .wait_for_votes(&format!("the restarted cluster knows {ip}"), |v| {
            v["addresses"]
                .as_array()
                .is_some_and(|all| all.iter().any(|x| x["address"] == ip))
        })
        .await;
}

fn sorted(v: &[String]) -> Vec<String> {
    let mut v = v.to_vec();
    v.sort();
    v
}

/// The issue's cases on one shared zone, the reports held by the sink tables `sinks` (one
/// per cluster, named `zone`), the name read through `zone`: three clusters converge to the union;
/// 1 of 3 vantages seeing a gateway down is not enough, 2 of 3 withdraw it (and healing
/// returns it); everything down everywhere never empties the name; a SIGKILLed cluster's
/// gateway stays while the live ones see it up and leaves by their quorum; `cluster leave`
/// takes it out; a reader polling every 20 ms never sees the name without an address.
/// Cluster a also has a webhook, which must receive the computed set with the votes.
/// Returns the clusters, a and c still running, for what a caller checks after.
async fn vote_scenario(sinks: [&str; 3], zone: Zone) -> [Cluster; 3] {
    let (ga, gb, gc) = (
        VantageGateway::start().await,
        VantageGateway::start().await,
        VantageGateway::start().await,
    );
    let receiver = Receiver::default();
    let hook = receiver.clone().start().await;
    let secret = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(secret.path(), SECRET).unwrap();
    let with_hook = format!(
        "{}\n[sinks.hook]\nkind = \"webhook\"\nurl = \"http://{hook}/dns\"\nsecret_file = {:?}\ntimeout = \"1s\"\n",
        sinks[0],
        secret.path().display().to_string()
    );
    let mut a = Cluster::new("a", &ga, &with_hook);
    let mut b = Cluster::new("b", &gb, sinks[1]);
    let mut c = Cluster::new("c", &gc, sinks[2]);
    a.keep_state();
    for cluster in [&mut a, &mut b, &mut c] {
        cluster.start();
    }
    let all = [ga.ip(), gb.ip(), gc.ip()];
    let without_b = [ga.ip(), gc.ip()];
    zone.wait_for(&all).await;
    let reader = Reader::start(zone.clone());
    for cluster in [&a, &b, &c] {
        cluster
            .wait_for_votes("three live voters", |v| {
                strings(&v["live"]) == ["a", "b", "c"]
            })
            .await;
    }
    if let Some(seconds) = std::env::var("MC_BUDGET_SECONDS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    {
        report_api_calls(&[&a, &b, &c], seconds).await;
    }

    // 1 of 3 vantages sees gw-b down: below the threshold, it stays.
    gb.fail_for(&[&a]);
    for cluster in [&a, &b, &c] {
        cluster
            .wait_for_votes("a's down vote on gw-b", |v| {
                down_votes(v, &gb.ip()) == ["a"]
            })
            .await;
    }
    assert_eq!(zone.addresses().await, sorted(&all), "1 of 3 keeps it");
    // The webhook gets the computed set with every address's votes.
    wait_for_delivery(&receiver, "the union with three voters", |d| {
        strings(&d.body["votes"]["live"]) == ["a", "b", "c"]
            && d.body["endpoints"].as_array().is_some_and(|e| e.len() == 3)
    })
    .await;

    // 2 of 3: it leaves; healed, it returns.
    let mut times = Vec::new();
    for _ in 0..trials() {
        gb.fail_for(&[]);
        zone.wait_for(&all).await;
        gb.fail_for(&[&a, &c]);
        times.push(zone.wait_for(&without_b).await);
    }
    wait_for_delivery(&receiver, "the votes that withdrew gw-b", |d| {
        down_votes(&d.body["votes"], &gb.ip()) == ["a", "c"]
            && d.body["endpoints"].as_array().is_some_and(|e| e.len() == 2)
    })
    .await;
    gb.fail_for(&[]);
    zone.wait_for(&all).await;
    eprintln!(
        "fault at 2 of 3 vantages -> the zone's answer changed: p50 {:?}, p99 {:?} over {} trial(s)",
        quantile(&mut times, 0.5),
        quantile(&mut times, 0.99),
        times.len()
    );

    // Every gateway failing everywhere: all known addresses, never an empty name.
    for g in [&ga, &gb, &gc] {
        g.fail_for(&[&a, &b, &c]);
    }
    a.wait_for_votes("every address down in 3 of 3", |v| {
        all.iter().all(|ip| down_votes(v, ip).len() == 3)
    })
    .await;
    // The tally is in; the write that follows it fails the name open to every address.
    assert!(!zone.addresses().await.is_empty(), "an empty name");
    zone.wait_for(&all).await;
    for g in [&ga, &gb, &gc] {
        g.fail_for(&[]);
    }
    a.wait_for_votes("all up again", |v| {
        all.iter().all(|ip| down_votes(v, ip).is_empty())
    })
    .await;

    // SIGKILL b: after report_ttl, 2 voters; b's gateway stays while a and c see it up,
    // leaves when it fails for both, returns when healed.
    b.kill();
    for cluster in [&a, &c] {
        cluster
            .wait_for_votes("b aged out", |v| {
                strings(&v["live"]) == ["a", "c"] && strings(&v["aged_out"]) == ["b"]
            })
            .await;
    }
    assert_eq!(zone.addresses().await, sorted(&all), "b's gateway stays");
    gb.fail_for(&[&a, &c]);
    zone.wait_for(&without_b).await;
    gb.fail_for(&[]);
    zone.wait_for(&all).await;

    // a restarts while b is still dead: it learns b's gateway all the same (from b's last
    // report in a shared zone; from c's relay of it when each cluster serves its own
    // reports), so every server answers it again.
    restart_knowing(&mut a, &gb.ip()).await;
    zone.wait_for(&all).await;

    // `cluster leave` for b: its report and its gateway leave the zone.
    let out = binary()
        .args(["cluster", "leave", "--config"])
        .arg(b.config())
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert!(said.contains("cluster b left"), "{said}");
    zone.wait_for(&without_b).await;
    a.wait_for_votes("b gone", |v| {
        strings(&v["live"]) == ["a", "c"] && strings(&v["aged_out"]).is_empty()
    })
    .await;

    let (polls, empty) = reader.finish().await;
    assert_eq!(empty, 0, "{empty} of {polls} answers had no address");

    // b has left; with c dead too, a restarts with no peer to read, nor one to relay c's
    // report: it still knows c's gateway (from the shared zone; with the clusters' own
    // servers, recalled from its state_dir).
    c.kill();
    restart_knowing(&mut a, &gc.ip()).await;
    zone.wait_for(&without_b).await;
    [a, b, c]
}

/// Clusters whose wall clocks are 30 s apart (b behind, c ahead; `report_ttl` is 2 s) on a
/// real `pdns_server` zone: every cluster counts the other two live, a withdrawal still needs
/// 2 of 3, one vantage alone withdraws nothing, and c killed ages out although its last
/// report is stamped 30 s in the others' future. Judging age by the writer's stamp, b was
/// never a voter and c voted forever after its death.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clocks_thirty_seconds_apart_neither_hide_nor_fake_a_voter() {
    let pdns = PdnsServer::start(&format!("{ZONE}."));
    let zone = Zone::Dns(SocketAddr::new(pdns.ip.into(), DNS_PORT));
    let sink = pdns_sink(&pdns);
    let (ga, gb, gc) = (
        VantageGateway::start().await,
        VantageGateway::start().await,
        VantageGateway::start().await,
    );
    let mut a = Cluster::new("a", &ga, &sink);
    let mut b = Cluster::new("b", &gb, &sink);
    let mut c = Cluster::new("c", &gc, &sink);
    b.clock = Some("-30s");
    c.clock = Some("+30s");
    for cluster in [&mut a, &mut b, &mut c] {
        cluster.start();
    }
    let all = [ga.ip(), gb.ip(), gc.ip()];
    zone.wait_for(&all).await;
    for cluster in [&a, &b, &c] {
        cluster
            .wait_for_votes("three live voters", |v| {
                strings(&v["live"]) == ["a", "b", "c"]
            })
            .await;
    }
    let reader = Reader::start(zone.clone());

    // One vantage (the clock-ahead c) sees gw-a down: no withdrawal without the quorum.
    ga.fail_for(&[&c]);
    // Every cluster has counted c's vote, and its tally keeps gw-a; the zone still has it.
    for cluster in [&a, &b, &c] {
        let votes = cluster
            .wait_for_votes("c's down vote on gw-a", |v| {
                down_votes(v, &ga.ip()) == ["c"]
            })
            .await;
        let vote = votes["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|x| x["address"] == ga.ip().as_str())
            .cloned();
        assert_eq!(
            vote.map(|x| x["kept"].clone()),
            Some(true.into()),
            "1 of 3 keeps it"
        );
    }
    assert_eq!(zone.addresses().await, sorted(&all), "1 of 3 keeps it");
    // With b (clock behind) agreeing, 2 of 3 withdraw it; healed, it returns.
    ga.fail_for(&[&b, &c]);
    zone.wait_for(&[gb.ip(), gc.ip()]).await;
    ga.fail_for(&[]);
    zone.wait_for(&all).await;

    // SIGKILL c: its last report, stamped in the future, stops changing and ages out.
    c.kill();
    for cluster in [&a, &b] {
        cluster
            .wait_for_votes("c aged out", |v| {
                strings(&v["live"]) == ["a", "b"] && strings(&v["aged_out"]) == ["c"]
            })
            .await;
    }
    let (polls, empty) = reader.finish().await;
    assert_eq!(empty, 0, "{empty} of {polls} answers had no address");
}

/// [`vote_scenario`] on a real `pdns_server` zone, read through DNS with `dig`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_clusters_vote_on_one_powerdns_zone() {
    let pdns = PdnsServer::start(&format!("{ZONE}."));
    let zone = Zone::Dns(SocketAddr::new(pdns.ip.into(), DNS_PORT));
    let sink = pdns_sink(&pdns);
    vote_scenario([&sink, &sink, &sink], zone).await;
}

/// A voting tenant removed from one cluster with `cleanup_on_remove` (what deleting its
/// `DNSFailover` does) leaves the shared name as `cluster leave` would, per tenant: its
/// report goes and its gateway leaves the zone at once, not after `report_ttl` (the others
/// count two live voters and none aged out); removed from every cluster in turn, the last
/// one leaves the name as it is. A reader polling every 20 ms never sees it empty. On a
/// real `pdns_server` zone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voting_tenant_deleted_in_one_cluster_leaves_the_shared_name() {
    let pdns = PdnsServer::start(&format!("{ZONE}."));
    let zone = Zone::Dns(SocketAddr::new(pdns.ip.into(), DNS_PORT));
    let sink = pdns_sink(&pdns);
    let (ga, gb, gc) = (
        VantageGateway::start().await,
        VantageGateway::start().await,
        VantageGateway::start().await,
    );
    let mut clusters = [
        Cluster::new("a", &ga, &sink),
        Cluster::new("b", &gb, &sink),
        Cluster::new("c", &gc, &sink),
    ];
    let tenant = |c: &Cluster| {
        let text = std::fs::read_to_string(c.config()).unwrap();
        let start = text.find("[[tenants]]\nname = \"api\"").unwrap();
        let end = start + text[start..].find("\n\n").unwrap() + 2;
        (text, start, end)
    };
    // Each cluster also publishes a second name, so a config without `api` still has a
    // tenant.
    for c in &mut clusters {
        let (text, start, end) = tenant(c);
        let block = &text[start..end];
        let other = block
            .replace("name = \"api\"", "name = \"other\"")
            .replace(NAME, &format!("other.{ZONE}"));
        // `api` stays the first tenant, whose votes `/status` shows first.
        let with = format!(
            "{}cleanup_on_remove = true\n\n{other}{}",
            &text[..end - 1],
            &text[end..]
        );
        std::fs::write(c.config(), with).unwrap();
        c.start();
    }
    let [a, b, c] = &clusters;
    zone.wait_for(&[ga.ip(), gb.ip(), gc.ip()]).await;
    for cluster in [a, b, c] {
        cluster
            .wait_for_votes("three live voters", |v| {
                strings(&v["live"]) == ["a", "b", "c"]
            })
            .await;
    }
    let reader = Reader::start(zone.clone());
    let remove_tenant = |c: &Cluster| {
        let (text, start, end) = tenant(c);
        std::fs::write(c.config(), format!("{}{}", &text[..start], &text[end..])).unwrap();
        let pid = c.process.as_ref().unwrap().0.id();
        assert!(std::process::Command::new("kill")
            .args(["-HUP", &pid.to_string()])
            .status()
            .unwrap()
            .success());
    };

    remove_tenant(b);
    let took = zone.wait_for(&[ga.ip(), gc.ip()]).await;
    for cluster in [a, c] {
        cluster
            .wait_for_votes("b left, not aged out", |v| {
                strings(&v["live"]) == ["a", "c"] && strings(&v["aged_out"]).is_empty()
            })
            .await;
    }
    eprintln!("a deleted voting tenant left the zone in {took:?}");
    remove_tenant(c);
    zone.wait_for(&[ga.ip()]).await;
    // The last cluster leaving: no other report, the name keeps its records.
    remove_tenant(a);
    let start = Instant::now();
    while try_api_get(a.api, "/status")
        .await
        .is_none_or(|s| s.contains("\"api\""))
    {
        assert!(start.elapsed() < LIMIT, "a still runs api");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Several report rounds later (a's reads of the zone: its other tenant's rounds), the
    // name still answers.
    let reads = || async {
        let text = api_get(a.api, "/metrics").await;
        text.lines()
            .find(|l| {
                l.starts_with("health_orchestrator_cluster_reports_total{")
                    && l.contains("op=\"read\"")
                    && l.contains("result=\"ok\"")
            })
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let from = reads().await;
    let start = Instant::now();
    while reads().await < from + 3.0 {
        assert!(start.elapsed() < LIMIT, "a reads the zone in rounds");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(zone.addresses().await, [ga.ip()]);
    let (polls, empty) = reader.finish().await;
    assert_eq!(empty, 0, "{empty} of {polls} answers had no address");
}

/// [`vote_scenario`] on a Google Cloud DNS zone (its API test server: no Cloud DNS can be
/// had here), each cluster with a token from the metadata server; each cluster's report is
/// its own TXT set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_clusters_vote_on_one_google_cloud_dns_zone() {
    let server = GoogleDns::start(ZONE).await;
    let sink = format!(
        "[sinks.zone]\nkind = \"google_cloud_dns\"\nproject = \"{PROJECT}\"\nmanaged_zone = \"{MANAGED_ZONE}\"\nzone = \"{ZONE}\"\n\
         url = \"{}\"\nmetadata_url = \"{}\"\ntimeout = \"1s\"\nmax_requests_per_second = 50.0\n\
         delivery = {{ backoff_min = \"50ms\", backoff_max = \"300ms\", reconcile_interval = \"1s\" }}\n",
        server.url, server.metadata_url
    );
    vote_scenario([&sink, &sink, &sink], Zone::Google(server.clone())).await;
    let reports: Vec<String> = ["a", "c"]
        .iter()
        .filter(|c| {
            server
                .rrset(&format!("{c}._ho-report.{NAME}"), "TXT")
                .is_some()
        })
        .map(|c| (*c).to_owned())
        .collect();
    assert_eq!(reports, ["a", "c"], "b's report left with it");
    assert!(server
        .rrset(&format!("b._ho-report.{NAME}"), "TXT")
        .is_none());
}

/// [`vote_scenario`] on an Azure DNS zone (its Resource Manager test server: no Azure can
/// be had here), each cluster with a managed identity token; each cluster's report is its
/// own TXT set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_clusters_vote_on_one_azure_dns_zone() {
    let server = AzureDns::start(ZONE).await;
    let url = &server.url;
    let sink = format!(
        "[sinks.zone]\nkind = \"azure_dns\"\nsubscription_id = \"{SUBSCRIPTION}\"\nresource_group = \"{RESOURCE_GROUP}\"\nzone = \"{ZONE}\"\n\
         url = \"{url}\"\nimds_url = \"{url}\"\ntimeout = \"1s\"\nmax_requests_per_second = 50.0\n\
         delivery = {{ backoff_min = \"50ms\", backoff_max = \"300ms\", reconcile_interval = \"1s\" }}\n"
    );
    vote_scenario([&sink, &sink, &sink], Zone::Azure(server.clone())).await;
    assert!(server.txt(&format!("a._ho-report.{NAME}")).is_some());
    assert!(
        server.txt(&format!("b._ho-report.{NAME}")).is_none(),
        "b's report left with it"
    );
}

/// [`vote_scenario`] with no provider (as Kuadrant's distributed-DNS RFC allows): each cluster's own `dns_server` serves
/// the name, holds its cluster's reports and reads the others' from their servers with
/// TSIG-signed queries; the name is read from every server. `cluster leave` starts the
/// leaving cluster's server to answer "no report" until its peers drop it. Also: a report
/// query unsigned is REFUSED, one signed with another key NOTAUTH, one signed with the
/// reports key answered (by `dig -y`, BIND's client).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_clusters_vote_through_their_own_dns_servers() {
    let servers: Vec<SocketAddr> = (0..3)
        .map(|_| SocketAddr::new(IpAddr::V4(loopback_ip()), 5300))
        .collect();
    let secret = "c2VjcmV0LXNoYXJlZC1ieS1ldmVyeS1jbHVzdGVyLTAxMjM=";
    let key = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(key.path(), secret).unwrap();
    let sinks: Vec<String> = servers
        .iter()
        .map(|own| {
            let peers: Vec<String> = servers
                .iter()
                .filter(|p| *p != own)
                .map(|p| format!("\"{p}\""))
                .collect();
            format!(
                "[sinks.zone]\nkind = \"dns_server\"\nlisten = [\"{own}\"]\nzones = [\"{ZONE}\"]\n\
                 reports = {{ peers = [{}], timeout = \"500ms\", tsig = {{ name = \"reports\", secret_file = {:?} }} }}\n",
                peers.join(", "),
                key.path().display().to_string()
            )
        })
        .collect();
    let _running = vote_scenario(
        [&sinks[0], &sinks[1], &sinks[2]],
        Zone::Servers(servers.clone()),
    )
    .await;

    // The report of cluster a as its server answers it (a and c still run).
    let a = servers[0];
    let name = format!("a._ho-report.{NAME}");
    let ask = |key: String| {
        let name = name.clone();
        async move { crate::services::dig::dig1(a, &["+tcp", "-y", &key, &name, "TXT"]).await }
    };
    let signed = ask(format!("hmac-sha256:reports:{secret}")).await;
    assert_eq!(signed.status, "NOERROR", "{signed:?}");
    assert!(
        signed.has_flag("aa") && signed.answers.concat().contains("own="),
        "a's report, with the gateway it owns: {signed:?}"
    );
    let other_key =
        ask("hmac-sha256:reports:b3RoZXIta2V5LW5vdC10aGUtY2x1c3RlcnMnLTAxMjM=".into()).await;
    assert_eq!(other_key.status, "NOTAUTH", "{other_key:?}");
    let unsigned = crate::services::dig::dig1(a, &[&format!("_ho-report.{NAME}"), "TXT"]).await;
    assert_eq!(unsigned.status, "REFUSED", "{unsigned:?}");
}

/// [`vote_scenario`] on a Route53 zone (moto's server: no real Route53 can be had here),
/// read through the Route53 API; each cluster's report is its own TXT record set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_clusters_vote_on_one_route53_zone() {
    let moto = Moto::start().await;
    let zone_id = moto.create_zone(ZONE).await;
    let sink = format!(
        "[sinks.zone]\nkind = \"route53\"\nhosted_zone_id = \"{zone_id}\"\nzone = \"{ZONE}\"\n\
         region = \"us-east-1\"\nendpoint_url = \"{}\"\ntimeout = \"2s\"\nrecord_style = \"simple\"\n\
         max_requests_per_second = 50.0\n\
         delivery = {{ backoff_min = \"50ms\", backoff_max = \"300ms\", reconcile_interval = \"1s\" }}\n",
        moto.url
    );
    let zone = Zone::Route53 {
        client: moto.client(),
        zone_id: zone_id.clone(),
    };
    vote_scenario([&sink, &sink, &sink], zone).await;
    let reports: Vec<String> = moto
        .records(&zone_id)
        .await
        .into_iter()
        .filter(|r| r.contains("._ho-report."))
        .collect();
    assert_eq!(
        reports.len(),
        2,
        "a's and c's reports, b's removed: {reports:#?}"
    );
    assert!(
        reports[0].starts_with(&format!(
            "a._ho-report.{NAME}. TXT \"ho-report=1 owner=mc cluster=a "
        )),
        "{reports:#?}"
    );
}

/// The zone API calls of each cluster in a steady state of `seconds` (for the budget in
/// bench/README.md; run with `MC_BUDGET_SECONDS`): report reads and writes, and the sink's
/// own writes (each one reads the zone first; `changed` ones also send a change).
async fn report_api_calls(clusters: &[&Cluster], seconds: u64) {
    const SERIES: [&str; 4] = [
        r#"health_orchestrator_cluster_reports_total{op="read",result="ok"}"#,
        r#"health_orchestrator_cluster_reports_total{op="write",result="ok"}"#,
        r#"health_orchestrator_sink_writes_total{sink="zone",result="unchanged"}"#,
        r#"health_orchestrator_sink_writes_total{sink="zone",result="changed"}"#,
    ];
    let sample = |c: &&Cluster| {
        let api = c.api;
        async move {
            let text = try_api_get(api, "/metrics").await.unwrap_or_default();
            SERIES.map(|name| metric(&text, name).unwrap_or(0.0))
        }
    };
    let mut before = Vec::new();
    for c in clusters {
        before.push(sample(c).await);
    }
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    for (c, before) in clusters.iter().zip(before) {
        let after = sample(c).await;
        let per_s: Vec<f64> = (0..4)
            .map(|i| (after[i] - before[i]) / seconds as f64)
            .collect();
        eprintln!(
            "cluster {}: per second: report reads {:.2}, report writes {:.2}, sink writes unchanged {:.2}, changed {:.2}",
            c.id, per_s[0], per_s[1], per_s[2], per_s[3]
        );
    }
}

/// An engine started in-process, as the demo, the load test and these tests start one, not
/// by the binary: it follows the other clusters' reports by itself. Cluster b (a process)
/// lists only its gateway; cluster a's engine starts probing it once b's report names it,
/// and publishes both.
#[actix_rt::test]
async fn an_engine_started_in_process_probes_what_other_clusters_contribute() {
    let pdns = PdnsServer::start(&format!("{ZONE}."));
    let zone = Zone::Dns(SocketAddr::new(pdns.ip.into(), DNS_PORT));
    let (ga, gb) = (VantageGateway::start().await, VantageGateway::start().await);
    let a = Cluster::new("a", &ga, &pdns_sink(&pdns));
    let mut b = Cluster::new("b", &gb, &pdns_sink(&pdns));
    b.start();
    let text = std::fs::read_to_string(a.config()).unwrap();
    let mut engine = start_engine(a.dir.path(), &text).await;
    engine.set_cluster(ho_engine::status::ClusterStatus {
        id: a.id.into(),
        source: "config",
    });
    let b_address: IpAddr = gb.addr.ip();
    eventually("cluster a probes the gateway only cluster b lists", || {
        engine.plan().targets.iter().any(|t| t.address == b_address)
    })
    .await;
    zone.wait_for(&[ga.ip(), gb.ip()]).await;
}
