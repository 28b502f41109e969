//! A seeded night on real back ends: two replicas of one deployment (leader election,
//! shared operator state, a `state_dir` each), each serving three names from its own
//! embedded DNS server while the writer also publishes them to a real `pdns_server`. The
//! seed draws the order of the steps, which gateway fails, which name is edited, referred or
//! failed, which endpoint is drained and through which replica, and how long each lasts:
//! HTTP 503 on a gateway whose other name is checked by TCP (that name is not charged), a
//! gateway refusing, a hand edit in PowerDNS to an address nobody probes, a delegation (a
//! referral), a record that makes PowerDNS answer SERVFAIL, and a drain (maintenance).
//!
//! The expected seconds are the test's own: each stretch runs from the script's action until
//! `dig` sees its end at the back ends that replica's figures read (for a dead address:
//! PowerDNS and that replica's own server both dropped it), or, for a drain, until the
//! undrain. Every replica's `/v1/availability` (every name at once, with intervals) must
//! match them per name and condition within one probe interval plus one canary period per
//! stretch, a condition the script never made must read exactly zero, and the replicas must
//! have recorded the same stretches. The three-cluster vote (a minority fault) has its own
//! night in `ledger_clusters.rs`: three more processes here would double this test's time.
//!
//! `HO_SEED=N` replays a night; the seed and the script are printed first.

mod replicas;
mod script;

use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use ho_testkit::{Behaviour, Gateway};
use serde_json::Value;
use tokio::time::Instant;

use crate::fakes::kube_api::KubeApi;
use crate::harness::*;
use crate::services::dig::{dig, Answer};
use crate::services::pdns::{PdnsServer, DNS_PORT};
use replicas::{gateway, Replica, ADMIN, EVERY, INTERVAL, ZONE};
use script::{failing, Gw, Step, Truth, ENDPOINTS, GATEWAYS, KINDS, NAMES};

/// An address no endpoint has.
const UNPROBED: &str = "127.0.7.9";

/// The parts of the night the steps act on.
struct Night {
    pdns: PdnsServer,
    gws: Vec<Gateway>,
    replicas: [Replica; 2],
    /// The script's account, per replica.
    truth: [Truth; 2],
}

impl Night {
    fn pdns_dns(&self) -> SocketAddr {
        SocketAddr::new(self.pdns.ip.into(), DNS_PORT)
    }

    /// `name`'s addresses, sorted, without the endpoint `drained`.
    fn whole(&self, name: &str, drained: Option<&str>) -> Vec<String> {
        let mut all: Vec<String> = (ENDPOINTS.iter())
            .filter(|e| e.3 == name && Some(e.0) != drained)
            .map(|e| ip(gateway(&self.gws, e.1)))
            .collect();
        all.sort();
        all
    }

    /// Polls PowerDNS and both replicas' servers until each answers `name` with `want`;
    /// when each first did, in that order.
    async fn served(&self, name: &str, want: &[String]) -> [SystemTime; 3] {
        let servers = [self.pdns_dns(), self.replicas[0].dns, self.replicas[1].dns];
        let mut done: [Option<SystemTime>; 3] = [None; 3];
        let start = Instant::now();
        while done.iter().any(Option::is_none) {
            let query = [name, "A"];
            let asked = tokio::join!(
                dig(servers[0], &query),
                dig(servers[1], &query),
                dig(servers[2], &query)
            );
            let asked = [asked.0, asked.1, asked.2];
            let now = SystemTime::now();
            for (d, answer) in done.iter_mut().zip(&asked) {
                if d.is_none() && answer.first().is_some_and(|a| a.sorted() == want) {
                    *d = Some(now);
                }
            }
            assert!(start.elapsed() < LIMIT, "{name} never {want:?}: {asked:?}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        done.map(Option::unwrap)
    }

    /// Polls PowerDNS until its answer for `name` satisfies `done`; when.
    async fn pdns_until(
        &self,
        name: &str,
        what: &str,
        done: impl Fn(&Answer) -> bool,
    ) -> SystemTime {
        let start = Instant::now();
        loop {
            let answer = dig(self.pdns_dns(), &[name, "A"]).await.into_iter().next();
            if answer.as_ref().is_some_and(&done) {
                return SystemTime::now();
            }
            assert!(start.elapsed() < LIMIT, "{name}: never {what}: {answer:?}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Holds a step for `more` of each replica's canary questions to PowerDNS with `result`.
    async fn hold(&self, result: &str, more: u32) {
        for r in &self.replicas {
            wait_questions(r.api, "pdns", result, f64::from(more)).await;
        }
    }

    /// Both canaries saw both back ends answer as decided again: the step is closed.
    async fn settle(&self) {
        for r in &self.replicas {
            for sink in ["pdns", "dns"] {
                wait_questions(r.api, sink, "match", NAMES.len() as f64).await;
            }
        }
    }

    async fn run(&mut self, step: &Step) {
        match *step {
            Step::Http503 { hold } => self.fail(Gw::Shared, Behaviour::Status(503), hold).await,
            Step::Refuse { gateway, hold } => self.fail(gateway, Behaviour::Refuse, hold).await,
            Step::HandEdit { name, hold } => self.hand_edit(name, hold).await,
            Step::Referral { name, hold } => {
                let referral = |a: &Answer| a.answers.is_empty() && !a.authority.is_empty();
                let ns = ("NS", "ns1.elsewhere.test.");
                self.unanswered(name, ns, "a referral", referral, hold)
                    .await
            }
            Step::Servfail { name, hold } => {
                let lua = ("LUA", "A \"error('no answer tonight')\"");
                let servfail = |a: &Answer| a.status == "SERVFAIL";
                self.unanswered(name, lua, "SERVFAIL", servfail, hold).await
            }
            Step::Drain {
                endpoint,
                via,
                hold,
            } => self.drain(endpoint, via, hold).await,
        }
        self.settle().await;
    }

    /// Gateway `g` behaves as `behaviour`: each name whose endpoint there fails is dead, at
    /// each replica, from the fault until PowerDNS and that replica's server dropped it.
    async fn fail(&mut self, g: Gw, behaviour: Behaviour, hold: u32) {
        let refused = matches!(behaviour, Behaviour::Refuse);
        let names: Vec<&'static str> = failing(g, refused).map(|e| e.3).collect();
        let address = ip(gateway(&self.gws, g));
        let at = GATEWAYS.iter().position(|x| *x == g).unwrap();
        let fault = SystemTime::now();
        self.gws[at].set(behaviour).unwrap();
        for &name in &names {
            let without: Vec<String> = (self.whole(name, None).into_iter())
                .filter(|a| *a != address)
                .collect();
            let [pdns, r0, r1] = self.served(name, &without).await;
            self.truth[0].add(name, "dead_address", fault, pdns.max(r0));
            self.truth[1].add(name, "dead_address", fault, pdns.max(r1));
        }
        self.hold("match", hold).await;
        self.gws[at].set(Behaviour::Healthy).unwrap();
        for name in NAMES {
            self.served(name, &self.whole(name, None)).await;
        }
    }

    /// PowerDNS edited by hand to serve [`UNPROBED`] for `name`, then put back: wrong at
    /// every replica from the edit until `dig` sees it undone.
    async fn hand_edit(&mut self, name: &'static str, hold: u32) {
        let marks = self.pdns.marks(ZONE);
        let edit = SystemTime::now();
        self.pdns
            .edit_by_hand(ZONE, &marks, &[(name, "A", vec![UNPROBED.to_owned()])]);
        self.pdns_until(name, "the hand edit", |a| a.sorted() == [UNPROBED])
            .await;
        self.hold("differs", hold).await;
        let whole = self.whole(name, None);
        self.pdns
            .edit_by_hand(ZONE, &marks, &[(name, "A", whole.clone())]);
        let undone = self
            .pdns_until(name, "put back", |a| a.sorted() == whole)
            .await;
        for truth in &mut self.truth {
            truth.add(name, "wrong_address", edit, undone);
        }
    }

    /// `(rtype, content)` put at `name` in PowerDNS until `dig` sees `seen`, then removed:
    /// unanswered at every replica from the change until the address is served again.
    async fn unanswered(
        &mut self,
        name: &'static str,
        (rtype, content): (&str, &str),
        what: &str,
        seen: impl Fn(&Answer) -> bool,
        hold: u32,
    ) {
        let from = SystemTime::now();
        self.put(name, rtype, Some(content));
        self.pdns_until(name, what, seen).await;
        self.hold("differs", hold).await;
        self.put(name, rtype, None);
        let whole = self.whole(name, None);
        let back = self
            .pdns_until(name, "answered", |a| a.sorted() == whole)
            .await;
        for truth in &mut self.truth {
            truth.add(name, "unanswered", from, back);
        }
    }

    /// Replaces (or with no `content`, deletes) the name's rrset of `rtype` behind the
    /// replicas' backs.
    fn put(&self, name: &str, rtype: &str, content: Option<&str>) {
        let rrset = match content {
            Some(content) => serde_json::json!({
                "name": format!("{name}."), "type": rtype, "ttl": 1, "changetype": "REPLACE",
                "records": [{ "content": content, "disabled": false }],
            }),
            None => {
                serde_json::json!({ "name": format!("{name}."), "type": rtype, "changetype": "DELETE" })
            }
        };
        let body = serde_json::json!({ "rrsets": [rrset] }).to_string();
        self.pdns.patch_zone(&format!("{ZONE}."), &body);
    }

    /// `endpoint` drained through replica `via`, undrained through the other: its name in
    /// maintenance at every replica from the drain to the undrain, and charged nothing.
    async fn drain(&mut self, endpoint: &'static str, via: usize, hold: u32) {
        let name = ENDPOINTS.iter().find(|e| e.0 == endpoint).unwrap().3;
        let drained = self.operator(via, endpoint, "drain").await;
        self.served(name, &self.whole(name, Some(endpoint))).await;
        self.hold("match", hold).await;
        let undrained = self.operator(1 - via, endpoint, "undrain").await;
        self.served(name, &self.whole(name, None)).await;
        for truth in &mut self.truth {
            truth.add(name, "maintenance", drained, undrained);
        }
    }

    /// Sends an operator action to replica `r`; when it was taken.
    async fn operator(&self, r: usize, endpoint: &str, action: &str) -> SystemTime {
        let path = format!("/v1/endpoints/{endpoint}/{action}");
        let (code, body) = api_request(self.replicas[r].api, "POST", &path, Some(ADMIN)).await;
        assert_eq!(code, 200, "{action} {endpoint}: {body}");
        SystemTime::now()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seeded_night_is_charged_alike_at_every_replica_and_as_the_script_says() {
    let took = Instant::now();
    let seed = script::seed();
    let steps = script::script(seed);
    println!("HO_SEED={seed}: {steps:?}");
    let pdns = PdnsServer::start(&format!("{ZONE}."));
    let gws: Vec<Gateway> = GATEWAYS
        .iter()
        .map(|_| Gateway::start(loopback(), Behaviour::Healthy).unwrap())
        .collect();
    let kube = KubeApi::default();
    let kube_addr = kube.start().await;
    let first = Replica::start("r1", kube_addr, &pdns, &gws);
    first.wait_for_role("leader").await;
    let second = Replica::start("r2", kube_addr, &pdns, &gws);
    second.wait_for_role("standby").await;
    let mut night = Night {
        pdns,
        gws,
        replicas: [first, second],
        truth: Default::default(),
    };
    for name in NAMES {
        night.served(name, &night.whole(name, None)).await;
    }
    night.settle().await;
    let start = SystemTime::now();
    for step in &steps {
        night.run(step).await;
    }
    let end = SystemTime::now();

    let mut figures: Vec<Vec<Value>> = Vec::new();
    for r in &night.replicas {
        figures.push(every_name(r.api, start, end).await);
    }
    judge(seed, &night.truth, &figures);
    println!(
        "HO_SEED={seed}: the night took {:.1} s of wall time",
        took.elapsed().as_secs_f64()
    );
}

/// Holds each replica's figures to the script's account (see the module's doc).
fn judge(seed: u64, truth: &[Truth; 2], figures: &[Vec<Value>]) {
    let per_stretch = (INTERVAL + EVERY).as_secs_f64();
    let mut wrong = Vec::new();
    for (r, (truth, names)) in truth.iter().zip(figures).enumerate() {
        for name in NAMES {
            let v = names
                .iter()
                .find(|v| v["name"] == name)
                .unwrap_or_else(|| panic!("no {name} at replica {r}"));
            for kind in KINDS {
                let (want, stretches) = truth.of(name, kind);
                let got = outside_maintenance(v, kind);
                println!("replica {r} {name} {kind}: ledger {got:.3} s, script {want:.3} s over {stretches}");
                let off = (got - want).abs() > per_stretch * f64::from(stretches.max(1));
                if (stretches == 0 && got != 0.0) || off {
                    wrong.push(format!(
                        "replica {r} {name} {kind}: ledger {got:.3} s, script {want:.3} s"
                    ));
                }
                // No step overlaps a drain: inside its maintenance a drain charges at most
                // a canary period (the standby to which the drain is sent may see the
                // drained address served for one question while the writer's write is on
                // its way), never a stretch as long as a step's.
                let all = v[format!("seconds_{kind}")].as_f64().unwrap();
                let drains = truth.of(name, "maintenance").1;
                if all - got > 0.002 + EVERY.as_secs_f64() * f64::from(drains) {
                    wrong.push(format!(
                        "replica {r} {name} {kind}: {all:.3} s in all, {got:.3} s outside maintenance"
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "HO_SEED={seed}:\n{}\n{figures:#?}",
        wrong.join("\n")
    );
    // One truth: both replicas recorded the same stretches, per name, in the same order.
    for name in NAMES {
        let kinds: Vec<Vec<String>> = figures.iter().map(|f| stretches(f, name)).collect();
        let intervals: Vec<String> = (figures.iter())
            .map(|f| f.iter().find(|v| v["name"] == name).unwrap()["intervals"].to_string())
            .collect();
        assert_eq!(
            kinds[0],
            kinds[1],
            "HO_SEED={seed}: {name} at the two replicas:\n{}",
            intervals.join("\n")
        );
        let mut charged: Vec<&str> = (KINDS[..3].iter().copied())
            .filter(|k| truth[0].of(name, k).1 > 0)
            .collect();
        let mut recorded: Vec<&str> = kinds[0].iter().map(String::as_str).collect();
        recorded.sort();
        recorded.dedup();
        charged.sort();
        assert_eq!(recorded, charged, "HO_SEED={seed}: {name}: {kinds:?}");
    }
}

/// Every name's figures over `[from, to)` with their intervals, from one replica.
async fn every_name(api: SocketAddr, from: SystemTime, to: SystemTime) -> Vec<Value> {
    let path = format!(
        "/v1/availability?from={}&to={}&intervals=true",
        humantime::format_rfc3339_millis(from),
        humantime::format_rfc3339_millis(to)
    );
    let body = api_get(api, &path).await;
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// `v`'s seconds of `kind` outside maintenance, from its intervals: what the figures
/// count against a name (maintenance is `seconds_maintenance` itself).
fn outside_maintenance(v: &Value, kind: &str) -> f64 {
    if kind == "maintenance" {
        return v["seconds_maintenance"].as_f64().unwrap();
    }
    let at = |i: &Value, key: &str| humantime::parse_rfc3339(i[key].as_str().unwrap()).unwrap();
    (v["intervals"].as_array().into_iter().flatten())
        .filter(|i| i["maintenance"] == false && i["served"] == kind)
        .map(|i| {
            at(i, "to")
                .duration_since(at(i, "from"))
                .unwrap()
                .as_secs_f64()
        })
        .sum()
}

/// The kinds of `name`'s stretches other than answered outside maintenance (what the
/// figures count), in order, a run of one kind as one: two replicas may see one stretch as
/// two pieces (a canary question between them answered as decided, as a standby's own
/// server drops a dead address before the writer's PowerDNS does), never a kind one saw and
/// the other did not.
fn stretches(figures: &[Value], name: &str) -> Vec<String> {
    let v = figures.iter().find(|v| v["name"] == name).unwrap();
    let mut kinds: Vec<String> = (v["intervals"].as_array().into_iter().flatten())
        .filter(|i| i["maintenance"] == false)
        .filter_map(|i| i["served"].as_str())
        .filter(|s| *s != "answered")
        .map(str::to_owned)
        .collect();
    kinds.dedup();
    kinds
}
