//! The Cloudflare sink against its API test server (`fakes::cloudflare`, written from
//! Cloudflare's API reference): names someone else holds are left alone and reported while
//! the tenant's other names are written; a token Cloudflare refuses and a zone id of
//! another zone are specific errors; the clusters' reports round-trip through the zone's
//! TXT records (long ones split into 255-byte strings); tenants changing at once share
//! rounds; an `answer = "cname"` tenant's CNAME follows failover, at the apex too.

use std::time::Duration;

use ho_engine::sink::Sink;
use ho_sinks::CloudflareConfig;
use ho_sinks::CloudflareSink;

use crate::fakes::cloudflare::{Cloudflare, TOKEN, ZONE_ID};
use crate::harness::*;
use ho_engine::sink::reports::Rrset;

fn sink_table(server: &Cloudflare, token_file: &std::path::Path, zone: &str) -> String {
    format!(
        "[sinks.cf]\nkind = \"cloudflare\"\nzone_id = \"{ZONE_ID}\"\nzone = \"{zone}\"\napi_token_file = {:?}\nurl = \"{}\"\ntimeout = \"1s\"\n",
        token_file.display().to_string(),
        server.url
    )
}

fn tenant(domains: &str) -> String {
    format!("[[tenants]]\nname = \"t\"\ndomains = [{domains}]\nsinks = [\"cf\"]\nttl = \"60s\"\n\n")
}

#[actix_rt::test]
async fn foreign_names_are_left_alone_and_the_rest_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let server = Cloudflare::start("tenant-a.io").await;
    server.insert("A", "taken.tenant-a.io", "198.51.100.7");
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).unwrap();
    let gws = gateways(2);
    let text = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
        .with(&tenant("\"free.tenant-a.io\", \"taken.tenant-a.io\""))
        .with(&sink_table(&server, &token, "tenant-a.io"))
        .render();
    let engine = start_engine(dir.path(), &text).await;
    let error = wait_for_sink_error(&engine, "cf", "the foreign name").await;
    assert!(
        error.contains("left alone") && error.contains("taken.tenant-a.io"),
        "{error}"
    );
    let mut ips: Vec<String> = gws.iter().map(ip).collect();
    ips.sort();
    assert_eq!(server.addresses("free.tenant-a.io"), Some(ips));
    assert_eq!(
        server.addresses("taken.tenant-a.io"),
        Some(vec!["198.51.100.7".to_string()]),
        "untouched"
    );
    let marks: Vec<String> = server
        .records()
        .into_iter()
        .filter(|r| r.rtype == "TXT")
        .map(|r| r.name)
        .collect();
    assert_eq!(marks, ["_health-orchestrator.free.tenant-a.io"]);
}

/// A wildcard name is written as Cloudflare keeps one (`*` as the first label), its mark
/// at `_health-orchestrator.*.<parent>` (a literal `*` to Cloudflare below the first
/// label); a gateway down leaves its address out.
#[actix_rt::test]
async fn a_wildcard_is_written_with_its_mark_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = Cloudflare::start("tenant-a.io").await;
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).unwrap();
    let mut gws = gateways(2);
    let text = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
        .with(&tenant("\"*.apps.tenant-a.io\""))
        .with(&sink_table(&server, &token, "tenant-a.io"))
        .render();
    let _engine = start_engine(dir.path(), &text).await;
    let mut ips: Vec<String> = gws.iter().map(ip).collect();
    ips.sort();
    eventually("both addresses at the wildcard", || {
        server.addresses("*.apps.tenant-a.io") == Some(ips.clone())
    })
    .await;
    let marks: Vec<String> = (server.records().into_iter())
        .filter(|r| r.rtype == "TXT")
        .map(|r| r.name)
        .collect();
    assert_eq!(marks, ["_health-orchestrator.*.apps.tenant-a.io"]);
    gws[0].set(ho_testkit::Behaviour::Refuse).unwrap();
    eventually("gw-1 left out", || {
        server.addresses("*.apps.tenant-a.io") == Some(vec![ip(&gws[1])])
    })
    .await;
}

/// `answer = "cname"`: two load balancers given by host name (resolved by a real
/// `pdns_server`); every name, the apex included (Cloudflare flattens it), holds one CNAME
/// to the preferred balancer and nothing else, moved when that balancer fails.
#[actix_rt::test]
async fn a_cname_tenant_fails_over_at_every_name() {
    use crate::cname_answers::{balancers, lb_endpoints, LB_ZONE};
    let pdns = crate::services::pdns::PdnsServer::start(&format!("{LB_ZONE}."));
    let (mut east, _west) = balancers(&pdns);
    let dir = tempfile::tempdir().unwrap();
    let server = Cloudflare::start("tenant-a.io").await;
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).unwrap();
    let text = TestConfig::defaults(&Check::FAST)
        .with(&lb_endpoints(&pdns))
        .with(
            "[[tenants]]\nname = \"t\"\ndomains = [\"api.tenant-a.io\", \"tenant-a.io\"]\n\
             policy = \"failover\"\nanswer = \"cname\"\nsinks = [\"cf\"]\nttl = \"60s\"\n\n",
        )
        .with(&sink_table(&server, &token, "tenant-a.io"))
        .render();
    let _engine = start_engine(dir.path(), &text).await;
    let held = |lb: &str| {
        let host = format!("lb-{lb}.{LB_ZONE}");
        move |server: &Cloudflare| {
            let mut records: Vec<(String, String, String)> = server
                .records()
                .into_iter()
                .filter(|r| r.rtype != "TXT")
                .map(|r| (r.rtype, r.name, r.content))
                .collect();
            records.sort();
            records
                == [
                    ("CNAME".into(), "api.tenant-a.io".into(), host.clone()),
                    ("CNAME".into(), "tenant-a.io".into(), host.clone()),
                ]
        }
    };
    eventually("a CNAME to east at both names", || held("east")(&server)).await;
    east.set(ho_testkit::Behaviour::Refuse).unwrap();
    eventually("the CNAMEs moved to west", || held("west")(&server)).await;
}

#[actix_rt::test]
async fn a_refused_token_and_another_zones_id_are_specific_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = Cloudflare::start("tenant-a.io").await;
    let gws = gateways(1);
    let wrong = dir.path().join("wrong");
    std::fs::write(&wrong, "not-the-token").unwrap();
    let text = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
        .with(&tenant("\"api.tenant-a.io\""))
        .with(&sink_table(&server, &wrong, "tenant-a.io"))
        .render();
    let engine = start_engine(dir.path(), &text).await;
    let error = wait_for_sink_error(&engine, "cf", "the refused token").await;
    assert!(
        error.contains("Cloudflare rejected the API token: it needs Zone.DNS Edit")
            && error.contains("9109 Invalid access token"),
        "{error}"
    );
    drop(engine);

    let other = Cloudflare::start("tenant-b.io").await;
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).unwrap();
    let dir2 = tempfile::tempdir().unwrap();
    let text = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
        .with(&tenant("\"api.tenant-a.io\""))
        .with(&sink_table(&other, &token, "tenant-a.io"))
        .render();
    let engine = start_engine(dir2.path(), &text).await;
    let error = wait_for_sink_error(&engine, "cf", "the other zone").await;
    assert!(
        error.contains(
            "the zone id names zone \"tenant-b.io\", but the config says zone = \"tenant-a.io\""
        ),
        "{error}"
    );
    assert!(
        other.records().is_empty(),
        "nothing written to the wrong zone"
    );
}

#[actix_rt::test]
async fn reports_round_trip_through_txt_records() {
    let dir = tempfile::tempdir().unwrap();
    let server = Cloudflare::start("tenant-a.io").await;
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).unwrap();
    let config = CloudflareConfig {
        zone_id: ZONE_ID.into(),
        zone: "tenant-a.io".into(),
        api_token_file: Some(token),
        api_token_env: None,
        url: server.url.clone(),
        max_requests_per_second: 50.0,
        max_batch: 200,
        min_ttl: Duration::from_secs(60),
        timeout: Duration::from_secs(1),
    };
    let sink = CloudflareSink::new(&config, "eu-1").unwrap();
    let store = sink.reports().expect("a cloudflare sink holds reports");
    let long = "x".repeat(600);
    let name = "eu-1._reports.api.tenant-a.io".to_string();
    store
        .write(vec![Rrset::new(
            name.clone(),
            vec!["v1 a".into(), long.clone()],
        )])
        .await
        .unwrap();
    let read = store
        .read(vec!["._reports.api.tenant-a.io".into()])
        .await
        .unwrap();
    let mut texts = read[0].texts.clone();
    texts.sort();
    assert_eq!((read.len(), &read[0].name), (1, &name));
    assert_eq!(texts, ["v1 a".to_string(), long.clone()]);
    // A rewrite replaces only what changed; an unchanged write sends nothing.
    store
        .write(vec![Rrset::new(
            name.clone(),
            vec!["v1 b".into(), long.clone()],
        )])
        .await
        .unwrap();
    let batches = server.batches.load(std::sync::atomic::Ordering::Relaxed);
    store
        .write(vec![Rrset::new(name.clone(), vec!["v1 b".into(), long])])
        .await
        .unwrap();
    assert_eq!(
        server.batches.load(std::sync::atomic::Ordering::Relaxed),
        batches
    );
    assert_eq!(server.records().len(), 2);
    store.remove(name).await.unwrap();
    assert!(server.records().is_empty());
}

/// Thirty tenants losing one shared gateway at once are written in a few rounds (one
/// listing and one batch each), not a listing and a batch per tenant.
#[actix_rt::test]
async fn tenants_changing_at_once_share_rounds() {
    let dir = tempfile::tempdir().unwrap();
    let server = Cloudflare::start("tenant-a.io").await;
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).unwrap();
    let load = |c: &std::sync::atomic::AtomicUsize| c.load(std::sync::atomic::Ordering::Relaxed);
    let [lists, batches] = thirty_tenants_lose_a_shared_gateway(
        &sink_table(&server, &token, "tenant-a.io"),
        "cf",
        "tenant-a.io",
        "ttl = \"60s\"\n",
        |name| server.addresses(name),
        || [load(&server.lists), load(&server.batches)],
    )
    .await;
    println!("30 tenants changing at once: {lists} listings, {batches} batches");
    assert!(
        lists <= 5 && batches <= 5,
        "{lists} listings and {batches} batches for 30 tenants"
    );
}

/// `max_batch` bounds each batch request: with 10, thirty tenants' withdrawals of a shared
/// gateway take at least three batches (each tenant's operations whole in one).
#[actix_rt::test]
async fn max_batch_bounds_each_batch_request() {
    let dir = tempfile::tempdir().unwrap();
    let server = Cloudflare::start("tenant-a.io").await;
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).unwrap();
    let load = |c: &std::sync::atomic::AtomicUsize| c.load(std::sync::atomic::Ordering::Relaxed);
    let table = format!(
        "{}max_batch = 10\nmax_requests_per_second = 50.0\n",
        sink_table(&server, &token, "tenant-a.io")
    );
    let [batches] = thirty_tenants_lose_a_shared_gateway(
        &table,
        "cf",
        "tenant-a.io",
        "ttl = \"60s\"\n",
        |name| server.addresses(name),
        || [load(&server.batches)],
    )
    .await;
    assert!(
        batches >= 3,
        "{batches} batches of at most 10 operations for 30 tenants"
    );
}

/// Cloudflare's zone has no DNS port the canary can be sure to reach: it reads the zone's
/// listing. Records the provider lost make the name stale, served nothing, within one
/// period; put back by hand, the report is withdrawn.
#[actix_rt::test]
async fn the_canary_reads_the_zone_through_its_listing() {
    let dir = tempfile::tempdir().unwrap();
    let server = Cloudflare::start("tenant-a.io").await;
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).unwrap();
    listing_canary_sees_lost_records(
        "cf",
        &sink_table(&server, &token, "tenant-a.io"),
        &gateways(2),
        || server.lose("api.tenant-a.io"),
        |address| server.insert("A", "api.tenant-a.io", address),
    )
    .await;
}
