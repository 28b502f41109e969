//! The Route53 sink through the official AWS SDK against moto's Route53 server (see
//! [`crate::route53_server`]), checked through the Route53 API.

use std::sync::atomic::Ordering;
use std::time::Duration;

use aws_sdk_route53::types::{ResourceRecord, ResourceRecordSet, RrType};
use ho_engine::Engine;
use ho_testkit::{Behaviour, Gateway};

use crate::fakes::route53::{Moto, Proxy};
use crate::harness::*;

const ZONE: &str = "r53.example.com";

fn sink_table(url: &str, zone_id: &str, extra: &str) -> String {
    format!(
        "[sinks.r53]\nkind = \"route53\"\nhosted_zone_id = \"{zone_id}\"\nzone = \"{ZONE}\"\n\
         region = \"us-east-1\"\nendpoint_url = \"{url}\"\ntimeout = \"2s\"\n{extra}\
         delivery = {{ backoff_min = \"50ms\", backoff_max = \"300ms\", reconcile_interval = \"1s\" }}\n"
    )
}

async fn start_r53_engine(dir: &std::path::Path, gws: &[Gateway], tail: &str) -> Engine {
    start_engine(
        dir,
        &config(&Check::FAST, &gws.iter().collect::<Vec<_>>(), tail),
    )
    .await
}

/// Waits until the zone's A/AAAA/CNAME/TXT record sets are exactly `want` (see
/// [`crate::fakes::route53::describe`]).
async fn wait_for_records(moto: &Moto, zone: &str, want: &[String], what: &str) {
    let start = tokio::time::Instant::now();
    let mut want = want.to_vec();
    want.sort();
    loop {
        let got = moto.records(zone).await;
        if got == want {
            return;
        }
        assert!(
            start.elapsed() < LIMIT,
            "timed out waiting for {what}:\nwant {want:#?}\ngot {got:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn owner(name: &str) -> String {
    format!(
        "_health-orchestrator.{name}. TXT \"heritage=health-orchestrator,owner=health-orchestrator\""
    )
}

fn multivalue(name: &str, gws: &[&Gateway]) -> Vec<String> {
    gws.iter()
        .enumerate()
        .map(|(i, g)| format!("{name}. A id={} multivalue {}", endpoint_name(g, i), ip(g)))
        .collect()
}

/// Endpoint names in [`config`] follow gateway order; `i` is the index in the full list.
fn endpoint_name(_g: &Gateway, i: usize) -> String {
    format!("gw-{}", i + 1)
}

/// The `all` policy as multivalue record sets: a gateway down removes its record set, back
/// up restores it; the ownership record is written with the first records and stays.
#[actix_rt::test]
async fn record_sets_follow_health_with_an_ownership_record() {
    let moto = Moto::start().await;
    let zone = moto.create_zone(ZONE).await;
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(3);
    let name = format!("api.{ZONE}");
    let tail = format!(
        "[[tenants]]\nname = \"a\"\ndomains = [\"{name}\"]\nsinks = [\"r53\"]\nttl = \"30s\"\n\n{}",
        sink_table(&moto.url, &zone, "")
    );
    let _engine = start_r53_engine(dir.path(), &gws, &tail).await;
    let mut all = multivalue(&name, &gws.iter().collect::<Vec<_>>());
    all.push(owner(&name));
    wait_for_records(&moto, &zone, &all, "all three and the owner record").await;

    gws[1].set(Behaviour::Refuse).unwrap();
    let without: Vec<String> = all
        .iter()
        .filter(|l| !l.contains("id=gw-2"))
        .cloned()
        .collect();
    wait_for_records(&moto, &zone, &without, "gw-2 removed").await;
    gws[1].set(Behaviour::Healthy).unwrap();
    wait_for_records(&moto, &zone, &all, "gw-2 back").await;
}

/// A wildcard name is one wildcard record set per endpoint with its ownership record at
/// `_health-orchestrator.*.<parent>`; read back from the listing, a second round changes
/// nothing, and a gateway down removes its set.
#[actix_rt::test]
async fn a_wildcard_is_written_as_wildcard_record_sets() {
    let moto = Moto::start().await;
    let zone = moto.create_zone(ZONE).await;
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(2);
    let name = format!("*.apps.{ZONE}");
    let tail = format!(
        "[[tenants]]\nname = \"a\"\ndomains = [\"{name}\"]\nsinks = [\"r53\"]\nttl = \"30s\"\n\n{}",
        sink_table(&moto.url, &zone, "")
    );
    let engine = start_r53_engine(dir.path(), &gws, &tail).await;
    let mut all = multivalue(&name, &gws.iter().collect::<Vec<_>>());
    all.push(owner(&name));
    wait_for_records(&moto, &zone, &all, "both and the owner record").await;
    eventually("a reconcile round that changes nothing", || {
        sink_writes_with(&engine, "r53", "unchanged") > 0
    })
    .await;

    gws[0].set(Behaviour::Refuse).unwrap();
    let without: Vec<String> = all
        .iter()
        .filter(|l| !l.contains("id=gw-1"))
        .cloned()
        .collect();
    wait_for_records(&moto, &zone, &without, "gw-1 removed").await;
}

/// An `answer = "cname"` failover tenant at `api.` and the zone's apex over two load
/// balancers' host names (resolved by a real `pdns_server`, as a cloud's DNS answers for
/// them, `east` preferred), written to moto by a route53 sink with `extra` settings.
struct CnameTenant {
    east: Gateway,
    west: Gateway,
    moto: Moto,
    zone: String,
    engine: Engine,
    _pdns: crate::services::pdns::PdnsServer,
    _dir: tempfile::TempDir,
}

async fn cname_tenant(extra: &str) -> CnameTenant {
    use crate::cname_answers::{balancers, lb_endpoints, LB_ZONE};
    let pdns = crate::services::pdns::PdnsServer::start(&format!("{LB_ZONE}."));
    let (east, west) = balancers(&pdns);
    let moto = Moto::start().await;
    let zone = moto.create_zone(ZONE).await;
    let dir = tempfile::tempdir().unwrap();
    let text = TestConfig::defaults(&Check::FAST)
        .with(&lb_endpoints(&pdns))
        .with(&format!(
            "[[tenants]]\nname = \"api\"\ndomains = [\"api.{ZONE}\", \"{ZONE}\"]\npolicy = \"failover\"\n\
             answer = \"cname\"\nsinks = [\"r53\"]\nttl = \"30s\"\n\n{}",
            sink_table(&moto.url, &zone, extra)
        ))
        .render();
    let engine = start_engine(dir.path(), &text).await;
    CnameTenant {
        east,
        west,
        moto,
        zone,
        engine,
        _pdns: pdns,
        _dir: dir,
    }
}

/// `answer = "cname"`: the name below the apex is one CNAME record set to the preferred
/// load balancer, moved when it fails; the apex, which cannot hold a CNAME, holds the
/// healthy balancer's address.
#[actix_rt::test]
async fn a_cname_tenant_fails_over_between_load_balancer_names() {
    use crate::cname_answers::LB_ZONE;
    let mut t = cname_tenant("").await;
    let want = |lb: &str, g: &Gateway| {
        vec![
            format!("api.{ZONE}. CNAME lb-{lb}.{LB_ZONE}."),
            format!("{ZONE}. A id={lb}@{0} multivalue {0}", ip(g)),
            owner(&format!("api.{ZONE}")),
            owner(ZONE),
        ]
    };
    let (moto, zone) = (&t.moto, &t.zone);
    wait_for_records(moto, zone, &want("east", &t.east), "a CNAME to east").await;
    t.east.set(Behaviour::Refuse).unwrap();
    wait_for_records(
        moto,
        zone,
        &want("west", &t.west),
        "the CNAME moved to west",
    )
    .await;
    t.east.set(Behaviour::Healthy).unwrap();
    wait_for_records(moto, zone, &want("east", &t.east), "back to east").await;
}

/// `answer = "cname"` with the load balancers' hosted zone in `alias_zones`: the apex holds
/// A and AAAA aliases of the preferred balancer's name (in that hosted zone, as Route53
/// aliases an ELB), moved when it fails; the name below the apex its CNAME.
#[actix_rt::test]
async fn a_cname_tenants_apex_aliases_the_load_balancer() {
    use crate::cname_answers::LB_ZONE;
    let mut t = cname_tenant(&format!(
        "alias_zones = {{ \"{LB_ZONE}\" = \"ZLBTEST0123\" }}\n"
    ))
    .await;
    let want = |lb: &str| {
        vec![
            format!("api.{ZONE}. CNAME lb-{lb}.{LB_ZONE}."),
            format!("{ZONE}. A alias=lb-{lb}.{LB_ZONE}.@ZLBTEST0123 "),
            format!("{ZONE}. AAAA alias=lb-{lb}.{LB_ZONE}.@ZLBTEST0123 "),
            owner(&format!("api.{ZONE}")),
            owner(ZONE),
        ]
    };
    let (moto, zone) = (&t.moto, &t.zone);
    wait_for_records(moto, zone, &want("east"), "the apex aliases east").await;
    eventually("a reconcile round that changes nothing", || {
        sink_writes_with(&t.engine, "r53", "unchanged") > 0
    })
    .await;
    t.east.set(Behaviour::Refuse).unwrap();
    wait_for_records(moto, zone, &want("west"), "the apex aliases west").await;
}

/// `weighted` and `geo` tenants in one zone: weighted record sets from endpoint weights,
/// geolocation record sets from the `geo` label with a default location.
#[actix_rt::test]
async fn weighted_and_geo_tenants_render_as_routed_record_sets() {
    let moto = Moto::start().await;
    let zone = moto.create_zone(ZONE).await;
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(3);
    let mut config = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>());
    // Labels and weights on the generated endpoints.
    for (i, (weight, geo)) in [(30, "DE"), (10, "US-CA"), (0, "DE")]
        .into_iter()
        .enumerate()
    {
        config = config
            .set(&format!("endpoints.{i}.weight"), weight)
            .set(&format!("endpoints.{i}.labels.geo"), geo);
    }
    let text = config.with(&format!(
        "[[tenants]]\nname = \"w\"\ndomains = [\"w.{ZONE}\"]\nsinks = [\"r53\"]\npolicy = \"weighted\"\nttl = \"30s\"\n\n\
         [[tenants]]\nname = \"g\"\ndomains = [\"g.{ZONE}\"]\nsinks = [\"r53\"]\npolicy = \"geo\"\ndefault_geo = \"DE\"\nttl = \"30s\"\n\n{}",
        sink_table(&moto.url, &zone, "")
    ))
    .render();
    let _engine = start_engine(dir.path(), &text).await;
    let (a, b, c) = (ip(&gws[0]), ip(&gws[1]), ip(&gws[2]));
    let mut de = [a.clone(), c.clone()];
    de.sort();
    let de = de.join(",");
    let expect = |de: &str| {
        vec![
            format!("w.{ZONE}. A id=gw-1 weight=30 {a}"),
            format!("w.{ZONE}. A id=gw-2 weight=10 {b}"),
            format!("w.{ZONE}. A id=gw-3 weight=0 {c}"),
            owner(&format!("w.{ZONE}")),
            format!("g.{ZONE}. A id=DE geo=DE {de}"),
            format!("g.{ZONE}. A id=US-CA geo=US-CA {b}"),
            format!("g.{ZONE}. A id=default geo=* {de}"),
            owner(&format!("g.{ZONE}")),
        ]
    };
    wait_for_records(&moto, &zone, &expect(&de), "weighted and geo sets").await;

    // Both DE gateways down: German clients get the nearest location up (US-CA) in the DE
    // set, and the default answers every healthy address.
    gws[0].set(Behaviour::Refuse).unwrap();
    gws[2].set(Behaviour::Refuse).unwrap();
    wait_for_records(
        &moto,
        &zone,
        &[
            format!("w.{ZONE}. A id=gw-2 weight=10 {b}"),
            owner(&format!("w.{ZONE}")),
            format!("g.{ZONE}. A id=DE geo=DE {b}"),
            format!("g.{ZONE}. A id=US-CA geo=US-CA {b}"),
            format!("g.{ZONE}. A id=default geo=* {b}"),
            owner(&format!("g.{ZONE}")),
        ],
        "DE down",
    )
    .await;
}

/// Weights inside a geolocation (Kuadrant's weighted geo): the location's set is an alias
/// of `<location>._weighted.<name>`, where weighted sets (one per endpoint) answer; when the
/// weights of a location become equal (one endpoint left), the alias gives way to a plain
/// set and the weighted sets leave.
#[actix_rt::test]
async fn weights_inside_a_geo_are_a_record_tree_of_aliases() {
    let moto = Moto::start().await;
    let zone = moto.create_zone(ZONE).await;
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(3);
    let mut config = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>());
    for (i, (weight, geo)) in [(30, "DE"), (10, "DE"), (5, "IE")].into_iter().enumerate() {
        config = config
            .set(&format!("endpoints.{i}.weight"), weight)
            .set(&format!("endpoints.{i}.labels.geo"), geo);
    }
    let text = config
        .with(&format!(
            "[[tenants]]\nname = \"g\"\ndomains = [\"g.{ZONE}\"]\nsinks = [\"r53\"]\npolicy = \"geo\"\ndefault_geo = \"IE\"\ndefault_weight = 1\nttl = \"30s\"\n\n{}",
            sink_table(&moto.url, &zone, "")
        ))
        .render();
    let _engine = start_engine(dir.path(), &text).await;
    let (a, b, c) = (ip(&gws[0]), ip(&gws[1]), ip(&gws[2]));
    let tree = format!("de._weighted.g.{ZONE}.");
    wait_for_records(
        &moto,
        &zone,
        &[
            format!("{tree} A id=gw-1 weight=30 {a}"),
            format!("{tree} A id=gw-2 weight=10 {b}"),
            owner(&format!("de._weighted.g.{ZONE}")),
            format!("g.{ZONE}. A id=DE geo=DE alias={tree}@{zone} "),
            format!("g.{ZONE}. A id=IE geo=IE {c}"),
            format!("g.{ZONE}. A id=default geo=* {c}"),
            owner(&format!("g.{ZONE}")),
        ],
        "an alias of the weighted sets for DE",
    )
    .await;

    // gw-2 down: DE has one weight left; a plain set replaces the alias, the tree empties.
    gws[1].set(Behaviour::Refuse).unwrap();
    wait_for_records(
        &moto,
        &zone,
        &[
            owner(&format!("de._weighted.g.{ZONE}")),
            format!("g.{ZONE}. A id=DE geo=DE {a}"),
            format!("g.{ZONE}. A id=IE geo=IE {c}"),
            format!("g.{ZONE}. A id=default geo=* {c}"),
            owner(&format!("g.{ZONE}")),
        ],
        "DE with one address: a plain set",
    )
    .await;
}

/// Record sets without our ownership record, or with another owner's, are never changed
/// or deleted, even though a tenant asks for the name; the tenant's free name is written
/// and the refusal shows in the sink's status.
#[actix_rt::test]
async fn names_without_our_ownership_record_are_never_touched() {
    let moto = Moto::start().await;
    let zone = moto.create_zone(ZONE).await;
    let plain = |name: &str, value: &str, rtype: RrType| {
        ResourceRecordSet::builder()
            .name(name)
            .r#type(rtype)
            .ttl(60)
            .resource_records(ResourceRecord::builder().value(value).build().unwrap())
            .build()
            .unwrap()
    };
    let theirs = format!("theirs.{ZONE}.");
    let other = format!("other.{ZONE}.");
    moto.put(&zone, plain(&theirs, "192.0.2.1", RrType::A))
        .await;
    moto.put(&zone, plain(&other, "192.0.2.2", RrType::A)).await;
    moto.put(
        &zone,
        plain(
            &format!("_health-orchestrator.{other}"),
            "\"heritage=health-orchestrator,owner=eu-2\"",
            RrType::Txt,
        ),
    )
    .await;
    let before = moto.records(&zone).await;

    let dir = tempfile::tempdir().unwrap();
    let gws = gateways(1);
    let tail = format!(
        "[[tenants]]\nname = \"a\"\ndomains = [\"theirs.{ZONE}\", \"other.{ZONE}\", \"free.{ZONE}\"]\nsinks = [\"r53\"]\n\n{}",
        sink_table(&moto.url, &zone, "record_style = \"simple\"\n")
    );
    let engine = start_r53_engine(dir.path(), &gws, &tail).await;
    let err = wait_for_sink_error(&engine, "r53", "no refusal reported").await;
    assert_eq!(
        err,
        format!(
            "other.{ZONE}. is owned by eu-2 (per _health-orchestrator.other.{ZONE}. TXT), not by health-orchestrator; left alone; \
             theirs.{ZONE}. has A/AAAA/CNAME records without an ownership record (_health-orchestrator.theirs.{ZONE}. TXT); left alone"
        )
    );
    let mut want = before.clone();
    want.push(format!("free.{ZONE}. A {}", ip(&gws[0])));
    want.push(owner(&format!("free.{ZONE}")));
    wait_for_records(&moto, &zone, &want, "only the free name written").await;
    // Reconciles (every second) keep refusing.
    let writes = sink_writes(&engine, "r53");
    eventually("two reconciles", || {
        sink_writes(&engine, "r53") >= writes + 2
    })
    .await;
    wait_for_records(&moto, &zone, &want, "nothing foreign touched").await;
}

/// A burst of `Throttling` answers: the sink reports it, backs off, and converges to the
/// latest state once Route53 accepts again.
#[actix_rt::test]
async fn a_throttling_burst_is_retried_until_the_zone_converges() {
    let moto = Moto::start().await;
    let zone = moto.create_zone(ZONE).await;
    let proxy = Proxy::default();
    let url = proxy.start(&moto.url).await;
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(2);
    let name = format!("api.{ZONE}");
    let tail = format!(
        "[[tenants]]\nname = \"a\"\ndomains = [\"{name}\"]\nsinks = [\"r53\"]\n\n{}",
        sink_table(&url, &zone, "")
    );
    let engine = start_r53_engine(dir.path(), &gws, &tail).await;
    let mut all = multivalue(&name, &gws.iter().collect::<Vec<_>>());
    all.push(owner(&name));
    wait_for_records(&moto, &zone, &all, "first publish").await;

    proxy.throttle_changes.store(4, Ordering::SeqCst);
    gws[0].set(Behaviour::Refuse).unwrap();
    let err = wait_for_sink_error(&engine, "r53", "throttling not reported").await;
    assert!(
        err.starts_with("Route53 is throttling: ChangeResourceRecordSets on hosted zone"),
        "{err}"
    );
    let after: Vec<String> = all
        .iter()
        .filter(|l| !l.contains("id=gw-1"))
        .cloned()
        .collect();
    wait_for_records(&moto, &zone, &after, "converged after the burst").await;
    assert_eq!(proxy.throttle_changes.load(Ordering::SeqCst), 0);
    let status = engine.sink_status("r53").await.unwrap();
    assert!(status.tenants[0].last_success.is_some());
}

/// A route53 sink on `url`'s zone `zone_id` (simple records) and the plan of `tenants`
/// (`NAME.` + the zone each) over `gws`, for tests that drive the sink themselves.
fn direct_sink(
    url: &str,
    zone_id: &str,
    tenants: &[String],
    gws: &[Gateway],
) -> (ho_config::Plan, ho_sinks::Route53Sink) {
    let dir = tempfile::tempdir().unwrap();
    let mut tail = String::new();
    for t in tenants {
        tail.push_str(&format!(
            "[[tenants]]\nname = \"{t}\"\ndomains = [\"{t}.{ZONE}\"]\nsinks = [\"r53\"]\n\n"
        ));
    }
    tail.push_str(&sink_table(url, zone_id, "record_style = \"simple\"\n"));
    let file = dir.path().join("config.toml");
    std::fs::write(
        &file,
        config(&Check::FAST, &gws.iter().collect::<Vec<_>>(), &tail),
    )
    .unwrap();
    let plan = ho_kinds::load_plan(&[&file]).unwrap();
    let sink = ho_sinks::Route53Sink::new(
        ho_engine::sink::kind::spec_of(&*plan.sinks["r53"].spec),
        "health-orchestrator",
        &crate::fakes::route53::sdk_config(),
    );
    (plan, sink)
}

/// Tenants waiting at the same time go out in one round: one listing, one change batch.
#[actix_rt::test]
async fn concurrent_tenants_share_one_listing_and_one_batch() {
    use ho_engine::sink::Sink;
    use ho_engine::snapshot::{PublishedAddress, TenantSnapshot};
    use std::sync::Arc;
    let moto = Moto::start().await;
    let zone = moto.create_zone(ZONE).await;
    let proxy = Proxy::default();
    let url = proxy.start(&moto.url).await;
    let gws = gateways(1);
    let names: Vec<String> = (0..20).map(|t| format!("t{t}")).collect();
    let (plan, sink) = direct_sink(&url, &zone, &names, &gws);
    let mut writes = Vec::new();
    for t in &plan.tenants {
        let domains: Vec<&str> = t.domains.iter().map(String::as_str).collect();
        let address = PublishedAddress::of("gw-1", gws[0].addr().ip(), 1, Default::default());
        let snapshot = TenantSnapshot::healthy(&t.name, &domains, t.policy, vec![address]);
        writes.push(tokio::spawn(sink.apply(Arc::new(snapshot))));
    }
    for w in writes {
        let result = w.await.unwrap();
        assert!(result.is_ok(), "{result:?}");
    }
    let requests = proxy.requests.lock().unwrap().clone();
    // The first call runs alone (it found nobody waiting); the other 19 wait for it and
    // then share one round.
    assert_eq!(proxy.changes(), 2, "{requests:#?}");
    assert_eq!(moto.records(&zone).await.len(), 40);
}

/// A round decides from the sink's view of the zone: a change after a change lists nothing.
/// A view gone stale can never overwrite someone else's record: a name taken behind the
/// sink's back (a foreign A record set) makes Route53 refuse the claim (CREATE of what
/// exists; moto accepts it, so the proxy answers as Route53 does), which drops the view; the retry lists the zone, sees the foreign record and
/// leaves it alone, with the usual error. A write of the same state again (a reconcile)
/// always lists, which `conformance::route53_conforms` holds (case 4).
#[actix_rt::test]
async fn rounds_decide_from_the_sinks_view_and_list_again_after_a_refusal() {
    use ho_engine::sink::{Applied, Sink};
    use ho_engine::snapshot::{PublishedAddress, TenantSnapshot};
    use std::sync::Arc;
    let moto = Moto::start().await;
    let zone = moto.create_zone(ZONE).await;
    let proxy = Proxy::default();
    let url = proxy.start(&moto.url).await;
    let gws = gateways(2);
    let (plan, sink) = direct_sink(&url, &zone, &["t".into(), "u".into()], &gws);
    let snapshot = |tenant: &str, seq: u64, gws: &[&Gateway]| {
        let addresses = gws
            .iter()
            .enumerate()
            .map(|(i, g)| {
                PublishedAddress::of(&format!("gw-{i}"), g.addr().ip(), 1, Default::default())
            })
            .collect();
        let name = format!("{tenant}.{ZONE}");
        let policy = plan.tenants[0].policy;
        let mut s = TenantSnapshot::healthy(tenant, &[name.as_str()], policy, addresses);
        s.seq = seq;
        Arc::new(s)
    };
    let lists = || {
        proxy
            .requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.starts_with("GET") && r.ends_with("/rrset"))
            .count()
    };
    let one = sink.apply(snapshot("t", 1, &[&gws[0]])).await;
    assert_eq!(one, Ok(Applied::Changed));
    let listed = lists();
    assert!(listed >= 1);
    let two = sink.apply(snapshot("t", 2, &[&gws[0], &gws[1]])).await;
    assert_eq!(two, Ok(Applied::Changed));
    assert_eq!(lists(), listed, "a change after a change lists nothing");
    assert_eq!(proxy.changes(), 2);

    // Someone else takes u behind the sink's back.
    let foreign = crate::fakes::route53::a_set(&format!("u.{ZONE}."), "192.0.2.99")
        .build()
        .unwrap();
    moto.put(&zone, foreign).await;
    proxy
        .refuse_changes
        .store(1, std::sync::atomic::Ordering::SeqCst);
    let refused = sink.apply(snapshot("u", 1, &[&gws[0]])).await;
    assert!(refused.is_err(), "claiming a taken name: {refused:?}");
    assert_eq!(lists(), listed, "the refused round used the view");
    let retried = sink.apply(snapshot("u", 1, &[&gws[0]])).await;
    let error = format!("{retried:?}");
    assert!(
        error.contains("without an ownership record") && error.contains("left alone"),
        "{error}"
    );
    assert!(lists() > listed, "the retry listed the zone");
    let records = moto.records(&zone).await;
    assert!(
        records
            .iter()
            .any(|r| r.starts_with(&format!("u.{ZONE}. A ")) && r.ends_with("192.0.2.99")),
        "{records:#?}"
    );
}
