//! Routing policies end to end: failover tiers on hosts files, weighted and geo answers
//! from PowerDNS LUA records queried through DNS.

use std::collections::BTreeMap;
use std::time::Duration;

use ho_engine::status::Why;
use ho_testkit::Behaviour;

use crate::harness::*;
use crate::services::pdns::PdnsServer;

/// Primary down -> the standby tier is published; primary back -> the primary only.
#[actix_rt::test]
async fn failover_moves_to_the_standby_tier_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(3);
    let text = format!(
        "{}[[tenants]]\nname = \"fo\"\ndomains = [\"fo.example\"]\nsinks = [\"local\"]\npolicy = \"failover\"\n\n{}",
        endpoints(&gws, &["priority = 0", "priority = 1", "priority = 1"]),
        hosts_sink(dir.path())
    );
    let text = TestConfig::defaults(&Check::FAST).with(&text).render();
    let engine = start_engine(dir.path(), &text).await;
    let file = dir.path().join("fo.hosts");
    let (primary, standby) = (vec![ip(&gws[0])], vec![ip(&gws[1]), ip(&gws[2])]);
    wait_for_file(&file, "the primary only", |c| addresses(c) == primary).await;
    let status = wait_for_status(&engine, "gw-2 held as standby", |s| {
        s.tenants[0].endpoints[1].why == Why::StandbyTier
    })
    .await;
    assert_eq!(status.tenants[0].endpoints[0].why, Why::Healthy);

    tokio::time::sleep(Duration::from_millis(fastrand::u64(50..250))).await;
    gws[0].set(Behaviour::Refuse).unwrap();
    let to_standby = wait_for_file(&file, "the standby tier", |c| addresses(c) == standby).await;
    gws[0].set(Behaviour::Healthy).unwrap();
    let back = wait_for_file(&file, "the primary again", |c| addresses(c) == primary).await;
    println!(
        "primary -> standby {} ms, standby -> primary {} ms",
        to_standby.as_millis(),
        back.as_millis()
    );
    let status = wait_for_status(&engine, "standby held again", |s| {
        s.tenants[0].endpoints[2].why == Why::StandbyTier
    })
    .await;
    assert_eq!(status.tenants[0].endpoints[0].why, Why::Healthy);
}

fn pdns_tail(pdns: &PdnsServer, tenant: &str) -> String {
    format!(
        "{tenant}\nsinks = [\"pdns\"]\nttl = \"5s\"\n\n[sinks.pdns]\nkind = \"powerdns\"\nurl = \"{}\"\napi_key_file = {:?}\nzone = \"tenant-a.io.\"\nlua = true\ntimeout = \"1s\"\ndelivery = {{ backoff_min = \"50ms\", backoff_max = \"200ms\" }}\n",
        pdns.url(),
        pdns.key_file().display().to_string()
    )
}

/// Answers for 64 client subnets (EDNS client subnet), counted by address. A client
/// answered nothing (the record not written yet: the tracker's decision comes before the
/// sink's write) is left out, so the counts sum to less than 64 and callers ask again.
async fn answers_by_subnet(pdns: &PdnsServer, name: &str) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for i in 0..64u8 {
        let out = pdns
            .dig_from(name, "A", &format!("10.{i}.{}.0/24", i.wrapping_mul(37)))
            .await;
        assert!(
            out.len() <= 1,
            "pickwhashed answers one address per client: {out:?}"
        );
        if let Some(address) = out.first() {
            *counts.entry(address.clone()).or_insert(0) += 1;
        }
    }
    counts
}

/// `weighted` through PowerDNS `pickwhashed`: clients spread by weight over healthy
/// addresses only.
#[actix_rt::test]
async fn weighted_answers_follow_weights_and_health() {
    let pdns = PdnsServer::start("tenant-a.io.");
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(3);
    let text = format!(
        "{}{}",
        endpoints(&gws, &["labels = { cloud = \"aws\" }", "labels = { cloud = \"azure\" }\nweight = 5", "labels = { cloud = \"azure\" }"]),
        pdns_tail(&pdns, "[[tenants]]\nname = \"w\"\ndomains = [\"w.tenant-a.io\"]\npolicy = \"weighted\"\nweights = [{ label = \"cloud\", value = \"aws\", weight = 80 }]")
    );
    let text = TestConfig::defaults(&Check::FAST).with(&text).render();
    let engine = start_engine(dir.path(), &text).await;
    wait_for_status(&engine, "all three published", |s| {
        s.tenants[0]
            .published
            .as_ref()
            .is_some_and(|p| p.addresses.len() == 3)
    })
    .await;
    let start = tokio::time::Instant::now();
    let mut counts = answers_by_subnet(&pdns, "w.tenant-a.io").await;
    while counts.values().sum::<usize>() != 64 || counts.len() < 2 {
        assert!(
            start.elapsed() < LIMIT,
            "the LUA record never answered: {counts:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        counts = answers_by_subnet(&pdns, "w.tenant-a.io").await;
    }
    println!(
        "weights 80/5/1 (label rule, endpoint weight, default) over 64 client subnets: {counts:?}"
    );
    assert!(
        counts[&ip(&gws[0])] > 40,
        "the weight-80 address takes most clients: {counts:?}"
    );

    gws[0].set(Behaviour::Refuse).unwrap();
    let start = tokio::time::Instant::now();
    loop {
        let counts = answers_by_subnet(&pdns, "w.tenant-a.io").await;
        if counts.values().sum::<usize>() == 64 && !counts.contains_key(&ip(&gws[0])) {
            assert_eq!(counts.len(), 2, "{counts:?}");
            break;
        }
        assert!(
            start.elapsed() < LIMIT,
            "the down address is still answered: {counts:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `geo` through PowerDNS LUA `country()`. This machine has no GeoIP database, so every
/// client falls to `default_geo`; when that location has no healthy address, all healthy
/// addresses are answered.
#[actix_rt::test]
async fn geo_answers_fall_back_to_the_default_location() {
    let pdns = PdnsServer::start("tenant-a.io.");
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(2);
    let text = format!(
        "{}{}",
        endpoints(&gws, &["labels = { geo = \"IE\" }", "labels = { geo = \"DE\" }"]),
        pdns_tail(&pdns, "[[tenants]]\nname = \"g\"\ndomains = [\"g.tenant-a.io\"]\npolicy = \"geo\"\ndefault_geo = \"IE\"")
    );
    let text = TestConfig::defaults(&Check::FAST).with(&text).render();
    let _engine = start_engine(dir.path(), &text).await;
    pdns.wait_for_answer("g.tenant-a.io", "A", &[ip(&gws[0])])
        .await;
    gws[0].set(Behaviour::Refuse).unwrap();
    pdns.wait_for_answer("g.tenant-a.io", "A", &[ip(&gws[1])])
        .await;
}

/// `geo` through PowerDNS LUA records with the geoip backend reading a City database, as
/// in production: a client (by its EDNS subnet) of a country with a location gets it
/// (`country()`); a client whose coordinates the database knows, of a country without a
/// location, gets the nearest location up (`latlon()`); a client with neither gets
/// `default_geo`. When a location goes down, its clients and the nearest-by-coordinates
/// clients it served move to the next nearest.
#[actix_rt::test]
async fn geo_answers_the_nearest_location_up_by_the_clients_coordinates() {
    let dir = tempfile::tempdir().unwrap();
    let db = crate::services::geoip::geoip_db(
        dir.path(),
        &[
            ("10.10.0.0/16", "PL", Some((52.23, 21.01))),   // Warsaw
            ("10.11.0.0/16", "BR", Some((-23.55, -46.63))), // Sao Paulo
            ("10.12.0.0/16", "DE", None),
            ("10.13.0.0/16", "PL", None),
        ],
    );
    let pdns = PdnsServer::start_with_geoip("tenant-a.io.", &db);
    let mut gws = gateways(3);
    let text = format!(
        "{}{}",
        endpoints(
            &gws,
            &[
                "labels = { geo = \"DE\" }",
                "labels = { geo = \"GB\" }",
                "labels = { geo = \"US\" }"
            ]
        ),
        pdns_tail(&pdns, "[[tenants]]\nname = \"g\"\ndomains = [\"g.tenant-a.io\"]\npolicy = \"geo\"\ndefault_geo = \"GB\"")
    );
    let text = TestConfig::defaults(&Check::FAST).with(&text).render();
    let _engine = start_engine(dir.path(), &text).await;
    let (de, gb, us) = (ip(&gws[0]), ip(&gws[1]), ip(&gws[2]));
    let clients = [
        "10.10.1.0/24",
        "10.11.1.0/24",
        "10.12.1.0/24",
        "10.13.1.0/24",
    ];
    // Warsaw -> DE (nearest), Sao Paulo -> US (nearest), Germany -> DE (its country),
    // Poland without coordinates -> GB (default_geo).
    let want = [&de, &us, &de, &gb];
    wait_for_answers_by_subnet(&pdns, "g.tenant-a.io", &clients, &want).await;
    gws[0].set(Behaviour::Refuse).unwrap();
    // DE is down: Warsaw's next nearest is GB, and so is Germany's (from its centre).
    let want = [&gb, &us, &gb, &gb];
    wait_for_answers_by_subnet(&pdns, "g.tenant-a.io", &clients, &want).await;
}

/// Polls `name` from each client subnet until each answers its one address of `want`.
async fn wait_for_answers_by_subnet(
    pdns: &PdnsServer,
    name: &str,
    clients: &[&str],
    want: &[&String],
) {
    let want: Vec<Vec<String>> = want.iter().map(|w| vec![(*w).clone()]).collect();
    let start = tokio::time::Instant::now();
    loop {
        let mut got = Vec::new();
        for client in clients {
            got.push(pdns.dig_from(name, "A", client).await);
        }
        if got == want {
            return;
        }
        assert!(
            start.elapsed() < LIMIT,
            "want {want:?} for {clients:?}, got {got:?}\n{}",
            pdns.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
