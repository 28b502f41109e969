//! The Google Cloud DNS sink against its API test server (`fakes::google_dns`, written from
//! Google's API reference): a token from the metadata server (Workload Identity) and from a
//! service account key (an RS256 JWT the server verifies); weighted tenants as weighted
//! round robin sets; names someone else holds left alone and reported; another project's
//! zone and a refused account as specific errors; the clusters' reports round-tripping
//! through TXT sets; tenants changing at once sharing rounds.

use std::sync::atomic::Ordering;
use std::time::Duration;

use ho_engine::sink::Sink;
use ho_sinks::GoogleCloudDnsConfig;
use ho_sinks::GoogleCloudDnsSink;
use serde_json::json;

use crate::fakes::google_dns::{GoogleDns, MANAGED_ZONE, PROJECT};
use crate::harness::*;
use ho_engine::sink::reports::Rrset;

/// The sink table; `key`: a service account key file, else the metadata server.
fn sink_table(server: &GoogleDns, key: Option<&std::path::Path>) -> String {
    let credentials = key.map_or_else(
        || format!("metadata_url = \"{}\"\n", server.metadata_url),
        |k| format!("credentials_file = {:?}\n", k.display().to_string()),
    );
    format!(
        "[sinks.gc]\nkind = \"google_cloud_dns\"\nproject = \"{PROJECT}\"\nmanaged_zone = \"{MANAGED_ZONE}\"\nzone = \"tenant-a.io\"\nurl = \"{}\"\ntimeout = \"1s\"\n{credentials}",
        server.url
    )
}

#[actix_rt::test]
async fn weighted_tenants_become_weighted_round_robin_and_foreign_names_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let server = GoogleDns::start("tenant-a.io").await;
    server.insert("A", "taken.tenant-a.io", "198.51.100.7");
    let gws = gateways(2);
    let text = TestConfig::defaults(&Check::FAST)
        .with(&endpoints(&gws, &["weight = 3", "weight = 1"]))
        .with(
            "[[tenants]]\nname = \"w\"\ndomains = [\"w.tenant-a.io\"]\nsinks = [\"gc\"]\npolicy = \"weighted\"\n\n\
             [[tenants]]\nname = \"t\"\ndomains = [\"free.tenant-a.io\", \"taken.tenant-a.io\"]\nsinks = [\"gc\"]\n",
        )
        .with(&sink_table(&server, None))
        .render();
    let engine = start_engine(dir.path(), &text).await;
    eventually("the weighted set", || {
        server.rrset("w.tenant-a.io", "A").is_some()
    })
    .await;
    let set = server.rrset("w.tenant-a.io", "A").unwrap();
    let mut items = set["routingPolicy"]["wrr"]["items"]
        .as_array()
        .unwrap()
        .clone();
    items.sort_by_key(|i| i["rrdatas"][0].as_str().unwrap().to_owned());
    let want: Vec<serde_json::Value> = [(&gws[0], 3.0), (&gws[1], 1.0)]
        .iter()
        .map(|(g, w)| json!({"weight": w, "rrdatas": [ip(g)]}))
        .collect::<Vec<_>>();
    let mut want = want;
    want.sort_by_key(|i| i["rrdatas"][0].as_str().unwrap().to_owned());
    assert_eq!(items, want);
    assert!(
        server.tokens_issued.load(Ordering::Relaxed) >= 1,
        "from the metadata server"
    );

    let error = loop {
        let status = engine.sink_status("gc").await.unwrap();
        let t = status.tenants.iter().find(|t| t.tenant == "t");
        if let Some(e) = t.and_then(|t| t.last_error.as_ref()) {
            break e.message.clone();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        error.contains("left alone") && error.contains("taken.tenant-a.io"),
        "{error}"
    );
    eventually("the free name written", || {
        server.addresses("free.tenant-a.io").is_some()
    })
    .await;
    assert_eq!(
        server.addresses("taken.tenant-a.io"),
        Some(vec!["198.51.100.7".to_string()]),
        "untouched"
    );
}

#[actix_rt::test]
async fn another_projects_zone_and_a_refused_account_are_specific_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = GoogleDns::start("tenant-b.io").await;
    let key = server.key_file(dir.path());
    let gws = gateways(1);
    let text = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
        .with("[[tenants]]\nname = \"t\"\ndomains = [\"api.tenant-a.io\"]\nsinks = [\"gc\"]\n")
        .with(&sink_table(&server, Some(&key)))
        .render();
    let engine = start_engine(dir.path(), &text).await;
    let error = wait_for_sink_error(&engine, "gc", "the other zone").await;
    assert!(
        error.contains(
            "the managed zone serves \"tenant-b.io\", but the config says zone = \"tenant-a.io\""
        ),
        "{error}"
    );
    assert!(
        server.tokens_issued.load(Ordering::Relaxed) >= 1,
        "a key's JWT was taken"
    );
    drop(engine);

    // Another account's key (one this server did not issue): its JWT is refused.
    let other = GoogleDns::start("tenant-a.io").await;
    let dir2 = tempfile::tempdir().unwrap();
    let foreign = std::fs::read_to_string(&key)
        .unwrap()
        .replace(&server.token_uri(), &other.token_uri());
    let foreign_key = dir2.path().join("other-account.json");
    std::fs::write(&foreign_key, foreign).unwrap();
    let text = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
        .with("[[tenants]]\nname = \"t\"\ndomains = [\"api.tenant-a.io\"]\nsinks = [\"gc\"]\n")
        .with(&sink_table(&other, Some(&foreign_key)))
        .render();
    let engine = start_engine(dir2.path(), &text).await;
    let error = wait_for_sink_error(&engine, "gc", "the refused key").await;
    assert!(
        error.contains("the service account key was refused")
            && error.contains("Invalid JWT Signature"),
        "{error}"
    );
    assert_eq!(other.addresses("api.tenant-a.io"), None);
}

#[actix_rt::test]
async fn reports_round_trip_through_txt_sets() {
    let dir = tempfile::tempdir().unwrap();
    let server = GoogleDns::start("tenant-a.io").await;
    let config = GoogleCloudDnsConfig {
        project: PROJECT.into(),
        managed_zone: MANAGED_ZONE.into(),
        zone: "tenant-a.io".into(),
        credentials_file: Some(server.key_file(dir.path())),
        url: server.url.clone(),
        metadata_url: server.metadata_url.clone(),
        max_requests_per_second: 50.0,
        timeout: Duration::from_secs(1),
    };
    let sink = GoogleCloudDnsSink::new(&config, "eu-1").unwrap();
    let store = sink
        .reports()
        .expect("a google_cloud_dns sink holds reports");
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
    let set = server.rrset(&name, "TXT").unwrap();
    assert_eq!(set["rrdatas"].as_array().unwrap().len(), 2);
    store
        .write(vec![Rrset::new(
            name.clone(),
            vec!["v1 b".into(), long.clone()],
        )])
        .await
        .unwrap();
    let changes = server.changes.load(Ordering::Relaxed);
    store
        .write(vec![Rrset::new(name.clone(), vec!["v1 b".into(), long])])
        .await
        .unwrap();
    assert_eq!(
        server.changes.load(Ordering::Relaxed),
        changes,
        "unchanged: nothing sent"
    );
    store.remove(name.clone()).await.unwrap();
    assert!(server.rrset(&name, "TXT").is_none());
}

/// Thirty tenants losing one shared gateway at once are written in a few rounds (one
/// listing and one change each), not a listing and a change per tenant.
#[actix_rt::test]
async fn tenants_changing_at_once_share_rounds() {
    let dir = tempfile::tempdir().unwrap();
    let server = GoogleDns::start("tenant-a.io").await;
    let key = server.key_file(dir.path());
    let load = |c: &std::sync::atomic::AtomicUsize| c.load(Ordering::Relaxed);
    let [lists, changes] = thirty_tenants_lose_a_shared_gateway(
        &sink_table(&server, Some(&key)),
        "gc",
        "tenant-a.io",
        "",
        |name| server.addresses(name),
        || [load(&server.lists), load(&server.changes)],
    )
    .await;
    println!("30 tenants changing at once: {lists} listings, {changes} changes");
    assert!(
        lists <= 5 && changes <= 5,
        "{lists} listings and {changes} changes for 30 tenants"
    );
    assert_eq!(load(&server.tokens_issued), 1, "the token is kept");
}

/// Cloud DNS's zone is read through its listing by the canary: records the provider lost
/// make the name stale, served nothing; put back by hand, the report is withdrawn.
#[actix_rt::test]
async fn the_canary_reads_the_zone_through_its_listing() {
    let server = GoogleDns::start("tenant-a.io").await;
    listing_canary_sees_lost_records(
        "gc",
        &sink_table(&server, None),
        &gateways(2),
        || server.lose("api.tenant-a.io"),
        |address| server.insert("A", "api.tenant-a.io", address),
    )
    .await;
}
