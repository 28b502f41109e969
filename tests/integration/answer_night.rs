//! The scripted night at the load-test farm's scale: 1,000 gateways (the test kit's shared
//! farm), 200 names, each the one name of a tenant of five gateways, published through the
//! embedded server and a real `pdns_server` and asked by the canary at both. At known times:
//! 40 names lose a gateway; PowerDNS is then edited by hand to serve the dead address of 20
//! of them again (a stale back end) until the edit is undone; 20 other names are deleted
//! from PowerDNS by hand for a while (unanswered); 20 names have a gateway drained
//! (maintenance); 120 names are left alone.
//!
//! The ground truth is the script's own clock and `dig`: a dead address is served from the
//! fault until `dig` sees it gone from both back ends, and from a hand edit until it is
//! undone; a name is unanswered from its deletion until it is put back; in maintenance from
//! the drain to the undrain. Per name, the ledger's seconds match the truth within one probe
//! interval plus one canary period per stretch, and a name the script never touched has
//! none; every stale name is reported within the grace plus one canary period.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use ho_testkit::{Behaviour, SharedFarm};
use tokio::time::Instant;

use crate::harness::*;
use crate::services::dig::dig;
use crate::services::pdns::{PdnsServer, DNS_PORT};

const ZONE: &str = "night.example.org";
const NAMES: usize = 200;
const PER_NAME: usize = 5;
/// Names `FAULTED` lose their first gateway; `STALE` of them are then served dead by hand.
const FAULTED: std::ops::Range<usize> = 0..40;
const STALE: std::ops::Range<usize> = 0..20;
const DELETED: std::ops::Range<usize> = 40..60;
const DRAINED: std::ops::Range<usize> = 60..80;
/// The probes' interval, and the canary's period and grace at both back ends.
const INTERVAL: Duration = Duration::from_millis(500);
const EVERY: Duration = Duration::from_millis(500);
const GRACE: Duration = Duration::from_secs(1);
/// A stretch of the script is held for this many of the canary's questions per name: long
/// enough (about 2 s) that a stretch the ledger missed is past the tolerance.
const HOLD: f64 = 4.0;
/// Setting up and settling 200 names on two back ends takes longer than [`LIMIT`].
const SETTLE: Duration = Duration::from_secs(60);

const CHECK: Check = Check {
    interval: "500ms",
    timeout: "200ms",
    ..Check::FAST
};

fn name(i: usize) -> String {
    format!("n{i}.{ZONE}")
}

fn gateway(i: usize, k: usize) -> usize {
    i * PER_NAME + k
}

fn config(farm: &SharedFarm, pdns: &PdnsServer, server: SocketAddr, state: &str) -> String {
    let mut text = format!(
        "state_dir = {state:?}\n\n\
         [sinks.dns]\nkind = \"dns_server\"\nlisten = [\"{server}\"]\nzones = [\"{ZONE}\"]\n\
         canary = {{ every = \"{every}ms\", grace = \"{grace}s\", max_queries_per_second = 2000 }}\n\n\
         [sinks.pdns]\nkind = \"powerdns\"\nurl = \"{url}\"\napi_key_file = {key:?}\nzone = \"{ZONE}\"\ntimeout = \"2s\"\n\
         delivery = {{ backoff_min = \"50ms\", backoff_max = \"500ms\", reconcile_interval = \"1h\" }}\n\
         canary = {{ address = \"{ip}:{DNS_PORT}\", every = \"{every}ms\", grace = \"{grace}s\", max_queries_per_second = 2000 }}\n",
        every = EVERY.as_millis(),
        grace = GRACE.as_secs(),
        url = pdns.url(),
        key = pdns.key_file().display().to_string(),
        ip = pdns.ip,
    );
    for i in 0..NAMES {
        let mut members = Vec::new();
        for k in 0..PER_NAME {
            let g = gateway(i, k);
            let a = farm.addr(g);
            let drain = if k == 0 && DRAINED.contains(&i) {
                "labels = { night = \"drain\" }\n"
            } else {
                ""
            };
            text += &format!(
                "\n[[endpoints]]\nname = \"gw-{g}\"\naddress = \"{}\"\ncheck = {{ port = {} }}\n{drain}",
                a.ip(),
                a.port()
            );
            members.push(format!("\"gw-{g}\""));
        }
        text += &format!(
            "\n[[tenants]]\nname = \"t{i}\"\ndomains = [\"{}\"]\nendpoints = [{}]\nsinks = [\"dns\", \"pdns\"]\nttl = \"5s\"\n",
            name(i),
            members.join(", ")
        );
    }
    TestConfig::defaults(&CHECK).with(&text).render()
}

/// The sorted addresses `server` answers for each of `names` (none for NXDOMAIN/NODATA).
async fn answers(server: SocketAddr, names: &[String]) -> Vec<Vec<String>> {
    let queries: Vec<&str> = names.iter().flat_map(|n| [n.as_str(), "A"]).collect();
    let got = dig(server, &queries).await;
    assert_eq!(got.len(), names.len(), "{server}: {got:?}");
    got.iter().map(|a| a.sorted()).collect()
}

/// The addresses of name `i` with gateways `without` left out, sorted.
fn addresses(farm: &SharedFarm, i: usize, without: &[usize]) -> Vec<String> {
    let mut all: Vec<String> = (0..PER_NAME)
        .filter(|k| !without.contains(k))
        .map(|k| farm.addr(gateway(i, k)).ip().to_string())
        .collect();
    all.sort();
    all
}

/// Polls both back ends until each of `names` is answered as `want` says; when each first
/// was, on both (`SystemTime`, the ledger's clock).
async fn when_served(
    servers: [SocketAddr; 2],
    which: &[usize],
    want: impl Fn(usize) -> Vec<String>,
    bound: Duration,
) -> Vec<SystemTime> {
    let names: Vec<String> = which.iter().map(|&i| name(i)).collect();
    let mut done: Vec<Option<SystemTime>> = vec![None; which.len()];
    let start = Instant::now();
    while done.iter().any(Option::is_none) {
        let (a, b) = tokio::join!(answers(servers[0], &names), answers(servers[1], &names));
        let now = SystemTime::now();
        for (j, &i) in which.iter().enumerate() {
            if done[j].is_none() && a[j] == want(i) && b[j] == want(i) {
                done[j] = Some(now);
            }
        }
        let missing: Vec<&String> = (names.iter().zip(&done))
            .filter(|(_, d)| d.is_none())
            .map(|(n, _)| n)
            .collect();
        assert!(
            start.elapsed() < bound,
            "never served as wanted: {missing:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    done.into_iter().map(Option::unwrap).collect()
}

/// Holds a stretch of the script for [`HOLD`] of the canary's questions to each of the
/// `names` it changed, answered with `result` at PowerDNS.
async fn hold(api: SocketAddr, result: &str, names: usize) {
    wait_questions(api, "pdns", result, HOLD * names as f64).await;
}

/// The script's truth for one name: seconds of a dead address, unanswered, maintenance.
#[derive(Debug, Default, Clone, Copy)]
struct Truth {
    dead: f64,
    unanswered: f64,
    maintenance: f64,
    /// Stretches the figures add up (the tolerance is per stretch).
    stretches: u32,
}

fn since(a: SystemTime, b: SystemTime) -> f64 {
    b.duration_since(a).unwrap().as_secs_f64()
}

#[actix_rt::test]
async fn a_night_at_a_thousand_gateways_is_accounted_for_per_name() {
    let farm =
        SharedFarm::start(loopback_range((NAMES * PER_NAME) as u32), NAMES * PER_NAME).unwrap();
    let pdns = PdnsServer::start(&format!("{ZONE}."));
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state").display().to_string();
    let server = SocketAddr::new(loopback_ip().into(), free_port_pair());
    let pdns_dns = SocketAddr::new(pdns.ip.into(), DNS_PORT);
    let servers = [server, pdns_dns];
    let engine = start_engine(dir.path(), &config(&farm, &pdns, server, &state)).await;
    let api = serve_api(&engine, None, Some("admin")).await;
    let all: Vec<usize> = (0..NAMES).collect();
    when_served(servers, &all, |i| addresses(&farm, i, &[]), SETTLE).await;
    // The night starts once the canaries asked every name after its first answer.
    for sink in ["dns", "pdns"] {
        wait_questions(api, sink, "match", NAMES as f64).await;
    }
    let start = SystemTime::now();
    let mut truth = vec![Truth::default(); NAMES];

    // 1. A gateway of each of 40 names fails: dead from the fault until gone from both.
    let faulted: Vec<usize> = FAULTED.collect();
    let fault = SystemTime::now();
    for &i in &faulted {
        farm.set(gateway(i, 0), &Behaviour::Refuse);
    }
    let gone = when_served(servers, &faulted, |i| addresses(&farm, i, &[0]), LIMIT).await;
    for (&i, at) in faulted.iter().zip(gone) {
        truth[i].dead += since(fault, at);
        truth[i].stretches += 1;
    }

    // 2. PowerDNS is edited by hand to serve the dead address of 20 of them again.
    let stale: Vec<String> = STALE.map(name).collect();
    let marks = pdns.marks(ZONE);
    let edits = |without: &[usize]| -> Vec<(&str, &str, Vec<String>)> {
        (STALE.zip(&stale))
            .map(|(i, n)| (n.as_str(), "A", addresses(&farm, i, without)))
            .collect()
    };
    let edited = SystemTime::now();
    pdns.edit_by_hand(ZONE, &marks, &edits(&[]));
    let reported = wait_stale(api, "pdns", &stale, true).await;
    println!(
        "20 names served a dead address by hand: all reported stale after {} ms",
        reported.as_millis()
    );
    assert!(
        reported <= GRACE + EVERY + Duration::from_millis(300),
        "stale reported after {reported:?}, past grace + one canary period"
    );
    hold(api, "differs", stale.len()).await;
    pdns.edit_by_hand(ZONE, &marks, &edits(&[0]));
    let undone = SystemTime::now();
    for i in STALE {
        truth[i].dead += since(edited, undone);
        truth[i].stretches += 1;
    }
    wait_stale(api, "pdns", &stale, false).await;

    // 3. 20 names are deleted from PowerDNS by hand, then put back.
    let deleted: Vec<String> = DELETED.map(name).collect();
    let gone: Vec<(&str, &str, Vec<String>)> =
        deleted.iter().map(|n| (n.as_str(), "A", vec![])).collect();
    let at = SystemTime::now();
    pdns.edit_by_hand(ZONE, &marks, &gone);
    let reported = wait_stale(api, "pdns", &deleted, true).await;
    assert!(
        reported <= GRACE + EVERY + Duration::from_millis(300),
        "unanswered names reported after {reported:?}"
    );
    hold(api, "differs", deleted.len()).await;
    let back: Vec<(&str, &str, Vec<String>)> = (DELETED.zip(&deleted))
        .map(|(i, n)| (n.as_str(), "A", addresses(&farm, i, &[])))
        .collect();
    pdns.edit_by_hand(ZONE, &marks, &back);
    let restored = SystemTime::now();
    for i in DELETED {
        truth[i].unanswered += since(at, restored);
        truth[i].stretches += 1;
    }
    wait_stale(api, "pdns", &deleted, false).await;

    // 4. An operator drains a gateway of each of 20 names, then undrains them.
    let (code, body) = api_request(
        api,
        "POST",
        "/v1/endpoints/*/drain?night=drain",
        Some("admin"),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let drained = SystemTime::now();
    let names: Vec<usize> = DRAINED.collect();
    when_served(servers, &names, |i| addresses(&farm, i, &[0]), LIMIT).await;
    hold(api, "match", NAMES).await;
    let (code, body) = api_request(
        api,
        "POST",
        "/v1/endpoints/*/undrain?night=drain",
        Some("admin"),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let undrained = SystemTime::now();
    for i in DRAINED {
        truth[i].maintenance += since(drained, undrained);
        truth[i].stretches += 1;
    }

    // Dawn: the faulted gateways heal; every name is served whole on both back ends and
    // asked once more, which closes the ledger's last stretches.
    for &i in &faulted {
        farm.set(gateway(i, 0), &Behaviour::Healthy);
    }
    when_served(servers, &all, |i| addresses(&farm, i, &[]), LIMIT).await;
    for sink in ["dns", "pdns"] {
        wait_questions(api, sink, "match", NAMES as f64).await;
    }
    let end = SystemTime::now();

    let path = format!(
        "/v1/availability?from={}&to={}",
        humantime::format_rfc3339_millis(start),
        humantime::format_rfc3339_millis(end)
    );
    let ledger: serde_json::Value = serde_json::from_str(&api_get(api, &path).await).unwrap();
    let ledger = ledger.as_array().expect("every name's figures");
    let per_stretch = (INTERVAL + EVERY).as_secs_f64();
    let mut worst = [0.0f64; 3];
    let mut wrong = Vec::new();
    for (i, truth) in truth.iter().enumerate() {
        let n = name(i);
        let got = ledger
            .iter()
            .find(|a| a["name"] == n)
            .unwrap_or_else(|| panic!("no figures for {n}"));
        let bound = per_stretch * f64::from(truth.stretches.max(1));
        for (slot, (key, want)) in [
            ("seconds_dead_address", truth.dead),
            ("seconds_unanswered", truth.unanswered),
            ("seconds_maintenance", truth.maintenance),
        ]
        .into_iter()
        .enumerate()
        {
            let have = got[key]
                .as_f64()
                .unwrap_or_else(|| panic!("{key} of {n}: {got}"));
            let error = (have - want).abs();
            worst[slot] = worst[slot].max(error);
            // A figure the script never made must be exactly zero.
            if (want == 0.0 && have != 0.0) || error > bound {
                wrong.push(format!("{n} {key}: ledger {have:.3} s, script {want:.3} s"));
            }
        }
    }
    println!(
        "night of {:.1} s, {NAMES} names on {} gateways: largest |ledger - script| dead {:.3} s, unanswered {:.3} s, maintenance {:.3} s (bound {per_stretch:.1} s a stretch)",
        since(start, end),
        farm.len(),
        worst[0],
        worst[1],
        worst[2]
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    drop(farm);
}
