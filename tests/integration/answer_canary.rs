//! The answer canary and the availability ledger against real back ends: a tenant published
//! through the embedded server and a real `pdns_server`, each asked by the canary over DNS.
//! A scripted night — a gateway fails, PowerDNS's zone is edited by hand to serve the dead
//! address again (a stale back end), the gateway heals, an operator drains the other one —
//! and the ledger's seconds of "served a dead address" and of maintenance are compared with
//! the script's own clock; the stale back end must be reported within the grace plus one
//! canary period. A restart on the same `state_dir` keeps every interval. A back end that
//! refuses the name is "unanswered".

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, SystemTime};

use ho_testkit::{Behaviour, Gateway};

use crate::harness::*;
use crate::services::dig::wait_for_answer;
use crate::services::pdns::{PdnsServer, DNS_PORT};

const ZONE: &str = "example.org";
const NAME: &str = "shop.example.org";
const PORT: u16 = 18291;
/// The probes' interval ([`Check::FAST`]) and the canary's period and grace.
const INTERVAL: Duration = Duration::from_millis(200);
const EVERY: Duration = Duration::from_millis(200);
const GRACE: Duration = Duration::from_secs(1);

fn gateway() -> Gateway {
    Gateway::start(
        SocketAddr::new(IpAddr::V4(loopback_ip()), PORT),
        Behaviour::Healthy,
    )
    .unwrap()
}

fn config(
    pdns: &PdnsServer,
    listen: SocketAddr,
    gws: [&Gateway; 2],
    state: &std::path::Path,
) -> String {
    TestConfig::defaults(&Check::FAST)
        .with(&format!(
            "state_dir = {state:?}\n\n\
             [[endpoints]]\nname = \"gw-1\"\naddress = \"{a}\"\ncheck = {{ port = {PORT} }}\n\n\
             [[endpoints]]\nname = \"gw-2\"\naddress = \"{b}\"\ncheck = {{ port = {PORT} }}\n\n\
             [[tenants]]\nname = \"shop\"\ndomains = [\"{NAME}\"]\nsinks = [\"dns\", \"pdns\"]\nttl = \"5s\"\n\n\
             [sinks.dns]\nkind = \"dns_server\"\nlisten = [\"{listen}\"]\nzones = [\"{ZONE}\"]\n\
             canary = {{ every = \"{every}ms\", grace = \"{grace}s\" }}\n\n\
             [sinks.pdns]\nkind = \"powerdns\"\nurl = \"{url}\"\napi_key_file = {key:?}\nzone = \"{ZONE}\"\ntimeout = \"1s\"\n\
             delivery = {{ backoff_min = \"50ms\", backoff_max = \"500ms\", reconcile_interval = \"1h\" }}\n\
             canary = {{ address = \"{ip}:{DNS_PORT}\", every = \"{every}ms\", grace = \"{grace}s\" }}\n",
            state = state.display().to_string(),
            a = ip(gws[0]),
            b = ip(gws[1]),
            every = EVERY.as_millis(),
            grace = GRACE.as_secs(),
            ip = pdns.ip,
            url = pdns.url(),
            key = pdns.key_file().display().to_string(),
        ))
        .render()
}

/// `/status`'s canary of sink `sink`, once listed: a canary is listed when its task has
/// started (and found its sink's DNS port, for a sink that finds it), a moment after the
/// engine's start.
async fn canary(api: SocketAddr, sink: &str) -> serde_json::Value {
    let start = tokio::time::Instant::now();
    loop {
        let status: serde_json::Value =
            serde_json::from_str(&api_get(api, "/status").await).unwrap();
        let found = (status["canaries"].as_array().into_iter().flatten())
            .find(|c| c["sink"] == sink)
            .cloned();
        match found {
            Some(canary) => return canary,
            None if start.elapsed() < LIMIT => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            None => panic!("no canary of {sink} in {status} after {LIMIT:?}"),
        }
    }
}

fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// The ledger's figures of [`NAME`] over `[from, to)`.
async fn figures(api: SocketAddr, from: SystemTime, to: SystemTime) -> serde_json::Value {
    availability(api, NAME, from, to).await
}

/// The ledger's figures of `name` over `[from, to)`, with its intervals.
pub(crate) async fn availability(
    api: SocketAddr,
    name: &str,
    from: SystemTime,
    to: SystemTime,
) -> serde_json::Value {
    let path = format!(
        "/v1/availability?name={name}&from={}&to={}&intervals=true",
        rfc3339(from),
        rfc3339(to)
    );
    serde_json::from_str(&api_get(api, &path).await).unwrap()
}

/// The figure `key` of `v`, which must hold it.
pub(crate) fn secs(v: &serde_json::Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("{key} in {v}"))
}

#[actix_rt::test]
async fn the_ledger_matches_a_scripted_night_and_the_canary_reports_a_stale_back_end() {
    let pdns = PdnsServer::start(&format!("{ZONE}."));
    let (mut g1, g2) = (gateway(), gateway());
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let server = SocketAddr::new(loopback_ip().into(), free_port_pair());
    let engine = start_engine(dir.path(), &config(&pdns, server, [&g1, &g2], &state)).await;
    let api = serve_api(&engine, None, Some("admin")).await;
    let both = vec![ip(&g1), ip(&g2)];
    wait_for_answer(server, NAME, &both).await;
    pdns.wait_for_answer(NAME, "A", &both).await;
    // The night starts once both canaries saw the first answer: until then the ledger
    // holds what they saw before the first write (nothing).
    wait_questions(api, "pdns", "match", 1.0).await;
    wait_questions(api, "dns", "match", 1.0).await;
    let start = SystemTime::now();

    // 1. gw-1 fails: dead from the fault until the last back end drops it.
    let fault = SystemTime::now();
    g1.set(Behaviour::Refuse).unwrap();
    wait_for_answer(server, NAME, &[ip(&g2)]).await;
    pdns.wait_for_answer(NAME, "A", &[ip(&g2)]).await;
    let first = fault.elapsed().unwrap();

    // 2. PowerDNS's zone is edited by hand to serve the dead address again: stale, and
    // dead again, until gw-1 heals.
    let edit = SystemTime::now();
    pdns.edit_by_hand(ZONE, &pdns.marks(ZONE), &[(NAME, "A", both.clone())]);
    let seen = wait_stale(api, "pdns", &[NAME.to_owned()], true).await;
    println!(
        "a hand edit serving a dead address: reported stale after {} ms",
        seen.as_millis()
    );
    assert!(
        seen <= GRACE + EVERY + Duration::from_millis(300),
        "stale reported after {seen:?}, past grace + one canary period"
    );
    assert!(
        canary_stale(api, "dns").await.is_empty(),
        "the embedded server serves the decision"
    );
    // The stale answer stays for two more of the canary's questions.
    wait_questions(api, "pdns", "differs", 2.0).await;
    let heal = SystemTime::now();
    g1.set(Behaviour::Healthy).unwrap();
    wait_stale(api, "pdns", &[NAME.to_owned()], false).await;
    let second = heal.duration_since(edit).unwrap();

    // 3. An operator drains gw-2 for a while: maintenance.
    let (code, body) = api_request(api, "POST", "/v1/endpoints/gw-2/drain", Some("admin")).await;
    assert_eq!(code, 200, "{body}");
    let drained = SystemTime::now();
    wait_for_answer(server, NAME, &[ip(&g1)]).await;
    // Drained for two of the canary's questions to PowerDNS.
    wait_questions(api, "pdns", "match", 2.0).await;
    let (code, body) = api_request(api, "POST", "/v1/endpoints/gw-2/undrain", Some("admin")).await;
    assert_eq!(code, 200, "{body}");
    let maintenance = drained.elapsed().unwrap();
    wait_for_answer(server, NAME, &both).await;
    pdns.wait_for_answer(NAME, "A", &both).await;
    // Both canaries saw the last answer, so the ledger's last stretch is closed.
    wait_questions(api, "pdns", "match", 1.0).await;
    wait_questions(api, "dns", "match", 1.0).await;

    let end = SystemTime::now();
    let night = figures(api, start, end).await;
    let truth = (first + second).as_secs_f64();
    let dead = secs(&night, "seconds_dead_address");
    println!(
        "dead address served: ledger {dead:.3} s, script {truth:.3} s; maintenance: ledger {:.3} s, script {:.3} s; availability {}",
        secs(&night, "seconds_maintenance"),
        maintenance.as_secs_f64(),
        night["availability"]
    );
    // Each of the two stretches within one probe interval plus one canary period.
    let bound = 2.0 * (INTERVAL + EVERY).as_secs_f64();
    assert!(
        (dead - truth).abs() <= bound,
        "dead {dead} s vs {truth} s: {night}"
    );
    assert!(
        (secs(&night, "seconds_maintenance") - maintenance.as_secs_f64()).abs()
            <= (INTERVAL + EVERY).as_secs_f64(),
        "{night}"
    );
    assert_eq!(secs(&night, "seconds_unanswered"), 0.0, "{night}");
    assert!(night["availability"].as_f64().unwrap() < 1.0);
    let kinds: Vec<&str> = night["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["served"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"dead_address"), "{night}");

    // A restart on the same state_dir keeps every interval of the night.
    drop(engine);
    let server = SocketAddr::new(loopback_ip().into(), free_port_pair());
    let engine = start_engine(dir.path(), &config(&pdns, server, [&g1, &g2], &state)).await;
    let api = serve_api(&engine, None, None).await;
    wait_for_answer(server, NAME, &both).await;
    let again = figures(api, start, end).await;
    assert_eq!(
        (
            secs(&again, "seconds_dead_address"),
            secs(&again, "seconds_maintenance")
        ),
        (dead, secs(&night, "seconds_maintenance")),
        "{again}"
    );
    let badge = api_get(api, &format!("/badge/{NAME}/30d.svg")).await;
    assert!(badge.starts_with("<svg") && badge.contains('%'), "{badge}");
    drop((g1, g2));
}

/// A back end that answers REFUSED (PowerDNS once its zone is deleted) hands resolvers
/// nothing: the canary reports the name stale with the error code, and the ledger counts
/// it unanswered from the deletion until the zone is back (within one probe interval plus
/// one canary period of the script's clock).
#[actix_rt::test]
async fn a_back_end_refusing_the_name_answers_nothing() {
    let pdns = PdnsServer::start(&format!("{ZONE}."));
    let (g1, g2) = (gateway(), gateway());
    let dir = tempfile::tempdir().unwrap();
    let server = SocketAddr::new(loopback_ip().into(), free_port_pair());
    let text = config(&pdns, server, [&g1, &g2], &dir.path().join("state"));
    let engine = start_engine(dir.path(), &text).await;
    let api = serve_api(&engine, None, None).await;
    let both = vec![ip(&g1), ip(&g2)];
    pdns.wait_for_answer(NAME, "A", &both).await;
    wait_questions(api, "pdns", "match", 1.0).await;
    let start = SystemTime::now();

    let zone = format!("/api/v1/servers/localhost/zones/{ZONE}.");
    let (code, body) = pdns.api("DELETE", &zone, "");
    assert_eq!(code, 204, "{body}");
    let deleted = SystemTime::now();
    wait_stale(api, "pdns", &[NAME.to_owned()], true).await;
    let stale = canary_stale(api, "pdns").await;
    assert_eq!(
        (&stale[0]["served"], &stale[0]["served_rcode"]),
        (&serde_json::json!([]), &"REFUSED".into()),
        "{stale:?}"
    );
    wait_questions(api, "pdns", "differs", 3.0).await;
    let records: Vec<serde_json::Value> = (both.iter())
        .map(|a| serde_json::json!({"content": a, "disabled": false}))
        .collect();
    let again = serde_json::json!({
        "name": format!("{ZONE}."), "kind": "Native", "nameservers": [],
        "rrsets": [{"name": format!("{NAME}."), "type": "A", "ttl": 5, "changetype": "REPLACE", "records": records}],
    });
    let (code, body) = pdns.api(
        "POST",
        "/api/v1/servers/localhost/zones",
        &again.to_string(),
    );
    assert_eq!(code, 201, "{body}");
    pdns.wait_for_answer(NAME, "A", &both).await;
    let truth = deleted.elapsed().unwrap();
    wait_stale(api, "pdns", &[NAME.to_owned()], false).await;

    let night = figures(api, start, SystemTime::now()).await;
    let unanswered = secs(&night, "seconds_unanswered");
    println!(
        "refused: unanswered {unanswered:.3} s in the ledger, script {:.3} s",
        truth.as_secs_f64()
    );
    assert!(
        (unanswered - truth.as_secs_f64()).abs() <= (INTERVAL + EVERY).as_secs_f64(),
        "{night}"
    );
    assert_eq!(secs(&night, "seconds_dead_address"), 0.0, "{night}");
    drop(engine);
}

/// A `geo` name is asked as a client in each location (EDNS Client Subnet), from the
/// sink's `client_subnets` (PowerDNS's LUA `country()` with the geoip backend reading a
/// City database) or the embedded server's own `geo.networks`. PowerDNS's LUA record
/// edited by hand to hand every client the US address, with Ireland's up, is stale as
/// asked from Ireland only: the canary's own question and the US client's are answered
/// within the decision.
#[actix_rt::test]
async fn a_geo_name_is_asked_as_a_client_in_each_location() {
    let dir = tempfile::tempdir().unwrap();
    let db = crate::services::geoip::geoip_db(
        dir.path(),
        &[("10.20.0.0/16", "IE", None), ("10.21.0.0/16", "US", None)],
    );
    let pdns = PdnsServer::start_with_geoip(&format!("{ZONE}."), &db);
    let (ie, us) = (gateway(), gateway());
    let server = SocketAddr::new(loopback_ip().into(), free_port_pair());
    let text = TestConfig::defaults(&Check::FAST)
        .with(&format!(
            "[[endpoints]]\nname = \"ie\"\naddress = \"{a}\"\ncheck = {{ port = {PORT} }}\nlabels = {{ geo = \"IE\" }}\n\n\
             [[endpoints]]\nname = \"us\"\naddress = \"{b}\"\ncheck = {{ port = {PORT} }}\nlabels = {{ geo = \"US\" }}\n\n\
             [[tenants]]\nname = \"shop\"\ndomains = [\"{NAME}\"]\nsinks = [\"dns\", \"pdns\"]\npolicy = \"geo\"\ndefault_geo = \"US\"\nttl = \"5s\"\n\n\
             [sinks.dns]\nkind = \"dns_server\"\nlisten = [\"{server}\"]\nzones = [\"{ZONE}\"]\n\
             geo = {{ networks = {{ \"10.20.0.0/16\" = \"IE\", \"10.21.0.0/16\" = \"US\" }} }}\n\
             canary = {{ every = \"{every}ms\", grace = \"{grace}s\" }}\n\n\
             [sinks.pdns]\nkind = \"powerdns\"\nurl = \"{url}\"\napi_key_file = {key:?}\nzone = \"{ZONE}\"\nlua = true\ntimeout = \"1s\"\n\
             delivery = {{ backoff_min = \"50ms\", backoff_max = \"500ms\", reconcile_interval = \"1h\" }}\n\
             canary = {{ address = \"{ip}:{DNS_PORT}\", every = \"{every}ms\", grace = \"{grace}s\", \
             client_subnets = {{ IE = \"10.20.1.0/24\", US = \"10.21.1.0/24\" }} }}\n",
            a = ip(&ie),
            b = ip(&us),
            every = EVERY.as_millis(),
            grace = GRACE.as_secs(),
            ip = pdns.ip,
            url = pdns.url(),
            key = pdns.key_file().display().to_string(),
        ))
        .render();
    let engine = start_engine(dir.path(), &text).await;
    let api = serve_api(&engine, None, None).await;
    for sink in ["dns", "pdns"] {
        // The name from the canary itself, from Ireland and from the US.
        assert_eq!(canary(api, sink).await["names"], 3, "{sink}");
    }
    pdns.wait_for_answer(NAME, "A", &[ip(&us)]).await;
    assert_eq!(pdns.dig_from(NAME, "A", "10.20.1.0/24").await, [ip(&ie)]);
    wait_questions(api, "pdns", "match", 3.0).await;
    wait_questions(api, "dns", "match", 3.0).await;
    assert!(canary_stale(api, "pdns").await.is_empty());

    // A LUA record's content is a Lua expression: a quoted address.
    pdns.edit_by_hand(
        ZONE,
        &pdns.marks(ZONE),
        &[(NAME, "LUA", vec![format!("A \"'{}'\"", ip(&us))])],
    );
    let start = tokio::time::Instant::now();
    let stale = loop {
        let stale = canary_stale(api, "pdns").await;
        if !stale.is_empty() {
            break stale;
        }
        assert!(start.elapsed() < LIMIT, "the hand edit never seen");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(stale.len(), 1, "{stale:?}");
    assert_eq!(
        (&stale[0]["name"], &stale[0]["geo"], &stale[0]["served"]),
        (&NAME.into(), &"IE".into(), &serde_json::json!([ip(&us)])),
        "{stale:?}"
    );
    wait_questions(api, "pdns", "differs", 2.0).await;
    assert_eq!(canary_stale(api, "pdns").await.len(), 1);
    assert!(canary_stale(api, "dns").await.is_empty());
    drop(engine);
}

/// A Route53 zone has no DNS port the canary can be sure to reach: it reads the zone's
/// listing instead. A record set added by hand (another tool's multivalue set handing out
/// an address never decided) is reported stale within the grace plus one period, with the
/// address it serves, and the report is withdrawn once the set is removed; reconciles are
/// an hour apart, so only the canary can have seen it. moto's Route53 server stands in for
/// AWS (see [`crate::fakes::route53`]).
#[actix_rt::test]
async fn a_route53_zone_is_read_through_its_listing() {
    const R53_ZONE: &str = "r53.example.com";
    let moto = crate::fakes::route53::Moto::start().await;
    let zone = moto.create_zone(R53_ZONE).await;
    let (g1, g2) = (gateway(), gateway());
    let name = format!("api.{R53_ZONE}");
    let dir = tempfile::tempdir().unwrap();
    let text = TestConfig::new(&Check::FAST, &[&g1, &g2])
        .with(&format!(
            "[[tenants]]\nname = \"a\"\ndomains = [\"{name}\"]\nsinks = [\"r53\"]\n\n\
             [sinks.r53]\nkind = \"route53\"\nhosted_zone_id = \"{zone}\"\nzone = \"{R53_ZONE}\"\n\
             region = \"us-east-1\"\nendpoint_url = \"{url}\"\ntimeout = \"2s\"\n\
             canary = {{ every = \"{every}ms\", grace = \"{grace}s\" }}\n\
             delivery = {{ backoff_min = \"50ms\", backoff_max = \"300ms\", reconcile_interval = \"1h\" }}\n",
            url = moto.url,
            every = EVERY.as_millis(),
            grace = GRACE.as_secs(),
        ))
        .render();
    let engine = start_engine(dir.path(), &text).await;
    let api = serve_api(&engine, None, None).await;
    // Served as decided for longer than the grace: an edit now is a drift nobody decided.
    wait_questions(api, "r53", "match", 1.0).await;
    wait_questions(
        api,
        "r53",
        "match",
        (GRACE.as_secs_f64() / EVERY.as_secs_f64()).ceil(),
    )
    .await;
    assert_eq!(canary(api, "r53").await["address"], "listing");

    let rogue = crate::fakes::route53::a_set(&format!("{name}."), "192.0.2.99")
        .set_identifier("another-tool")
        .multi_value_answer(true)
        .build()
        .unwrap();
    moto.put(&zone, rogue.clone()).await;
    let seen = wait_stale(api, "r53", std::slice::from_ref(&name), true).await;
    let stale = canary_stale(api, "r53").await;
    println!(
        "a set added by hand to Route53: reported stale after {} ms",
        seen.as_millis()
    );
    assert!(
        seen <= GRACE + EVERY + Duration::from_millis(300),
        "{seen:?}"
    );
    assert_eq!(stale[0]["name"], name.as_str());
    let served: Vec<&str> = (stale[0]["served"].as_array().unwrap().iter())
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(served.contains(&"192.0.2.99"), "{stale:?}");

    moto.remove(&zone, rogue).await;
    wait_stale(api, "r53", &[name], false).await;
}

/// `/status` says which sinks no canary asks and why: a hosts file (no DNS server of its
/// own), and the embedded server with its canary turned off.
#[actix_rt::test]
async fn status_says_where_the_canary_is_off_and_why() {
    let g = gateway();
    let dir = tempfile::tempdir().unwrap();
    let server = SocketAddr::new(loopback_ip().into(), free_port_pair());
    let text = TestConfig::new(&Check::FAST, &[&g])
        .with(&format!(
            "[[tenants]]\nname = \"shop\"\ndomains = [\"{NAME}\"]\nsinks = [\"dns\", \"local\"]\n\n\
             [sinks.dns]\nkind = \"dns_server\"\nlisten = [\"{server}\"]\nzones = [\"{ZONE}\"]\ncanary = {{ enabled = false }}\n\n\
             [sinks.local]\nkind = \"hosts_file\"\ndir = {dir:?}\n",
            dir = dir.path().join("hosts").display().to_string(),
        ))
        .render();
    let engine = start_engine(dir.path(), &text).await;
    let api = serve_api(&engine, None, None).await;
    let status: serde_json::Value = serde_json::from_str(&api_get(api, "/status").await).unwrap();
    let off: Vec<(&str, &str)> = (status["canaries_off"].as_array().into_iter().flatten())
        .map(|o| (o["sink"].as_str().unwrap(), o["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(off.len(), 2, "{status}");
    assert_eq!(off[0], ("dns", "turned off (canary.enabled = false)"));
    assert_eq!(off[1].0, "local");
    assert!(off[1].1.contains("give canary.address"), "{off:?}");
    assert!(
        status["canaries"].as_array().is_none_or(|c| c.is_empty()),
        "{status}"
    );
}
