//! The embedded authoritative server (`kind = "dns_server"`) queried with real `dig`:
//! answers, rotation, NXDOMAIN vs NODATA, REFUSED, TCP, truncation, client subnet and
//! GeoIP database for `geo`, weights, reloads, and how fast an answer follows a failure.

use std::net::SocketAddr;
use std::time::Duration;

use ho_testkit::{Behaviour, Gateway};
use tokio::time::Instant;

use crate::harness::*;
use crate::services::dig::{dig, dig1, wait_for_answer, wait_for_answer_with};
use crate::services::geoip::geoip_db;

/// A `dns_server` sink named `dns` on a loopback address of its own, authoritative for
/// `example.org`, with `extra` lines in its table.
fn dns_sink(listen: SocketAddr, extra: &str) -> String {
    format!(
        "[sinks.dns]\nkind = \"dns_server\"\nlisten = [\"{listen}\"]\nzones = [\"example.org\"]\n{extra}\n"
    )
}

fn listen_addr() -> SocketAddr {
    SocketAddr::new(loopback_ip().into(), 5353)
}

/// Every case of an `all` tenant, through one running engine.
#[actix_rt::test]
async fn answers_rotate_follow_health_and_keep_dns_semantics() {
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(3);
    let server = listen_addr();
    let tail = format!(
        "[[tenants]]\nname = \"a\"\ndomains = [\"api.example.org\", \"www.shop.example.org\"]\nsinks = [\"dns\"]\nttl = \"7s\"\n\n{}",
        dns_sink(server, "")
    );
    let engine = start_engine(
        dir.path(),
        &config(&Check::FAST, &gws.iter().collect::<Vec<_>>(), &tail),
    )
    .await;
    let all: Vec<String> = gws.iter().map(ip).collect();
    wait_for_answer(server, "api.example.org", &all).await;

    // Rotation: each address comes first in turn, as CoreDNS `loadbalance` would do.
    let firsts: std::collections::BTreeSet<String> = dig(
        server,
        &[
            "api.example.org",
            "A",
            "api.example.org",
            "A",
            "api.example.org",
            "A",
        ],
    )
    .await
    .iter()
    .map(|a| a.answers[0].clone())
    .collect();
    assert_eq!(firsts.len(), 3, "every address leads one of three answers");

    let a = dig1(server, &["API.Example.Org", "A"]).await;
    assert!(a.has_flag("aa") && !a.has_flag("ra"), "{a:?}");
    let tcp = dig1(server, &["api.example.org", "A", "+tcp"]).await;
    assert_eq!(tcp.sorted(), {
        let mut s = all.clone();
        s.sort();
        s
    });
    let nodata = dig1(server, &["api.example.org", "AAAA"]).await;
    assert_eq!(
        (nodata.status.as_str(), nodata.answers.len()),
        ("NOERROR", 0)
    );
    assert_eq!(nodata.authority, vec!["SOA"], "NODATA carries the SOA");
    let ent = dig1(server, &["shop.example.org", "A"]).await;
    assert_eq!(
        (ent.status.as_str(), ent.answers.len()),
        ("NOERROR", 0),
        "a parent of a domain exists"
    );
    let nx = dig1(server, &["nope.example.org", "A"]).await;
    assert_eq!(nx.status, "NXDOMAIN");
    assert!(nx.has_flag("aa"));
    assert_eq!(nx.authority, vec!["SOA"], "NXDOMAIN carries the SOA");
    let outside = dig1(server, &["example.com", "A"]).await;
    assert_eq!(outside.status, "REFUSED", "no recursion outside the zones");
    let soa = dig1(server, &["example.org", "SOA"]).await;
    assert_eq!(soa.answers.len(), 1);
    let axfr = dig(server, &["example.org", "AXFR"]).await;
    assert!(
        axfr.iter().all(|a| a.answers.is_empty()),
        "zone transfer is off: {axfr:?}"
    );

    // A failure leaves the answer within the detection bound.
    gws[0].set(Behaviour::Refuse).unwrap();
    let left = wait_for_answer(server, "api.example.org", &all[1..]).await;
    gws[0].set(Behaviour::Healthy).unwrap();
    let back = wait_for_answer(server, "api.example.org", &all).await;
    println!(
        "gateway down -> answer changed {} ms; back {} ms",
        left.as_millis(),
        back.as_millis()
    );

    // Serving threads add their counts in batches, at the latest when idle for 200 ms.
    let start = Instant::now();
    let metrics = loop {
        let metrics = engine.metrics().encode();
        let noerror = metric(
            &metrics,
            "health_orchestrator_dns_queries_total{qtype=\"A\",rcode=\"NOERROR\"}",
        );
        // Each serving thread flushes its own batch: the refused query may be counted by
        // another thread than the answered ones, so wait for both.
        let refused = metric(
            &metrics,
            "health_orchestrator_dns_queries_total{qtype=\"A\",rcode=\"REFUSED\"}",
        );
        if noerror.unwrap_or(0.0) >= 5.0 && refused.is_some() {
            break metrics;
        }
        assert!(start.elapsed() < LIMIT, "queries counted: {metrics}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(metrics.contains("health_orchestrator_dns_answer_seconds_bucket"));
}

/// Queries without a cookie (as resolvers and dnsperf send them) are answered from the
/// packet cache after the first: rotation goes on through it, and a failure and a recovery
/// are answered at once, never a kept answer of before.
#[actix_rt::test]
async fn kept_answers_rotate_and_follow_every_change() {
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(3);
    let server = listen_addr();
    let tail = format!(
        "[[tenants]]\nname = \"a\"\ndomains = [\"api.example.org\"]\nsinks = [\"dns\"]\n\n{}",
        dns_sink(server, "")
    );
    let _engine = start_engine(
        dir.path(),
        &config(&Check::FAST, &gws.iter().collect::<Vec<_>>(), &tail),
    )
    .await;
    let plain = ["+nocookie"];
    let all: Vec<String> = gws.iter().map(ip).collect();
    wait_for_answer_with(server, &plain, "api.example.org", &all).await;
    let queries: Vec<&str> = (0..6)
        .flat_map(|_| ["+nocookie", "api.example.org", "A"])
        .collect();
    let answers = dig(server, &queries).await;
    let firsts: std::collections::BTreeSet<&String> =
        answers.iter().map(|a| &a.answers[0]).collect();
    assert_eq!(
        firsts.len(),
        3,
        "rotation goes on from the cache: {answers:?}"
    );
    assert!(answers.iter().all(|a| a.sorted().len() == 3));

    gws[0].set(Behaviour::Refuse).unwrap();
    let rest: Vec<String> = all[1..].to_vec();
    wait_for_answer_with(server, &plain, "api.example.org", &rest).await;
    for a in dig(server, &queries).await {
        assert_eq!(a.sorted(), rest, "no kept answer of before the failure");
    }
    gws[0].set(Behaviour::Healthy).unwrap();
    wait_for_answer_with(server, &plain, "api.example.org", &all).await;
}

/// An answer bigger than 512 bytes: truncated (TC) without EDNS, whole with EDNS or over TCP.
#[actix_rt::test]
async fn a_big_answer_is_truncated_over_udp_and_whole_over_tcp() {
    let dir = tempfile::tempdir().unwrap();
    let gws = gateways(40);
    let server = listen_addr();
    let tail = format!(
        "[[tenants]]\nname = \"big\"\ndomains = [\"big.example.org\"]\nsinks = [\"dns\"]\n\n{}",
        dns_sink(server, "")
    );
    let _engine = start_engine(
        dir.path(),
        &config(&Check::FAST, &gws.iter().collect::<Vec<_>>(), &tail),
    )
    .await;
    let all: Vec<String> = gws.iter().map(ip).collect();
    wait_for_answer(server, "big.example.org", &all).await;
    let truncated = dig1(server, &["big.example.org", "A", "+noedns", "+ignore"]).await;
    assert!(
        truncated.has_flag("tc") && truncated.answers.is_empty(),
        "{truncated:?}"
    );
    let retried = dig1(server, &["big.example.org", "A", "+noedns"]).await;
    assert_eq!(retried.answers.len(), 40, "dig retries over TCP after TC");
    let edns = dig1(server, &["big.example.org", "A"]).await;
    assert!(!edns.has_flag("tc") && edns.answers.len() == 40, "{edns:?}");
}

/// `geo`: the client's subnet (EDNS) or source picks the location through `networks` and
/// a GeoIP database; unknown clients get `default_geo`; the scope is echoed (RFC 7871);
/// clients of a place without a gateway, or of a location that goes down, get the nearest
/// location up (by the database's coordinates when it has them).
#[actix_rt::test]
async fn geo_answers_by_client_subnet_networks_and_geoip_database() {
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(3);
    let server = listen_addr();
    // 10.3/16: Polish by country, but at New York by its coordinates (a City database).
    let db = geoip_db(
        dir.path(),
        &[
            ("10.2.0.0/16", "DE", None),
            ("10.3.0.0/16", "PL", Some((40.7, -74.0))),
            ("10.5.0.0/16", "PL", None),
        ],
    );
    let tail = format!(
        "{}[[tenants]]\nname = \"g\"\ndomains = [\"geo.example.org\"]\nsinks = [\"dns\"]\npolicy = \"geo\"\ndefault_geo = \"US\"\n\n{}",
        endpoints(&gws, &["labels = { geo = \"IE\" }", "labels = { geo = \"DE\" }", "labels = { geo = \"US\" }"]),
        dns_sink(server, &format!("geo = {{ networks = {{ \"10.1.0.0/16\" = \"IE\" }}, geoip_db = {:?} }}", db.display().to_string()))
    );
    let text = TestConfig::defaults(&Check::FAST).with(&tail).render();
    let _engine = start_engine(dir.path(), &text).await;
    wait_for_answer(server, "geo.example.org", &[ip(&gws[2])]).await;
    let answers = dig(
        server,
        &[
            "geo.example.org",
            "A",
            "+subnet=10.1.7.0/24",
            "geo.example.org",
            "A",
            "+subnet=10.2.9.0/24",
            "geo.example.org",
            "A",
            "+subnet=192.0.2.0/24",
        ],
    )
    .await;
    assert_eq!(
        answers[0].answers,
        vec![ip(&gws[0])],
        "networks: 10.1/16 is IE"
    );
    assert_eq!(answers[0].client_subnet.as_deref(), Some("10.1.7.0/24/24"));
    assert_eq!(
        answers[1].answers,
        vec![ip(&gws[1])],
        "GeoIP database: 10.2/16 is DE"
    );
    assert_eq!(
        answers[2].answers,
        vec![ip(&gws[2])],
        "unknown: default_geo US"
    );
    let nearest = dig(
        server,
        &[
            "geo.example.org",
            "A",
            "+subnet=10.5.1.0/24",
            "geo.example.org",
            "A",
            "+subnet=10.3.1.0/24",
        ],
    )
    .await;
    assert_eq!(
        nearest[0].answers,
        vec![ip(&gws[1])],
        "no gateway in PL: the nearest location up (DE), not default_geo"
    );
    assert_eq!(
        nearest[1].answers,
        vec![ip(&gws[2])],
        "the database's coordinates (New York) over the country's centre: US"
    );

    // Ireland's gateway fails: Irish clients get the nearest location up (DE), not the
    // default (US); the others keep theirs.
    gws[0].set(ho_testkit::Behaviour::Refuse).unwrap();
    let start = Instant::now();
    loop {
        let irish = dig1(server, &["geo.example.org", "A", "+subnet=10.1.7.0/24"]).await;
        if irish.answers == vec![ip(&gws[1])] {
            break;
        }
        assert!(start.elapsed() < LIMIT, "Irish clients still get {irish:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let unknown = dig1(server, &["geo.example.org", "A", "+subnet=192.0.2.0/24"]).await;
    assert_eq!(unknown.answers, vec![ip(&gws[2])]);
}

/// `weighted` with `answers = 1`: one address per query, drawn by weight.
#[actix_rt::test]
async fn weighted_answers_draw_one_address_by_weight() {
    let dir = tempfile::tempdir().unwrap();
    let gws = gateways(2);
    let server = listen_addr();
    let tail = format!(
        "{}[[tenants]]\nname = \"w\"\ndomains = [\"w.example.org\"]\nsinks = [\"dns\"]\npolicy = \"weighted\"\n\n{}",
        endpoints(&gws, &["weight = 30", "weight = 10"]),
        dns_sink(server, "answers = 1")
    );
    let text = TestConfig::defaults(&Check::FAST).with(&tail).render();
    let _engine = start_engine(dir.path(), &text).await;
    let start = Instant::now();
    while dig1(server, &["w.example.org", "A"])
        .await
        .answers
        .is_empty()
    {
        assert!(start.elapsed() < LIMIT, "never answered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let queries: Vec<&str> = std::iter::repeat_n(["w.example.org", "A"], 200)
        .flatten()
        .collect();
    let answers = dig(server, &queries).await;
    assert_eq!(answers.len(), 200);
    assert!(answers.iter().all(|a| a.answers.len() == 1));
    let heavy = answers
        .iter()
        .filter(|a| a.answers[0] == ip(&gws[0]))
        .count();
    // 3:1 expects 150 of 200; 115..=185 is more than 5 standard deviations (6.1) wide.
    assert!(
        (115..=185).contains(&heavy),
        "{heavy} of 200 for weight 30 against 10"
    );
}

/// A reload that rebuilds the sink keeps the socket and what it answers: queries sent
/// throughout are all answered with the full set.
#[actix_rt::test]
async fn a_reload_rebuilding_the_sink_never_stops_answering() {
    let dir = tempfile::tempdir().unwrap();
    let gws = gateways(2);
    let server = listen_addr();
    let tenant = "[[tenants]]\nname = \"r\"\ndomains = [\"r.example.org\"]\nsinks = [\"dns\"]\n\n";
    let refs: Vec<&Gateway> = gws.iter().collect();
    let mut engine = start_engine(
        dir.path(),
        &config(
            &Check::FAST,
            &refs,
            &format!("{tenant}{}", dns_sink(server, "")),
        ),
    )
    .await;
    let all: Vec<String> = gws.iter().map(ip).collect();
    wait_for_answer(server, "r.example.org", &all).await;
    let reader = tokio::spawn(async move {
        let queries: Vec<&str> = std::iter::repeat_n(["r.example.org", "A"], 300)
            .flatten()
            .collect();
        dig(server, &queries).await
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    let file = dir.path().join("config.toml");
    std::fs::write(
        &file,
        config(
            &Check::FAST,
            &refs,
            &format!("{tenant}{}", dns_sink(server, "soa = { minimum = 9 }")),
        ),
    )
    .unwrap();
    let summary = engine
        .reload(ho_kinds::load_plan(&[&file]).unwrap())
        .await
        .unwrap();
    assert_eq!(summary.sinks_rebuilt, vec!["dns".to_string()]);
    let answers = reader.await.unwrap();
    assert_eq!(answers.len(), 300);
    for a in &answers {
        assert_eq!(
            (a.status.as_str(), a.answers.len()),
            ("NOERROR", 2),
            "{a:?}"
        );
    }
    let nx = dig1(server, &["nope.example.org", "A"]).await;
    assert_eq!(nx.authority, vec!["SOA"]);
}

/// A query for `name` A with id `id`, as a stub resolver writes it: without EDNS, or with
/// EDNS carrying `cookie` as its COOKIE option.
fn raw_query(id: u16, name: &str, cookie: Option<&[u8]>) -> Vec<u8> {
    let mut m = id.to_be_bytes().to_vec();
    m.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, u8::from(cookie.is_some())]);
    for label in name.split('.') {
        m.push(label.len() as u8);
        m.extend_from_slice(label.as_bytes());
    }
    m.extend_from_slice(&[0, 0, 1, 0, 1]);
    if let Some(cookie) = cookie {
        // OPT: root name, type 41, UDP size 1232, no extended flags, one option.
        m.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0]);
        m.extend_from_slice(&(4 + cookie.len() as u16).to_be_bytes());
        m.extend_from_slice(&[0, 10]);
        m.extend_from_slice(&(cookie.len() as u16).to_be_bytes());
        m.extend_from_slice(cookie);
    }
    m
}

/// Sends `n` identical queries for `name` from `from` at once (with `cookie`, if given);
/// the answers that come back within 300 ms of the last, as (full answers, truncated
/// answers).
async fn burst(
    server: SocketAddr,
    from: std::net::IpAddr,
    name: &str,
    n: u16,
    cookie: Option<&[u8]>,
) -> (usize, usize) {
    let socket = tokio::net::UdpSocket::bind((from, 0)).await.unwrap();
    for id in 0..n {
        socket
            .send_to(&raw_query(id, name, cookie), server)
            .await
            .unwrap();
    }
    let (mut full, mut truncated) = (0, 0);
    let mut buf = [0u8; 1500];
    while let Ok(Ok((len, _))) =
        tokio::time::timeout(Duration::from_millis(300), socket.recv_from(&mut buf)).await
    {
        let answers = u16::from_be_bytes([buf[6], buf[7]]);
        match (buf[2] & 0x02 != 0, answers) {
            (true, 0) => truncated += 1,
            (false, a) if a > 0 => full += 1,
            other => panic!("unexpected answer {other:?}: {:?}", &buf[..len]),
        }
    }
    (full, truncated)
}

/// An engine whose `dns_server` answers `api.example.org` with one healthy gateway's
/// address and limits UDP answers to 5 a second per client network (slip 2). The answer is
/// waited for over TCP (never limited), so the name's account starts full.
struct RateLimited {
    engine: ho_engine::Engine,
    server: SocketAddr,
    address: String,
    _gateways: Vec<Gateway>,
    _dir: tempfile::TempDir,
}

impl RateLimited {
    async fn start() -> RateLimited {
        let dir = tempfile::tempdir().unwrap();
        let gateways = gateways(1);
        let server = listen_addr();
        let tail = format!(
            "[[tenants]]\nname = \"a\"\ndomains = [\"api.example.org\"]\nsinks = [\"dns\"]\n\n{}",
            // The answer canary asks from loopback too: it would share the client network's
            // account whose drops these tests count exactly.
            dns_sink(
                server,
                "rate_limit = { responses_per_second = 5, slip = 2 }\ncanary = { enabled = false }"
            )
        );
        let engine = start_engine(
            dir.path(),
            &config(&Check::FAST, &gateways.iter().collect::<Vec<_>>(), &tail),
        )
        .await;
        let address = ip(&gateways[0]);
        wait_for_answer_with(
            server,
            &["+tcp"],
            "api.example.org",
            std::slice::from_ref(&address),
        )
        .await;
        RateLimited {
            engine,
            server,
            address,
            _gateways: gateways,
            _dir: dir,
        }
    }
}

/// Response rate limiting over UDP (`rate_limit`): a burst of 20 identical queries from one
/// client network gets the 5 a second it allows, then every second limited answer
/// truncated (a real client retries over TCP) and nothing for the rest; another network
/// and TCP are not limited; both actions are counted.
#[actix_rt::test]
async fn rate_limiting_drops_and_slips_udp_answers_past_the_limit() {
    let limited = RateLimited::start().await;
    let (server, address) = (limited.server, limited.address.clone());

    let client: std::net::IpAddr = "127.0.0.1".parse().unwrap();
    let (full, truncated) = burst(server, client, "api.example.org", 20, None).await;
    // 5 within the burst (a sixth if a token came back meanwhile), then of the limited
    // ones every second slips.
    assert!((5..=6).contains(&full), "{full} full answers");
    assert_eq!(
        truncated,
        (20 - full) / 2,
        "{full} full, {truncated} truncated"
    );

    let other_network = std::net::IpAddr::V4(loopback_ip());
    assert_eq!(
        burst(server, other_network, "api.example.org", 5, None).await,
        (5, 0)
    );
    let tcp = dig1(server, &["+tcp", "api.example.org", "A"]).await;
    assert_eq!(tcp.sorted(), [address], "TCP is never limited");

    let start = Instant::now();
    loop {
        let metrics = limited.engine.metrics().encode();
        let counted = |action: &str| {
            metric(
                &metrics,
                &format!("health_orchestrator_dns_rate_limited_total{{action=\"{action}\"}}"),
            )
            .unwrap_or(0.0)
        };
        let dropped = 20 - full - truncated;
        if counted("slipped") == truncated as f64 && counted("dropped") == dropped as f64 {
            break;
        }
        assert!(start.elapsed() < LIMIT, "rate limiting counted: {metrics}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// DNS cookies (RFC 7873, RFC 9018) with real `dig`: a client cookie comes back with a server
/// cookie (`dig` judges it good); a client that returns the server cookie it was given has
/// proven its address and is not rate limited, while the same burst without it is.
#[actix_rt::test]
async fn a_client_returning_its_server_cookie_is_not_rate_limited() {
    let limited = RateLimited::start().await;
    let server = limited.server;

    let first = dig1(server, &["+cookie", "api.example.org", "A"]).await;
    let (hex, verdict) = first.cookie.clone().expect("a COOKIE option in the answer");
    assert_eq!((hex.len(), verdict.as_str()), (48, "good"), "{first:?}");
    let cookie: Vec<u8> = (0..24)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    let client: std::net::IpAddr = "127.0.0.1".parse().unwrap();
    assert_eq!(
        burst(server, client, "api.example.org", 20, Some(&cookie)).await,
        (20, 0),
        "a proven client is not limited"
    );
    let (full, _) = burst(server, client, "api.example.org", 20, None).await;
    assert!(
        (5..=6).contains(&full),
        "without the cookie: {full} full answers"
    );
}

/// One DNS query over an open TCP connection: whether an answer came back.
async fn tcp_answers(stream: &mut tokio::net::TcpStream) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let query = raw_query(7, "api.example.org", None);
    let mut framed = (query.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&query);
    if stream.write_all(&framed).await.is_err() {
        return false;
    }
    let read = tokio::time::timeout(Duration::from_secs(2), stream.read_u16()).await;
    matches!(read, Ok(Ok(len)) if len > 12)
}

/// One client address holds at most 16 TCP connections: the 17th is closed as it is
/// accepted, while the first 16 are served, another address is served, and a connection
/// closed by the client frees its place.
#[actix_rt::test]
async fn one_client_holds_at_most_sixteen_tcp_connections() {
    let limited = RateLimited::start().await;
    let connect = |from: std::net::IpAddr| async move {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::new(from, 0)).unwrap();
        socket.connect(limited.server).await.unwrap()
    };
    // An address of its own: the start-up wait's queries (dig over TCP from 127.0.0.1) may
    // still hold places until the server reads their close.
    let client = std::net::IpAddr::V4(loopback_ip());
    let mut held = Vec::new();
    for _ in 0..16 {
        held.push(connect(client).await);
    }
    for stream in &mut held {
        assert!(tcp_answers(stream).await, "one of the first 16 is served");
    }
    let mut seventeenth = connect(client).await;
    assert!(!tcp_answers(&mut seventeenth).await, "the 17th is closed");
    let mut elsewhere = connect(std::net::IpAddr::V4(loopback_ip())).await;
    assert!(
        tcp_answers(&mut elsewhere).await,
        "another address is served"
    );
    drop(held.pop());
    // The server notices the close when it reads; a new connection may race it.
    let start = Instant::now();
    loop {
        if tcp_answers(&mut connect(client).await).await {
            break;
        }
        assert!(start.elapsed() < LIMIT, "a freed place is never reused");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
