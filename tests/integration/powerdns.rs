//! The PowerDNS sink against a real `pdns_server`, checked through DNS answers.

use std::time::Duration;

use ho_engine::snapshot::PublishMode;
use ho_engine::Engine;
use ho_testkit::Behaviour;

use crate::harness::*;
use crate::services::pdns::PdnsServer;

const ZONE: &str = "tenant-a.io.";

fn pdns_tail(pdns: &PdnsServer, extra: &str) -> String {
    format!(
        "[[tenants]]\nname = \"a\"\ndomains = [\"api.tenant-a.io\", \"www.tenant-a.io\"]\nsinks = [\"pdns\"]\nttl = \"5s\"\n\n{}",
        pdns_sink(pdns, extra)
    )
}

/// The `[sinks.pdns]` table (`extra`: more settings).
fn pdns_sink(pdns: &PdnsServer, extra: &str) -> String {
    format!(
        "[sinks.pdns]\nkind = \"powerdns\"\nurl = \"{}\"\napi_key_file = {:?}\nzone = \"{ZONE}\"\ntimeout = \"1s\"\n{extra}\
         delivery = {{ backoff_min = \"50ms\", backoff_max = \"500ms\", reconcile_interval = \"1s\" }}\n",
        pdns.url(),
        pdns.key_file().display().to_string()
    )
}

/// The engine over `gws` with the PowerDNS sink (`extra`: more sink settings).
async fn start_pdns_engine(
    dir: &std::path::Path,
    gws: &[ho_testkit::Gateway],
    pdns: &PdnsServer,
    extra: &str,
) -> Engine {
    start_engine(
        dir,
        &config(
            &Check::FAST,
            &gws.iter().collect::<Vec<_>>(),
            &pdns_tail(pdns, extra),
        ),
    )
    .await
}

/// A gateway down leaves the DNS answer, back up returns; all down answers with all (fail
/// open); the time from fault to changed answer is printed.
#[actix_rt::test]
async fn dns_answers_follow_gateway_health() {
    let pdns = PdnsServer::start(ZONE);
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(3);
    let engine = start_pdns_engine(dir.path(), &gws, &pdns, "").await;
    let all: Vec<String> = gws.iter().map(ip).collect();
    pdns.wait_for_answer("api.tenant-a.io", "A", &all).await;
    pdns.wait_for_answer("www.tenant-a.io", "A", &all).await;
    assert_eq!(
        pdns.dig("api.tenant-a.io", "AAAA").await,
        Vec::<String>::new()
    );

    tokio::time::sleep(Duration::from_millis(fastrand::u64(50..250))).await;
    gws[1].set(Behaviour::Refuse).unwrap();
    let took = pdns
        .wait_for_answer("api.tenant-a.io", "A", &[all[0].clone(), all[2].clone()])
        .await;
    println!("fault -> PowerDNS answer changed: {} ms", took.as_millis());

    gws[1].set(Behaviour::Healthy).unwrap();
    pdns.wait_for_answer("api.tenant-a.io", "A", &all).await;

    for g in &mut gws {
        g.set(Behaviour::Status(503)).unwrap();
    }
    // Fail open: once all three are down, the answer is all three again.
    wait_for_status(&engine, "fail open", |s| {
        s.tenants[0]
            .published
            .as_ref()
            .is_some_and(|p| p.mode == PublishMode::FailOpenAllUnhealthy)
    })
    .await;
    pdns.wait_for_answer("api.tenant-a.io", "A", &all).await;
}

/// PowerDNS down while a gateway fails: the change is written once it is back.
#[actix_rt::test]
async fn a_change_made_while_powerdns_is_down_lands_after_restart() {
    let mut pdns = PdnsServer::start(ZONE);
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(2);
    let engine = start_pdns_engine(dir.path(), &gws, &pdns, "").await;
    let all: Vec<String> = gws.iter().map(ip).collect();
    pdns.wait_for_answer("api.tenant-a.io", "A", &all).await;

    pdns.stop();
    gws[0].set(Behaviour::Refuse).unwrap();
    let err = wait_for_sink_error(&engine, "pdns", "the failed write never showed in status").await;
    assert!(err.starts_with("GET zone tenant-a.io.: "), "{err}");

    pdns.launch();
    pdns.wait_for_answer("api.tenant-a.io", "A", &[all[1].clone()])
        .await;
    let start = tokio::time::Instant::now();
    while sink_error(&engine, "pdns").await.is_some() {
        assert!(start.elapsed() < LIMIT, "error not cleared after success");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An rrset someone else wrote is never touched (and reported) unless `adopt = true`.
#[actix_rt::test]
async fn foreign_rrsets_are_left_alone_unless_adopted() {
    let pdns = PdnsServer::start(ZONE);
    pdns.patch_zone("tenant-a.io.", r#"{"rrsets":[{"name":"www.tenant-a.io.","type":"A","ttl":60,"changetype":"REPLACE","records":[{"content":"192.0.2.7","disabled":false}]}]}"#);
    let dir = tempfile::tempdir().unwrap();
    let gws = gateways(2);
    let all: Vec<String> = gws.iter().map(ip).collect();
    let engine = start_pdns_engine(dir.path(), &gws, &pdns, "").await;
    pdns.wait_for_answer("api.tenant-a.io", "A", &all).await;
    let err = wait_for_sink_error(&engine, "pdns", "foreign rrset not reported").await;
    assert!(
        err.contains("www.tenant-a.io. A") && err.contains("adopt = true"),
        "{err}"
    );
    // Two reconciles later, still untouched.
    let writes = sink_writes(&engine, "pdns");
    eventually("two reconciles", || {
        sink_writes(&engine, "pdns") >= writes + 2
    })
    .await;
    assert_eq!(pdns.dig("www.tenant-a.io", "A").await, ["192.0.2.7"]);
    drop(engine);

    let dir = tempfile::tempdir().unwrap();
    let _engine = start_pdns_engine(dir.path(), &gws, &pdns, "adopt = true\n").await;
    pdns.wait_for_answer("www.tenant-a.io", "A", &all).await;
}

/// A name whose LUA records someone else wrote (a zone moving off PowerDNS Lua records, as
/// the OpenOva multi-region document's stack runs them) is never half-written: without `adopt` nothing of ours goes
/// there, the write is reported failed naming the rrset and the setting, and 200 queries
/// all get the LUA record's answer, never a mix; the other names publish as usual. With
/// `adopt = true` the LUA rrset is replaced by ours, and the answers are ours alone.
#[actix_rt::test]
async fn a_foreign_lua_record_is_never_served_beside_ours() {
    let pdns = PdnsServer::start(ZONE);
    pdns.patch_zone("tenant-a.io.", r#"{"rrsets":[{"name":"api.tenant-a.io.","type":"LUA","ttl":60,"changetype":"REPLACE","records":[{"content":"A \"'192.0.2.9'\"","disabled":false}]}]}"#);
    assert_eq!(pdns.dig("api.tenant-a.io", "A").await, ["192.0.2.9"]);
    let dir = tempfile::tempdir().unwrap();
    let gws = gateways(2);
    let all: Vec<String> = gws.iter().map(ip).collect();
    let engine = start_pdns_engine(dir.path(), &gws, &pdns, "").await;
    pdns.wait_for_answer("www.tenant-a.io", "A", &all).await;
    let err = wait_for_sink_error(&engine, "pdns", "foreign LUA rrset not reported").await;
    assert!(
        err.contains("api.tenant-a.io. LUA") && err.contains("adopt = true"),
        "{err}"
    );
    for _ in 0..200 {
        assert_eq!(
            pdns.dig("api.tenant-a.io", "A").await,
            ["192.0.2.9"],
            "a mixed answer"
        );
    }
    drop(engine);

    let dir = tempfile::tempdir().unwrap();
    let _engine = start_pdns_engine(dir.path(), &gws, &pdns, "adopt = true\n").await;
    pdns.wait_for_answer("api.tenant-a.io", "A", &all).await;
}

/// Drift made by someone else (a record deleted behind our back) is repaired by the
/// periodic reconcile.
#[actix_rt::test]
async fn the_reconcile_repairs_drift() {
    let pdns = PdnsServer::start(ZONE);
    let dir = tempfile::tempdir().unwrap();
    let gws = gateways(2);
    let all: Vec<String> = gws.iter().map(ip).collect();
    let _engine = start_pdns_engine(dir.path(), &gws, &pdns, "").await;
    pdns.wait_for_answer("api.tenant-a.io", "A", &all).await;
    pdns.patch_zone(
        "tenant-a.io.",
        r#"{"rrsets":[{"name":"api.tenant-a.io.","type":"A","changetype":"DELETE"}]}"#,
    );
    assert_eq!(pdns.dig("api.tenant-a.io", "A").await, Vec::<String>::new());
    pdns.wait_for_answer("api.tenant-a.io", "A", &all).await;
}

/// A wrong key and a missing zone are reported as such, and nothing is written.
#[actix_rt::test]
async fn wrong_key_and_missing_zone_are_specific_errors() {
    let pdns = PdnsServer::start(ZONE);
    let dir = tempfile::tempdir().unwrap();
    let gws = gateways(1);
    std::fs::write(pdns.key_file(), "wrong-key\n").unwrap();
    let engine = start_pdns_engine(dir.path(), &gws, &pdns, "").await;
    let err = wait_for_sink_error(&engine, "pdns", "no error for a wrong key").await;
    assert!(
        err.starts_with("PowerDNS rejected the API key (GET zone tenant-a.io.): HTTP 401"),
        "{err}"
    );
    drop(engine);

    std::fs::write(pdns.key_file(), "test-key-1\n").unwrap();
    let text = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
        .with(&pdns_tail(&pdns, ""))
        .set("sinks.pdns.zone", "io.")
        .render();
    let engine = start_engine(dir.path(), &text).await;
    let err = wait_for_sink_error(&engine, "pdns", "no error for a missing zone").await;
    assert!(
        err.starts_with("zone io. not found on server localhost (GET zone io.): HTTP 404"),
        "{err}"
    );
    assert_eq!(pdns.dig("api.tenant-a.io", "A").await, Vec::<String>::new());
}

/// A foreign CNAME at a tenant's name (PowerDNS refuses an A beside it, HTTP 422) is found
/// before writing: nothing is sent for that name, the error names the CNAME and `adopt`, and
/// it is permanent (not retried until the next snapshot or reconcile). With `adopt = true`
/// the CNAME is removed before ours are written, in one change PowerDNS accepts.
#[actix_rt::test]
async fn a_foreign_cname_is_refused_before_powerdns_would() {
    let pdns = PdnsServer::start(ZONE);
    pdns.patch_zone("tenant-a.io.", r#"{"rrsets":[{"name":"www.tenant-a.io.","type":"CNAME","ttl":60,"changetype":"REPLACE","records":[{"content":"elsewhere.example.","disabled":false}]}]}"#);
    let dir = tempfile::tempdir().unwrap();
    let gws = gateways(1);
    let engine = start_pdns_engine(dir.path(), &gws, &pdns, "").await;
    let err = wait_for_sink_error(&engine, "pdns", "no error for a foreign CNAME").await;
    assert!(
        err.contains("www.tenant-a.io. CNAME") && err.contains("adopt = true"),
        "{err}"
    );
    let status = engine.sink_status("pdns").await.unwrap();
    let attempts = status.tenants[0].attempts;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let status = engine.sink_status("pdns").await.unwrap();
    assert_eq!(
        status.tenants[0].attempts, attempts,
        "not retried until the next snapshot or reconcile"
    );
    assert!(!status.tenants[0].last_error.as_ref().unwrap().retrying);
    assert_eq!(
        pdns.dig("www.tenant-a.io", "CNAME").await,
        ["elsewhere.example."]
    );
    drop(engine);

    let dir = tempfile::tempdir().unwrap();
    let _engine = start_pdns_engine(dir.path(), &gws, &pdns, "adopt = true\n").await;
    pdns.wait_for_answer("www.tenant-a.io", "A", &[ip(&gws[0])])
        .await;
}

/// 30 tenants losing a shared gateway at once, on PowerDNS's SQLite back end: their writes
/// go in rounds (one zone read and one PATCH for every tenant waiting), so no write fails
/// (before, parallel PATCHes per tenant met `database is locked` as HTTP 500 and retried);
/// every name drops the gateway and takes it back.
#[actix_rt::test]
async fn thirty_tenants_failing_over_at_once_never_contend_on_the_zone() {
    let pdns = PdnsServer::start(ZONE);
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(2);
    let mut tail = format!(
        "[sinks.pdns]\nkind = \"powerdns\"\nurl = \"{}\"\napi_key_file = {:?}\nzone = \"{ZONE}\"\ntimeout = \"2s\"\n\
         delivery = {{ backoff_min = \"50ms\", backoff_max = \"500ms\", reconcile_interval = \"60s\" }}\n\n",
        pdns.url(),
        pdns.key_file().display().to_string()
    );
    for t in 0..30 {
        tail.push_str(&format!(
            "[[tenants]]\nname = \"t{t}\"\ndomains = [\"t{t}.tenant-a.io\"]\nsinks = [\"pdns\"]\nttl = \"5s\"\n\n"
        ));
    }
    let engine = start_engine(
        dir.path(),
        &config(&Check::FAST, &gws.iter().collect::<Vec<_>>(), &tail),
    )
    .await;
    let all: Vec<String> = gws.iter().map(ip).collect();
    for t in [0, 29] {
        pdns.wait_for_answer(&format!("t{t}.tenant-a.io"), "A", &all)
            .await;
    }
    let errors = sink_writes_with(&engine, "pdns", "error");
    gws[0].set(ho_testkit::Behaviour::Refuse).unwrap();
    let one = vec![ip(&gws[1])];
    for t in 0..30 {
        pdns.wait_for_answer(&format!("t{t}.tenant-a.io"), "A", &one)
            .await;
    }
    gws[0].set(ho_testkit::Behaviour::Healthy).unwrap();
    for t in 0..30 {
        pdns.wait_for_answer(&format!("t{t}.tenant-a.io"), "A", &all)
            .await;
    }
    assert_eq!(
        sink_writes_with(&engine, "pdns", "error"),
        errors,
        "a write failed while 30 tenants failed over:\n{}",
        pdns.log()
    );
    assert!(!pdns.log().contains("database is locked"), "{}", pdns.log());
}

/// The `[sinks.pdns]` table and tenant for the PowerDNS 5.1 test server.
fn pdns51_tail(
    server: &crate::fakes::powerdns51::PowerDns51,
    key: &std::path::Path,
    tenant: &str,
    extra: &str,
) -> String {
    format!(
        "{tenant}\n[sinks.pdns]\nkind = \"powerdns\"\nurl = \"{}\"\napi_key_file = {:?}\nzone = \"{ZONE}\"\ntimeout = \"1s\"\n{extra}\
         delivery = {{ backoff_min = \"50ms\", backoff_max = \"200ms\" }}\n",
        server.url,
        key.display().to_string()
    )
}

/// PowerDNS 5.1 refuses LUA changes by default: a `lua = true` sink says so, with the
/// setting to change, before it sends any change; a sink adopting a name that holds LUA
/// records is refused and says why; plain records keep working (on the test server
/// answering as 5.1 does, from PowerDNS's source: no 5.1 is installable here).
#[actix_rt::test]
async fn powerdns_51s_refusal_of_lua_changes_is_said_with_the_setting() {
    use crate::fakes::powerdns51::{PowerDns51, KEY};
    use serde_json::json;
    use std::sync::atomic::Ordering;
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    std::fs::write(&key, KEY).unwrap();
    let gws = gateways(2);
    let eps = gws.iter().collect::<Vec<_>>();

    let server = PowerDns51::start(ZONE, vec![]).await;
    let weighted = "[[tenants]]\nname = \"w\"\ndomains = [\"api.tenant-a.io\"]\nsinks = [\"pdns\"]\npolicy = \"weighted\"\n";
    let text = config(
        &Check::FAST,
        &eps,
        &pdns51_tail(&server, &key, weighted, "lua = true\n"),
    );
    let engine = start_engine(dir.path(), &text).await;
    let error = wait_for_sink_error(&engine, "pdns", "the LUA refusal").await;
    assert!(
        error.contains("enable-lua-record-updates=no, the default since PowerDNS 5.1")
            && error.contains("set enable-lua-record-updates=yes"),
        "{error}"
    );
    assert_eq!(
        server.refused.load(Ordering::Relaxed) + server.applied.load(Ordering::Relaxed),
        0,
        "no change was sent"
    );
    drop(engine);

    let lua = json!({"name": "api.tenant-a.io.", "type": "LUA", "ttl": 60,
        "records": [{"content": "A \"ifportup(443, {'192.0.2.1'})\"", "disabled": false}]});
    let server = PowerDns51::start(ZONE, vec![lua]).await;
    let plain = "[[tenants]]\nname = \"a\"\ndomains = [\"api.tenant-a.io\", \"www.tenant-a.io\"]\nsinks = [\"pdns\"]\n";
    let dir = tempfile::tempdir().unwrap();
    let text = config(
        &Check::FAST,
        &eps,
        &pdns51_tail(&server, &key, plain, "adopt = true\n"),
    );
    let engine = start_engine(dir.path(), &text).await;
    let error = wait_for_sink_error(&engine, "pdns", "the refused adoption").await;
    assert!(
        error.contains(
            "PowerDNS refuses changes to LUA records (Update of Lua records is not allowed)"
        ) && error.contains("enable-lua-record-updates=yes"),
        "{error}"
    );
    assert!(
        server.contents("api.tenant-a.io.", "LUA").is_some(),
        "the refused PATCH changed nothing"
    );
    drop(engine);

    let server = PowerDns51::start(ZONE, vec![]).await;
    let dir = tempfile::tempdir().unwrap();
    let text = config(&Check::FAST, &eps, &pdns51_tail(&server, &key, plain, ""));
    let _engine = start_engine(dir.path(), &text).await;
    let mut ips: Vec<String> = gws.iter().map(ip).collect();
    ips.sort();
    eventually("plain records written", || {
        server.contents("www.tenant-a.io.", "A").map(|mut c| {
            c.sort();
            c
        }) == Some(ips.clone())
    })
    .await;
}

/// A wildcard tenant on a real pdns_server: PowerDNS answers every name under it that does
/// not exist with the tenant's healthy addresses (RFC 4592), a name another tenant holds
/// answers its own, and a failed gateway leaves the wildcard's answer.
#[actix_rt::test]
async fn a_wildcard_tenant_answers_every_name_under_it_that_does_not_exist() {
    let pdns = PdnsServer::start(ZONE);
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(3);
    let tail = format!(
        "[[tenants]]\nname = \"apps\"\ndomains = [\"*.apps.tenant-a.io\"]\nendpoints = [\"gw-1\", \"gw-2\"]\nsinks = [\"pdns\"]\nttl = \"5s\"\n\n\
         [[tenants]]\nname = \"api\"\ndomains = [\"api.apps.tenant-a.io\"]\nendpoints = [\"gw-3\"]\nsinks = [\"pdns\"]\nttl = \"5s\"\n\n{}",
        pdns_sink(&pdns, "")
    );
    let _engine = start_engine(
        dir.path(),
        &config(&Check::FAST, &gws.iter().collect::<Vec<_>>(), &tail),
    )
    .await;
    let all: Vec<String> = gws.iter().map(ip).collect();
    pdns.wait_for_answer("foo.apps.tenant-a.io", "A", &all[..2])
        .await;
    pdns.wait_for_answer("x.y.apps.tenant-a.io", "A", &all[..2])
        .await;
    pdns.wait_for_answer("api.apps.tenant-a.io", "A", &all[2..])
        .await;
    gws[0].set(Behaviour::Refuse).unwrap();
    pdns.wait_for_answer("bar.apps.tenant-a.io", "A", &all[1..2])
        .await;
    assert_eq!(
        pdns.dig("api.apps.tenant-a.io", "A").await,
        all[2..].to_vec(),
        "the existing name keeps its own"
    );
}
