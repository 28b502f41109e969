//! The webhook sink against a real HTTP receiver in the test that checks every signature.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ho_testkit::Behaviour;

use crate::fakes::webhook::{addresses_of, wait_for_delivery, Held, Receiver, SECRET};
use crate::harness::*;

/// Signed deliveries follow health; while the receiver fails, the latest state is
/// delivered once it recovers, and accepted sequence numbers only ever increase.
#[actix_rt::test]
async fn signed_deliveries_converge_after_the_receiver_recovers() {
    let rx = Receiver::default();
    let addr = rx.clone().start().await;
    let dir = tempfile::tempdir().unwrap();
    let secret_file = dir.path().join("secret");
    std::fs::write(&secret_file, format!("{SECRET}\n")).unwrap();
    let mut gws = gateways(3);
    let tail = format!(
        "[[tenants]]\nname = \"shop\"\ndomains = [\"shop.example\"]\nsinks = [\"hook\"]\n\n\
         [sinks.hook]\nkind = \"webhook\"\nurl = \"http://{addr}/dns\"\nsecret_file = {:?}\ntimeout = \"1s\"\n\
         headers = {{ \"X-Tenant-Token\" = \"t0k\" }}\n\
         delivery = {{ backoff_min = \"50ms\", backoff_max = \"200ms\" }}\n",
        secret_file.display().to_string()
    );
    let _engine = start_engine(
        dir.path(),
        &config(&Check::FAST, &gws.iter().collect::<Vec<_>>(), &tail),
    )
    .await;
    let mut all: Vec<String> = gws.iter().map(ip).collect();
    all.sort();
    let first =
        wait_for_delivery(&rx, "all three", |d| addresses_of(d, "shop.example") == all).await;
    assert_eq!(first.body["tenant"], "shop");
    assert_eq!(first.idempotency_key, format!("shop-{}", first.body["seq"]));
    assert_eq!(first.body["mode"], "healthy");
    assert_eq!(first.token, "t0k", "custom headers are sent");
    assert_eq!(
        first.body["changes"].as_array().unwrap().len(),
        3,
        "unknown -> up for each"
    );

    gws[0].set(Behaviour::Refuse).unwrap();
    let down = wait_for_delivery(&rx, "gw-1 gone", |d| {
        addresses_of(d, "shop.example").len() == 2
    })
    .await;
    let change = &down.body["changes"][0];
    assert_eq!(
        (
            change["endpoint"].as_str(),
            change["from"].as_str(),
            change["to"].as_str(),
            change["reason"].as_str()
        ),
        (Some("gw-1"), Some("up"), Some("down"), Some("refused"))
    );

    // Receiver outage: changes keep coming, deliveries fail and are retried.
    *rx.failing.lock().unwrap() = true;
    gws[0].set(Behaviour::Healthy).unwrap();
    eventually("a delivery to the failing receiver", || rx.rejected() >= 1).await;
    gws[1].set(Behaviour::Refuse).unwrap();
    eventually("retries reaching the failing receiver", || {
        rx.rejected() >= 2
    })
    .await;
    let accepted_before = rx.accepted().len();
    *rx.failing.lock().unwrap() = false;
    let want: Vec<String> = {
        let mut w = vec![ip(&gws[0]), ip(&gws[2])];
        w.sort();
        w
    };
    wait_for_delivery(&rx, "the latest state after recovery", |d| {
        addresses_of(d, "shop.example") == want
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Snapshots coalesced during the outage still report their changes.
    let changes: Vec<(String, String)> = rx.accepted()[accepted_before..]
        .iter()
        .flat_map(|d| d.body["changes"].as_array().unwrap().clone())
        .map(|c| {
            (
                c["endpoint"].as_str().unwrap().to_owned(),
                c["to"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        changes.contains(&("gw-1".into(), "up".into())),
        "{changes:?}"
    );
    assert!(
        changes.contains(&("gw-2".into(), "down".into())),
        "{changes:?}"
    );
    let seqs: Vec<u64> = rx
        .accepted()
        .iter()
        .map(|d| d.body["seq"].as_u64().unwrap())
        .collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "a stale snapshot was delivered after a newer one: {seqs:?}"
    );
    assert_eq!(
        addresses_of(rx.accepted().last().unwrap(), "shop.example"),
        want,
        "the last delivery is the latest state"
    );
}

/// A receiver that accepts and never answers: its writes time out and are retried, while
/// probing and the tenant's other sink carry on undisturbed.
#[actix_rt::test]
async fn a_hanging_receiver_does_not_stall_probing_or_other_sinks() {
    let hanging = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = hanging.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = hanging.accept().await {
            held.push(stream);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let secret_file = dir.path().join("secret");
    std::fs::write(&secret_file, SECRET).unwrap();
    let mut gws = gateways(2);
    let tail = format!(
        "[[tenants]]\nname = \"both\"\ndomains = [\"both.example\"]\nsinks = [\"hook\", \"local\"]\n\n\
         [sinks.hook]\nkind = \"webhook\"\nurl = \"http://{addr}/\"\nsecret_file = {:?}\ntimeout = \"300ms\"\n\
         delivery = {{ backoff_min = \"50ms\", backoff_max = \"200ms\" }}\n\n{}",
        secret_file.display().to_string(),
        hosts_sink(dir.path())
    );
    let engine = start_engine(
        dir.path(),
        &config(&Check::FAST, &gws.iter().collect::<Vec<_>>(), &tail),
    )
    .await;
    let file = dir.path().join("both.hosts");
    wait_for_file(&file, "both addresses", |c| addresses(c).len() == 2).await;
    gws[0].set(Behaviour::Refuse).unwrap();
    wait_for_file(&file, "gw-1 gone while the webhook hangs", |c| {
        addresses(c) == [ip(&gws[1])]
    })
    .await;
    let start = tokio::time::Instant::now();
    let error = loop {
        let status = engine.sink_status("hook").await.unwrap();
        if let Some(e) = status.tenants.first().and_then(|t| t.last_error.clone()) {
            break e;
        }
        assert!(
            start.elapsed() < LIMIT,
            "the hanging receiver is never reported"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        error.message.ends_with("no answer within 300ms"),
        "{}",
        error.message
    );
    assert!(error.retrying);
    let endpoints = wait_for_status(&engine, "probes keep coming", |s| {
        s.endpoints[1].probes > 10
    })
    .await;
    assert_eq!(
        endpoints.endpoints[1].state,
        ho_engine::hysteresis::Health::Up
    );
}

/// `delivery.max_writes_per_second` holds back writes across tenants through the real
/// sink: ten tenants behind 5 writes/s (burst 1) each get their write, one at a time, and no
/// tenant is written twice for one snapshot. The pacing itself (one write per token, in the
/// order tenants asked) is asserted in virtual time by the delivery core's
/// `rate_limited_tenants_are_written_in_the_order_they_asked`, where no scheduler delay can
/// make it flaky.
#[actix_rt::test]
async fn the_write_rate_limit_paces_tenants_in_turn() {
    let rx = Receiver::default();
    let addr = rx.clone().start().await;
    let dir = tempfile::tempdir().unwrap();
    let secret_file = dir.path().join("secret");
    std::fs::write(&secret_file, format!("{SECRET}\n")).unwrap();
    let gws = gateways(10);
    let mut tail = String::new();
    for i in 1..=10 {
        tail.push_str(&format!(
            "[[tenants]]\nname = \"t{i}\"\ndomains = [\"t{i}.example\"]\nendpoints = [\"gw-{i}\"]\nsinks = [\"hook\"]\n\n"
        ));
    }
    tail.push_str(&format!(
        "[sinks.hook]\nkind = \"webhook\"\nurl = \"http://{addr}/dns\"\nsecret_file = {:?}\n\
         delivery = {{ max_writes_per_second = 5, burst = 1 }}\n",
        secret_file.display().to_string()
    ));
    let _engine = start_engine(
        dir.path(),
        &config(&Check::FAST, &gws.iter().collect::<Vec<_>>(), &tail),
    )
    .await;
    let start = tokio::time::Instant::now();
    while rx.accepted().len() < 10 {
        assert!(
            start.elapsed() < LIMIT,
            "{} of 10 delivered",
            rx.accepted().len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut tenants: Vec<String> = rx
        .accepted()
        .iter()
        .map(|d| d.body["tenant"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(tenants.len(), 10, "one write per tenant: {tenants:?}");
    tenants.sort();
    tenants.dedup();
    assert_eq!(tenants.len(), 10);
}

/// The write rate holds in any one second, a full bucket included: twenty tenants due at
/// start behind 5 writes a second with a burst of 5 reach the receiver at most 5 in any
/// window of 950 ms (a bucket alone lets 10 through in the first second: its burst and a
/// second's refill; the 50 ms spare is the network's jitter, not the limiter's), and each
/// tenant is written once.
#[actix_rt::test]
async fn no_second_holds_more_writes_than_the_rate() {
    let rx = Receiver::default();
    let addr = rx.clone().start().await;
    let dir = tempfile::tempdir().unwrap();
    let secret_file = dir.path().join("secret");
    std::fs::write(&secret_file, format!("{SECRET}\n")).unwrap();
    let gws = gateways(20);
    let mut tail = String::new();
    for i in 1..=20 {
        tail.push_str(&format!(
            "[[tenants]]\nname = \"t{i}\"\ndomains = [\"t{i}.example\"]\nendpoints = [\"gw-{i}\"]\nsinks = [\"hook\"]\n\n"
        ));
    }
    tail.push_str(&format!(
        "[sinks.hook]\nkind = \"webhook\"\nurl = \"http://{addr}/dns\"\nsecret_file = {:?}\n\
         delivery = {{ max_writes_per_second = 5, burst = 5 }}\n",
        secret_file.display().to_string()
    ));
    let _engine = start_engine(
        dir.path(),
        &config(&Check::FAST, &gws.iter().collect::<Vec<_>>(), &tail),
    )
    .await;
    let start = tokio::time::Instant::now();
    while rx.accepted().len() < 20 {
        assert!(
            start.elapsed() < LIMIT,
            "{} of 20 delivered",
            rx.accepted().len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let arrivals: Vec<tokio::time::Instant> = rx.accepted().iter().map(|d| d.at).collect();
    let busiest = (0..arrivals.len())
        .map(|i| {
            (arrivals[..=i].iter())
                .filter(|&&a| arrivals[i].duration_since(a) < Duration::from_millis(950))
                .count()
        })
        .max()
        .unwrap();
    assert!(busiest <= 5, "{busiest} writes within 950 ms");
    let mut tenants: Vec<String> = (rx.accepted().iter())
        .map(|d| d.body["tenant"].as_str().unwrap().to_owned())
        .collect();
    tenants.sort();
    tenants.dedup();
    assert_eq!(tenants.len(), 20, "each tenant written once");
}

/// `delivery.max_in_flight` holds through the real sink: forty tenants due at start, with no
/// rate limit to speak of, against a receiver that holds every request open and lets one go
/// every 20 ms. The receiver never sees more than 4 requests open at once, sees 4 (the
/// engine fills every place it has), and every tenant lands, each once.
#[actix_rt::test]
async fn writes_in_flight_never_exceed_max_in_flight() {
    let held = Arc::new(Held::default());
    let rx = Receiver::holding(held.clone());
    let addr = rx.clone().start().await;
    let dir = tempfile::tempdir().unwrap();
    let secret_file = dir.path().join("secret");
    std::fs::write(&secret_file, format!("{SECRET}\n")).unwrap();
    let gws = gateways(40);
    let mut tail = String::new();
    for i in 1..=40 {
        tail.push_str(&format!(
            "[[tenants]]\nname = \"t{i}\"\ndomains = [\"t{i}.example\"]\nendpoints = [\"gw-{i}\"]\nsinks = [\"hook\"]\n\n"
        ));
    }
    tail.push_str(&format!(
        "[sinks.hook]\nkind = \"webhook\"\nurl = \"http://{addr}/dns\"\nsecret_file = {:?}\n\
         delivery = {{ max_writes_per_second = 1000, burst = 1000, max_in_flight = 4 }}\n",
        secret_file.display().to_string()
    ));
    let _engine = start_engine(
        dir.path(),
        &config(&Check::FAST, &gws.iter().collect::<Vec<_>>(), &tail),
    )
    .await;
    let tenants = || {
        let mut tenants: Vec<String> = (rx.accepted().iter())
            .map(|d| d.body["tenant"].as_str().unwrap().to_owned())
            .collect();
        tenants.sort();
        tenants.dedup();
        tenants
    };
    let start = tokio::time::Instant::now();
    while tenants().len() < 40 {
        assert!(
            start.elapsed() < LIMIT,
            "{} of 40 delivered",
            tenants().len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        if held.now.load(Ordering::SeqCst) > 0 {
            held.release.add_permits(1);
        }
    }
    assert_eq!(
        held.most.load(Ordering::SeqCst),
        4,
        "most requests open at once"
    );
    assert_eq!(rx.accepted().len(), 40, "each tenant written once");
}
