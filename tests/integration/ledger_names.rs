//! Each name is judged by its own endpoints and its own decision, on a real `pdns_server`
//! asked by the canary: a web name checked by HTTP and a mail name checked by TCP share one
//! gateway address (as teams check HTTP and SMTP on one host). The gateway answers HTTP 503
//! with its port still open: the web name serves a dead address until PowerDNS drops it,
//! the mail name, whose TCP check passes throughout, serves none. Then the mail name is
//! edited by hand in PowerDNS to an address nobody probes: a wrong address until the edit
//! is undone. The expected seconds come from the script's own clock and PowerDNS's answers,
//! within one probe interval plus one canary period per stretch.

use std::time::{Duration, SystemTime};

use ho_testkit::{Behaviour, Gateway};

use crate::answer_canary::{availability, secs};
use crate::harness::*;
use crate::services::pdns::{PdnsServer, DNS_PORT};

const ZONE: &str = "example.org";
const WEB: &str = "www.example.org";
const MAIL: &str = "smtp.example.org";
/// An address no endpoint has.
const UNPROBED: &str = "127.0.7.9";
const INTERVAL: Duration = Duration::from_millis(200);
const EVERY: Duration = Duration::from_millis(200);

fn config(
    pdns: &PdnsServer,
    [shared, web, mail]: [&Gateway; 3],
    state: &std::path::Path,
) -> String {
    let endpoint = |name: &str, g: &Gateway, kind: &str| {
        format!(
            "[[endpoints]]\nname = \"{name}\"\naddress = \"{}\"\ncheck = {{ kind = \"{kind}\", port = {} }}\n\n",
            ip(g),
            g.addr().port()
        )
    };
    let endpoints = [
        endpoint("web-1", shared, "http"),
        endpoint("web-2", web, "http"),
        endpoint("mail-1", shared, "tcp"),
        endpoint("mail-2", mail, "tcp"),
    ]
    .concat();
    TestConfig::defaults(&Check::FAST)
        .with(&format!(
            "state_dir = {state:?}\n\n{endpoints}\
             [[tenants]]\nname = \"web\"\ndomains = [\"{WEB}\"]\nendpoints = [\"web-1\", \"web-2\"]\nsinks = [\"pdns\"]\nttl = \"5s\"\n\n\
             [[tenants]]\nname = \"mail\"\ndomains = [\"{MAIL}\"]\nendpoints = [\"mail-1\", \"mail-2\"]\nsinks = [\"pdns\"]\nttl = \"5s\"\n\n\
             [sinks.pdns]\nkind = \"powerdns\"\nurl = \"{url}\"\napi_key_file = {key:?}\nzone = \"{ZONE}\"\ntimeout = \"1s\"\n\
             delivery = {{ backoff_min = \"50ms\", backoff_max = \"500ms\", reconcile_interval = \"1h\" }}\n\
             canary = {{ address = \"{ip}:{DNS_PORT}\", every = \"{every}ms\", grace = \"1s\" }}\n",
            state = state.display().to_string(),
            every = EVERY.as_millis(),
            ip = pdns.ip,
            url = pdns.url(),
            key = pdns.key_file().display().to_string(),
        ))
        .render()
}

#[actix_rt::test]
async fn two_checks_on_one_address_and_a_hand_edit_are_charged_to_their_own_names() {
    let pdns = PdnsServer::start(&format!("{ZONE}."));
    let mut gws: Vec<Gateway> = (0..3)
        .map(|_| Gateway::start(loopback(), Behaviour::Healthy).unwrap())
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let text = config(
        &pdns,
        [&gws[0], &gws[1], &gws[2]],
        &dir.path().join("state"),
    );
    let engine = start_engine(dir.path(), &text).await;
    let api = serve_api(&engine, None, None).await;
    let web = vec![ip(&gws[0]), ip(&gws[1])];
    let mail = vec![ip(&gws[0]), ip(&gws[2])];
    pdns.wait_for_answer(WEB, "A", &web).await;
    pdns.wait_for_answer(MAIL, "A", &mail).await;
    wait_questions(api, "pdns", "match", 2.0).await;
    let start = SystemTime::now();

    // 1. The shared gateway answers HTTP 503 with its port open: dead for the web name
    // from the fault until PowerDNS drops it; the mail name's TCP check passes.
    let fault = SystemTime::now();
    gws[0].set(Behaviour::Status(503)).unwrap();
    pdns.wait_for_answer(WEB, "A", &[ip(&gws[1])]).await;
    let dead = fault.elapsed().unwrap();
    wait_questions(api, "pdns", "match", 4.0).await;
    gws[0].set(Behaviour::Healthy).unwrap();
    pdns.wait_for_answer(WEB, "A", &web).await;

    // 2. The mail name edited by hand to an address nobody probes, then put back.
    let edit = SystemTime::now();
    let marks = pdns.marks(ZONE);
    pdns.edit_by_hand(ZONE, &marks, &[(MAIL, "A", vec![UNPROBED.to_owned()])]);
    wait_stale(api, "pdns", &[MAIL.to_owned()], true).await;
    wait_questions(api, "pdns", "differs", 3.0).await;
    pdns.edit_by_hand(ZONE, &marks, &[(MAIL, "A", mail.clone())]);
    pdns.wait_for_answer(MAIL, "A", &mail).await;
    let wrong = edit.elapsed().unwrap();
    wait_stale(api, "pdns", &[MAIL.to_owned()], false).await;
    wait_questions(api, "pdns", "match", 2.0).await;

    let end = SystemTime::now();
    let (w, m) = (
        availability(api, WEB, start, end).await,
        availability(api, MAIL, start, end).await,
    );
    println!(
        "web: dead {:.3} s (script {:.3} s), wrong {:.3} s; mail: dead {:.3} s, wrong {:.3} s (script {:.3} s)",
        secs(&w, "seconds_dead_address"),
        dead.as_secs_f64(),
        secs(&w, "seconds_wrong_address"),
        secs(&m, "seconds_dead_address"),
        secs(&m, "seconds_wrong_address"),
        wrong.as_secs_f64()
    );
    let bound = (INTERVAL + EVERY).as_secs_f64();
    assert!(
        (secs(&w, "seconds_dead_address") - dead.as_secs_f64()).abs() <= bound,
        "{w}"
    );
    assert_eq!(secs(&w, "seconds_wrong_address"), 0.0, "{w}");
    assert_eq!(
        secs(&m, "seconds_dead_address"),
        0.0,
        "the mail name's own check passed: {m}"
    );
    assert!(
        (secs(&m, "seconds_wrong_address") - wrong.as_secs_f64()).abs() <= bound,
        "{m}"
    );
    assert!(m["availability"].as_f64().unwrap() < 1.0, "{m}");
    drop(engine);
}
