//! The Azure DNS sink against its Resource Manager test server (`fakes::azure_dns`, written
//! from Microsoft's REST reference): a token from a client secret and from a managed
//! identity; names someone else holds left alone and reported; a set changed by someone
//! else between the sink's listing and its write refused on its etag (never overwritten
//! blind) and written again from a new listing; a refused secret and another zone as specific errors; the clusters'
//! reports round-tripping through TXT sets; tenants changing at once sharing a listing.

use std::path::Path;
use std::sync::atomic::Ordering;

use ho_engine::sink::Sink;

use crate::fakes::azure_dns::{
    AzureDns, CLIENT_ID, CLIENT_SECRET, RESOURCE_GROUP, SUBSCRIPTION, TENANT,
};
use crate::harness::*;
use ho_engine::sink::reports::Rrset;

/// The sink's keys (no table header) with a client secret written into `dir`.
pub fn sink_keys(server: &AzureDns, dir: &Path) -> String {
    let secret = dir.join("client-secret");
    std::fs::write(&secret, CLIENT_SECRET).unwrap();
    let url = &server.url;
    format!(
        "kind = \"azure_dns\"\nsubscription_id = \"{SUBSCRIPTION}\"\nresource_group = \"{RESOURCE_GROUP}\"\nzone = \"tenant-a.io\"\n\
         tenant_id = \"{TENANT}\"\nclient_id = \"{CLIENT_ID}\"\nclient_secret_file = {:?}\nurl = \"{url}\"\nlogin_url = \"{url}\"\n",
        secret.display().to_string(),
    )
}

fn managed_identity_keys(server: &AzureDns) -> String {
    let url = &server.url;
    format!(
        "kind = \"azure_dns\"\nsubscription_id = \"{SUBSCRIPTION}\"\nresource_group = \"{RESOURCE_GROUP}\"\nzone = \"tenant-a.io\"\nurl = \"{url}\"\nimds_url = \"{url}\"\n"
    )
}

#[actix_rt::test]
async fn a_managed_identity_writes_and_foreign_names_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let server = AzureDns::start("tenant-a.io").await;
    server.insert("A", "taken.tenant-a.io", "198.51.100.7");
    let gws = gateways(2);
    let text = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
        .with("[[tenants]]\nname = \"t\"\ndomains = [\"free.tenant-a.io\", \"taken.tenant-a.io\"]\nsinks = [\"az\"]\n")
        .with(&format!("[sinks.az]\n{}timeout = \"1s\"\n", managed_identity_keys(&server)))
        .render();
    let engine = start_engine(dir.path(), &text).await;
    let error = wait_for_sink_error(&engine, "az", "the foreign name").await;
    assert!(
        error.contains("left alone") && error.contains("taken.tenant-a.io"),
        "{error}"
    );
    let mut ips: Vec<String> = gws.iter().map(ip).collect();
    ips.sort();
    eventually("the free name written", || {
        server.addresses("free.tenant-a.io") == Some(ips.clone())
    })
    .await;
    assert_eq!(
        server.addresses("taken.tenant-a.io"),
        Some(vec!["198.51.100.7".to_string()]),
        "untouched"
    );
    assert_eq!(
        server.txt("_health-orchestrator.free.tenant-a.io"),
        Some(vec![
            "heritage=health-orchestrator,owner=health-orchestrator".to_string()
        ])
    );
    assert!(
        server.tokens_issued.load(Ordering::Relaxed) >= 1,
        "from the instance metadata service"
    );
}

#[actix_rt::test]
async fn a_refused_secret_and_another_zone_are_specific_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = AzureDns::start("tenant-a.io").await;
    let gws = gateways(1);
    let tenant = "[[tenants]]\nname = \"t\"\ndomains = [\"api.tenant-a.io\"]\nsinks = [\"az\"]\n";
    let wrong = sink_keys(&server, dir.path());
    std::fs::write(dir.path().join("client-secret"), "not-the-secret").unwrap();
    let text = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
        .with(tenant)
        .with(&format!("[sinks.az]\n{wrong}timeout = \"1s\"\n"))
        .render();
    let engine = start_engine(dir.path(), &text).await;
    let error = wait_for_sink_error(&engine, "az", "the refused secret").await;
    assert!(
        error.contains("the client secret was refused") && error.contains("AADSTS7000215"),
        "{error}"
    );
    drop(engine);

    let other = AzureDns::start("tenant-b.io").await;
    let dir2 = tempfile::tempdir().unwrap();
    let text = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
        .with(tenant)
        .with(&format!(
            "[sinks.az]\n{}timeout = \"1s\"\n",
            sink_keys(&other, dir2.path())
        ))
        .render();
    let engine = start_engine(dir2.path(), &text).await;
    let error = wait_for_sink_error(&engine, "az", "the other zone").await;
    assert!(
        error.contains("ResourceNotFound")
            && error.contains("no such subscription, resource group or zone for tenant-a.io"),
        "{error}"
    );
}

/// A set someone changes between the sink's listing and its write is refused on its etag
/// (412), never overwritten blind; the next listing sees it and the write goes through.
#[actix_rt::test]
async fn a_set_changed_since_the_listing_is_refused_on_its_etag_then_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let server = AzureDns::start("tenant-a.io").await;
    let mut gws = gateways(2);
    let text = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
        .with("[[tenants]]\nname = \"t\"\ndomains = [\"api.tenant-a.io\"]\nsinks = [\"az\"]\n")
        .with(&format!(
            "[sinks.az]\n{}timeout = \"1s\"\ndelivery = {{ backoff_min = \"50ms\", backoff_max = \"200ms\" }}\n",
            sink_keys(&server, dir.path())
        ))
        .render();
    let engine = start_engine(dir.path(), &text).await;
    eventually("both addresses", || {
        server
            .addresses("api.tenant-a.io")
            .is_some_and(|a| a.len() == 2)
    })
    .await;
    // A gateway fails; between the write's listing and its PUT, someone rewrites the set.
    server.tamper_before_next_write("api.tenant-a.io", "198.51.100.9");
    gws[1].set(ho_testkit::Behaviour::Status(503)).unwrap();
    eventually("the set written for the one gateway up", || {
        server.addresses("api.tenant-a.io") == Some(vec![ip(&gws[0])])
    })
    .await;
    assert!(
        server.preconditions_failed.load(Ordering::Relaxed) >= 1,
        "the first write named the listed etag and was refused"
    );
    gws[1].set(ho_testkit::Behaviour::Healthy).unwrap();
    eventually("both again", || {
        server
            .addresses("api.tenant-a.io")
            .is_some_and(|a| a.len() == 2)
    })
    .await;
    drop(engine);
}

#[actix_rt::test]
async fn reports_round_trip_through_txt_sets() {
    let dir = tempfile::tempdir().unwrap();
    let server = AzureDns::start("tenant-a.io").await;
    let mut table: toml::Table = toml::from_str(&sink_keys(&server, dir.path())).unwrap();
    table.remove("kind");
    let mut config: ho_sinks::AzureDnsConfig =
        table.try_into().expect("the sink keys are a config");
    config.max_requests_per_second = 50.0;
    let sink = ho_sinks::AzureDnsSink::new(&config, "eu-1").unwrap();
    let store = sink.reports().expect("an azure_dns sink holds reports");
    let long = "x".repeat(600);
    let name = "eu-1._ho-report.api.tenant-a.io".to_string();
    store
        .write(vec![Rrset::new(
            name.clone(),
            vec!["v1 a".into(), long.clone()],
        )])
        .await
        .unwrap();
    let read = store
        .read(vec!["._ho-report.api.tenant-a.io".into()])
        .await
        .unwrap();
    let mut texts = read[0].texts.clone();
    texts.sort();
    assert_eq!((read.len(), &read[0].name), (1, &name));
    assert_eq!(texts, ["v1 a".to_string(), long.clone()]);
    let writes = server.writes.load(Ordering::Relaxed);
    store
        .write(vec![Rrset::new(name.clone(), vec!["v1 a".into(), long])])
        .await
        .unwrap();
    assert_eq!(
        server.writes.load(Ordering::Relaxed),
        writes,
        "unchanged: nothing sent"
    );
    store.remove(name.clone()).await.unwrap();
    assert_eq!(server.txt(&name), None);
}

/// Thirty tenants losing one shared gateway at once share listings: Azure DNS has no
/// batch, so each changed set is one request, but the zone is listed once per round.
#[actix_rt::test]
async fn tenants_changing_at_once_share_listings() {
    let dir = tempfile::tempdir().unwrap();
    let server = AzureDns::start("tenant-a.io").await;
    let table = format!(
        "[sinks.az]\n{}timeout = \"1s\"\nmax_requests_per_second = 50.0\n",
        sink_keys(&server, dir.path())
    );
    let load = |c: &std::sync::atomic::AtomicUsize| c.load(Ordering::Relaxed);
    let [pages, writes] = thirty_tenants_lose_a_shared_gateway(
        &table,
        "az",
        "tenant-a.io",
        "",
        |name| server.addresses(name),
        || [load(&server.pages), load(&server.writes)],
    )
    .await;
    println!("30 tenants changing at once: {pages} listing pages, {writes} set writes");
    assert!(pages <= 5, "{pages} listing pages for 30 tenants");
    assert!(
        (30..=35).contains(&writes),
        "one write per changed set: {writes}"
    );
    assert_eq!(load(&server.tokens_issued), 1, "the token is kept");
}

/// Azure DNS's zone is read through its listing by the canary: records the provider lost
/// make the name stale, served nothing; put back by hand, the report is withdrawn.
#[actix_rt::test]
async fn the_canary_reads_the_zone_through_its_listing() {
    let server = AzureDns::start("tenant-a.io").await;
    listing_canary_sees_lost_records(
        "az",
        &format!("[sinks.az]\n{}", managed_identity_keys(&server)),
        &gateways(2),
        || server.lose("api.tenant-a.io"),
        |address| server.insert("A", "api.tenant-a.io", address),
    )
    .await;
}
