//! The answer canary finds a PowerDNS sink's DNS port by itself: with no `canary.address`,
//! the sink's API reports the server's `local-address` and `local-port` and the canary asks
//! there (a real `pdns_server`), reporting a hand edit like any other stale answer, in a
//! series labelled with the tenant and the name. While
//! the API cannot be asked, or its settings name no address, `/status` lists the sink under
//! `canaries_off` with why, and the canary asks again until it can.

use std::net::SocketAddr;

use crate::fakes::powerdns51::{PowerDns51, KEY};
use crate::harness::*;
use crate::services::pdns::{PdnsServer, DNS_PORT};

const ZONE: &str = "ports.example";
const NAME: &str = "www.ports.example";

/// One tenant on gateway `gws` published through a PowerDNS sink at `url` with no
/// `canary.address`; the canary asks every 200 ms, stale after 1 s.
fn config(gws: &[&ho_testkit::Gateway], url: &str, key: &std::path::Path) -> String {
    let tail = format!(
        "[[tenants]]\nname = \"www\"\ndomains = [\"{NAME}\"]\nsinks = [\"pdns\"]\nttl = \"5s\"\n\n\
         [sinks.pdns]\nkind = \"powerdns\"\nurl = \"{url}\"\napi_key_file = {key:?}\nzone = \"{ZONE}\"\ntimeout = \"1s\"\n\
         delivery = {{ backoff_min = \"50ms\", backoff_max = \"500ms\", reconcile_interval = \"1h\" }}\n\
         canary = {{ every = \"200ms\", grace = \"1s\" }}\n",
        key = key.display().to_string(),
    );
    crate::harness::config(&Check::FAST, gws, &tail)
}

/// `/status`'s parsed document.
async fn status(api: SocketAddr) -> serde_json::Value {
    serde_json::from_str(&api_get(api, "/status").await).unwrap()
}

/// The address `/status` says sink `sink`'s canary asks, once it runs.
async fn asked(api: SocketAddr, sink: &str) -> Option<String> {
    let status = status(api).await;
    (status["canaries"].as_array().into_iter().flatten())
        .find(|c| c["sink"] == sink)
        .map(|c| c["address"].as_str().unwrap().to_owned())
}

/// Why `/status` says no canary asks sink `sink`, if it says so.
async fn off_reason(api: SocketAddr, sink: &str) -> Option<String> {
    let status = status(api).await;
    (status["canaries_off"].as_array().into_iter().flatten())
        .find(|o| o["sink"] == sink)
        .map(|o| o["reason"].as_str().unwrap().to_owned())
}

#[actix_rt::test]
async fn the_canary_asks_where_powerdns_says_it_answers_and_reports_a_hand_edit() {
    let pdns = PdnsServer::start(&format!("{ZONE}."));
    let gws = gateways(1);
    let dir = tempfile::tempdir().unwrap();
    let text = config(
        &gws.iter().collect::<Vec<_>>(),
        &pdns.url(),
        &pdns.key_file(),
    );
    assert!(
        (text.lines().filter(|l| l.starts_with("canary"))).all(|l| !l.contains("address")),
        "no canary.address: {text}"
    );
    let mut engine = start_engine(dir.path(), &text).await;
    let api = serve_api(&engine, None, None).await;
    pdns.wait_for_answer(NAME, "A", &[ip(&gws[0])]).await;
    // Where the test started the server: its own loopback address, on the DNS port.
    let expected = format!("{}:{DNS_PORT}", pdns.ip);
    eventually_async("the canary asking PowerDNS", async || {
        asked(api, "pdns").await.is_some()
    })
    .await;
    assert_eq!(asked(api, "pdns").await.as_deref(), Some(expected.as_str()));
    assert_eq!(off_reason(api, "pdns").await, None);
    wait_questions(api, "pdns", "match", 1.0).await;

    // An operator points the name at an address nobody decided.
    let wrong = "127.0.7.9".to_owned();
    pdns.edit_by_hand(ZONE, &pdns.marks(ZONE), &[(NAME, "A", vec![wrong.clone()])]);
    wait_stale(api, "pdns", &[NAME.to_owned()], true).await;
    let stale = canary_stale(api, "pdns").await;
    assert_eq!(stale.len(), 1, "{stale:?}");
    assert_eq!(stale[0]["served"], serde_json::json!([wrong]), "{stale:?}");
    assert_eq!(stale[0]["intended"], serde_json::json!([ip(&gws[0])]));
    // The alert's series names the tenant and the name.
    let series = format!(
        "health_orchestrator_canary_stale_answer{{sink=\"pdns\",tenant=\"www\",name=\"{NAME}\",geo=\"\"}}"
    );
    assert_eq!(metric(&api_get(api, "/metrics").await, &series), Some(1.0));
    let count = "health_orchestrator_canary_stale_names{sink=\"pdns\"}";
    assert_eq!(metric(&api_get(api, "/metrics").await, count), Some(1.0));

    // Put back: served as decided again, and the series is gone.
    pdns.edit_by_hand(ZONE, &pdns.marks(ZONE), &[(NAME, "A", vec![ip(&gws[0])])]);
    wait_stale(api, "pdns", &[NAME.to_owned()], false).await;
    let metrics = api_get(api, "/metrics").await;
    assert_eq!(metric(&metrics, &series), None);
    assert_eq!(metric(&metrics, count), Some(0.0));

    // Edited again, then the name leaves the config: its canary restarts without it, and
    // what it reported of the name goes with it (no alert left firing for a name nobody
    // publishes).
    pdns.edit_by_hand(ZONE, &pdns.marks(ZONE), &[(NAME, "A", vec![wrong.clone()])]);
    wait_stale(api, "pdns", &[NAME.to_owned()], true).await;
    let renamed = format!("www2.{ZONE}");
    let file = dir.path().join("config.toml");
    std::fs::write(
        &file,
        text.replace(&format!("[\"{NAME}\"]"), &format!("[\"{renamed}\"]")),
    )
    .unwrap();
    engine
        .reload(ho_kinds::load_plan(&[&file]).unwrap())
        .await
        .unwrap();
    pdns.wait_for_answer(&renamed, "A", &[ip(&gws[0])]).await;
    wait_questions(api, "pdns", "match", 2.0).await;
    assert_eq!(
        canary_stale(api, "pdns").await,
        Vec::<serde_json::Value>::new()
    );
    let metrics = api_get(api, "/metrics").await;
    assert_eq!(metric(&metrics, &series), None);
    assert_eq!(metric(&metrics, count), Some(0.0));
}

#[actix_rt::test]
async fn the_canary_is_off_while_the_powerdns_api_is_down_and_on_once_it_answers() {
    let mut pdns = PdnsServer::start(&format!("{ZONE}."));
    pdns.stop();
    let gws = gateways(1);
    let dir = tempfile::tempdir().unwrap();
    let text = config(
        &gws.iter().collect::<Vec<_>>(),
        &pdns.url(),
        &pdns.key_file(),
    );
    let engine = start_engine(dir.path(), &text).await;
    let api = serve_api(&engine, None, None).await;
    eventually_async("the canary off with why", async || {
        off_reason(api, "pdns").await.is_some()
    })
    .await;
    let reason = off_reason(api, "pdns").await.unwrap();
    assert!(
        reason.contains("its API could not be asked") && reason.contains("canary.address"),
        "{reason}"
    );
    assert_eq!(asked(api, "pdns").await, None);

    pdns.launch();
    let expected = format!("{}:{DNS_PORT}", pdns.ip);
    eventually_async("the canary on once the API answers", async || {
        asked(api, "pdns").await.as_deref() == Some(expected.as_str())
    })
    .await;
    assert_eq!(off_reason(api, "pdns").await, None);
    pdns.wait_for_answer(NAME, "A", &[ip(&gws[0])]).await;
    wait_questions(api, "pdns", "match", 1.0).await;
}

/// The PowerDNS 5.1 test server's settings list no `local-address` (a server whose API
/// lists only some of its settings): nothing to ask, said in `/status`, asked again.
#[actix_rt::test]
async fn settings_naming_no_address_leave_the_canary_off_with_why() {
    let server = PowerDns51::start(&format!("{ZONE}."), vec![]).await;
    let gws = gateways(1);
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("pdns.key");
    std::fs::write(&key, KEY).unwrap();
    let text = config(&gws.iter().collect::<Vec<_>>(), &server.url, &key);
    let engine = start_engine(dir.path(), &text).await;
    let api = serve_api(&engine, None, None).await;
    eventually_async("the canary off with why", async || {
        off_reason(api, "pdns").await.is_some()
    })
    .await;
    let reason = off_reason(api, "pdns").await.unwrap();
    assert!(
        reason.contains("its settings name no DNS address: no local-address listed")
            && reason.contains("asked again within 1s"),
        "{reason}"
    );
    // Asked again, backing off.
    eventually_async("a second question", async || {
        off_reason(api, "pdns")
            .await
            .is_some_and(|r| r.contains("asked again within 2s"))
    })
    .await;
    assert_eq!(asked(api, "pdns").await, None);
}
