//! One truth for a name across clusters: three clusters vote on one name in a real
//! `pdns_server` zone, each with its own canary asking PowerDNS and its own ledger, through
//! a night of ordinary faults: a gateway seen down by one cluster only (the vote keeps it),
//! a gateway down for all (withdrawn), a hand edit to an address nobody probes, a
//! delegation put in front of the name (a referral, as during a cut-over), and a record
//! that makes PowerDNS answer SERVFAIL.
//!
//! The expected seconds come from the script's own clock and `dig`, not from the engine:
//! a stretch runs from the script's action until `dig` sees its end. Every cluster's
//! `/v1/availability` must match them within one probe interval, one canary period and one
//! report round per stretch (the vote decides a round after the probes), and the clusters
//! must agree with each other: the same stretches, each kind's seconds within the same
//! bound.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use serde_json::Value;
use tokio::time::Instant;

use crate::answer_canary::{availability, secs};
use crate::harness::*;
use crate::services::clusters::{Cluster, VantageGateway, NAME, ZONE};
use crate::services::dig::{dig, Answer};
use crate::services::pdns::{PdnsServer, DNS_PORT};

/// An address no endpoint has.
const UNPROBED: &str = "127.0.7.9";
/// The clusters' probe interval (`Check::FAST`), canary period and report interval.
const INTERVAL: Duration = Duration::from_millis(200);
const EVERY: Duration = Duration::from_millis(200);
const REPORT: Duration = Duration::from_millis(300);
/// How many of its canary's questions each cluster sees within a stretch: long enough
/// (about 0.6 s) that a stretch a ledger missed is past the tolerance.
const HOLD: f64 = 3.0;

/// The shared zone in PowerDNS, asked by each cluster's canary; reconciled only hourly, so
/// a hand edit stays until the script undoes it.
fn sink(pdns: &PdnsServer) -> String {
    format!(
        "[sinks.zone]\nkind = \"powerdns\"\nurl = \"{url}\"\napi_key_file = {key:?}\nzone = \"{ZONE}\"\ntimeout = \"1s\"\n\
         delivery = {{ backoff_min = \"50ms\", backoff_max = \"500ms\", reconcile_interval = \"1h\" }}\n\
         canary = {{ address = \"{ip}:{DNS_PORT}\", every = \"{every}ms\", grace = \"1s\" }}\n",
        url = pdns.url(),
        key = pdns.key_file().display().to_string(),
        ip = pdns.ip,
        every = EVERY.as_millis(),
    )
}

/// PowerDNS's answer for the name, as a resolver gets it.
async fn ask(pdns: &PdnsServer) -> Option<Answer> {
    dig(SocketAddr::new(pdns.ip.into(), DNS_PORT), &[NAME, "A"])
        .await
        .into_iter()
        .next()
}

/// Polls PowerDNS until its answer satisfies `done`.
async fn until(pdns: &PdnsServer, what: &str, done: impl Fn(&Answer) -> bool) {
    let start = Instant::now();
    loop {
        let answer = ask(pdns).await;
        if answer.as_ref().is_some_and(&done) {
            return;
        }
        assert!(start.elapsed() < LIMIT, "never {what}: {answer:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until every cluster's canary has asked `more` questions with `result`.
async fn hold(clusters: &[&Cluster], result: &str, more: f64) {
    for c in clusters {
        wait_questions(c.api, "zone", result, more).await;
    }
}

/// Replaces (or with no `content`, deletes) the name's rrset of `rtype` behind the
/// orchestrators' backs.
fn put(pdns: &PdnsServer, rtype: &str, content: Option<&str>) {
    let rrset = match content {
        Some(content) => serde_json::json!({
            "name": format!("{NAME}."), "type": rtype, "ttl": 1, "changetype": "REPLACE",
            "records": [{ "content": content, "disabled": false }],
        }),
        None => {
            serde_json::json!({ "name": format!("{NAME}."), "type": rtype, "changetype": "DELETE" })
        }
    };
    pdns.patch_zone(
        &format!("{ZONE}."),
        &serde_json::json!({ "rrsets": [rrset] }).to_string(),
    );
}

/// The script's own account: seconds per condition, and how many stretches each had.
#[derive(Default)]
struct Truth {
    dead: (f64, u32),
    wrong: (f64, u32),
    unanswered: (f64, u32),
}

impl Truth {
    fn kinds(&self) -> [(&'static str, (f64, u32)); 3] {
        [
            ("dead_address", self.dead),
            ("wrong_address", self.wrong),
            ("unanswered", self.unanswered),
        ]
    }
}

fn add(stretch: &mut (f64, u32), since: SystemTime) {
    stretch.0 += since.elapsed().unwrap().as_secs_f64();
    stretch.1 += 1;
}

/// The stretches other than answered, by kind, in `v`'s order.
fn kinds_of(v: &Value) -> Vec<String> {
    (v["intervals"].as_array().into_iter().flatten())
        .filter_map(|i| i["served"].as_str())
        .filter(|s| *s != "answered")
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_clusters_charge_one_night_alike_and_as_the_script_says() {
    let pdns = PdnsServer::start(&format!("{ZONE}."));
    let (ga, gb, gc) = (
        VantageGateway::start().await,
        VantageGateway::start().await,
        VantageGateway::start().await,
    );
    let zone = sink(&pdns);
    let mut a = Cluster::new("a", &ga, &zone);
    let mut b = Cluster::new("b", &gb, &zone);
    let mut c = Cluster::new("c", &gc, &zone);
    for cluster in [&mut a, &mut b, &mut c] {
        cluster.start();
    }
    let clusters = [&a, &b, &c];
    let all = vec![ga.ip(), gb.ip(), gc.ip()];
    pdns.wait_for_answer(NAME, "A", &all).await;
    for cluster in clusters {
        cluster
            .wait_for_votes("three live voters", |v| {
                v["live"].as_array().is_some_and(|l| l.len() == 3)
            })
            .await;
    }
    hold(&clusters, "match", 2.0).await;
    let start = SystemTime::now();
    let mut truth = Truth::default();

    // 1. One cluster alone sees gw-c down: the vote keeps it, no cluster charges anything.
    gc.fail_for(&[&c]);
    for cluster in clusters {
        cluster
            .wait_for_votes("c's own down vote on gw-c", |v| {
                down_votes(v, &gc.ip()) == ["c"]
            })
            .await;
    }
    hold(&clusters, "match", HOLD).await;
    assert_eq!(pdns.dig(NAME, "A").await, sorted(&all), "1 of 3 keeps it");
    gc.fail_for(&[]);

    // 2. gw-b down for every cluster: dead until PowerDNS stops serving it.
    let fault = SystemTime::now();
    gb.fail_for(&clusters);
    pdns.wait_for_answer(NAME, "A", &[ga.ip(), gc.ip()]).await;
    add(&mut truth.dead, fault);
    println!(
        "fault at {}, withdrawn at {}",
        humantime::format_rfc3339_millis(fault),
        humantime::format_rfc3339_millis(SystemTime::now())
    );
    hold(&clusters, "match", HOLD).await;
    gb.fail_for(&[]);
    pdns.wait_for_answer(NAME, "A", &all).await;
    hold(&clusters, "match", 2.0).await;

    // 3. A hand edit to an address nobody probes, then undone.
    let edit = SystemTime::now();
    put(&pdns, "A", Some(UNPROBED));
    for cluster in clusters {
        wait_stale(cluster.api, "zone", &[NAME.to_owned()], true).await;
    }
    hold(&clusters, "differs", HOLD).await;
    pdns.edit_by_hand(ZONE, &pdns.marks(ZONE), &[(NAME, "A", all.clone())]);
    pdns.wait_for_answer(NAME, "A", &all).await;
    add(&mut truth.wrong, edit);
    for cluster in clusters {
        wait_stale(cluster.api, "zone", &[NAME.to_owned()], false).await;
    }

    // 4. A delegation in front of the name: PowerDNS refers resolvers elsewhere.
    let referred = SystemTime::now();
    put(&pdns, "NS", Some("ns1.elsewhere.test."));
    until(&pdns, "a referral", |a| {
        a.answers.is_empty() && !a.authority.is_empty()
    })
    .await;
    hold(&clusters, "differs", HOLD).await;
    put(&pdns, "NS", None);
    pdns.wait_for_answer(NAME, "A", &all).await;
    add(&mut truth.unanswered, referred);
    hold(&clusters, "match", 2.0).await;

    // 5. A record PowerDNS cannot answer: SERVFAIL.
    let failing = SystemTime::now();
    put(&pdns, "LUA", Some("A \"error('no answer tonight')\""));
    until(&pdns, "SERVFAIL", |a| a.status == "SERVFAIL").await;
    hold(&clusters, "differs", HOLD).await;
    put(&pdns, "LUA", None);
    pdns.wait_for_answer(NAME, "A", &all).await;
    add(&mut truth.unanswered, failing);
    hold(&clusters, "match", 2.0).await;
    let end = SystemTime::now();

    let per_stretch = (INTERVAL + EVERY + REPORT).as_secs_f64();
    let mut figures = Vec::new();
    for cluster in clusters {
        let v = availability(cluster.api, NAME, start, end).await;
        for (kind, (seconds, stretches)) in truth.kinds() {
            let got = secs(&v, &format!("seconds_{kind}"));
            println!(
                "cluster {}: {kind} {got:.3} s (script {seconds:.3} s over {stretches})",
                cluster.id
            );
            assert!(
                (got - seconds).abs() <= per_stretch * f64::from(stretches.max(1)),
                "cluster {}: {kind} {got:.3} s, the script says {seconds:.3} s: {v}",
                cluster.id
            );
        }
        figures.push(v);
    }
    // One truth: whichever cluster is asked, each kind's seconds agree within a probe
    // interval and a canary period per stretch (their probes and canaries are that apart).
    let apart = (INTERVAL + EVERY).as_secs_f64();
    for (kind, (_, stretches)) in truth.kinds() {
        let seconds: Vec<f64> = (figures.iter())
            .map(|v| secs(v, &format!("seconds_{kind}")))
            .collect();
        let spread = seconds.iter().cloned().fold(f64::MIN, f64::max)
            - seconds.iter().cloned().fold(f64::MAX, f64::min);
        assert!(
            spread <= apart * f64::from(stretches.max(1)),
            "{kind}: the clusters say {seconds:?}"
        );
    }
    let stretches: Vec<Vec<String>> = figures.iter().map(kinds_of).collect();
    assert!(
        stretches.windows(2).all(|w| w[0] == w[1]),
        "the clusters recorded different stretches: {stretches:?}\n{}",
        figures
            .iter()
            .map(|v| v["intervals"].to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(
        stretches[0].len(),
        4,
        "dead, wrong, referral, SERVFAIL: {stretches:?}"
    );
}

/// The clusters that vote `address` down in a vote as `/status` shows it.
fn down_votes(votes: &Value, address: &str) -> Vec<String> {
    (votes["addresses"].as_array().into_iter().flatten())
        .find(|a| a["address"] == address)
        .and_then(|a| a["down_votes"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|c| c.as_str().map(str::to_owned))
        .collect()
}

fn sorted(v: &[String]) -> Vec<String> {
    let mut v = v.to_vec();
    v.sort();
    v
}
