//! The external-dns webhook sink against the protocol's test server
//! (`fakes::external_dns`, written from external-dns's protocol document, Go types and
//! in-memory provider): it shares a zone with an external-dns deployment, each leaving the
//! other's names alone through external-dns's TXT registry; a server that does not speak
//! the protocol, and a name outside the provider's domain filter, are specific errors; the
//! clusters' reports round-trip as TXT record sets; tenants changing at once share rounds.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ho_engine::sink::reports::Rrset;
use ho_engine::sink::Sink;
use ho_sinks::{ExternalDnsWebhookConfig, ExternalDnsWebhookSink};

use crate::fakes::external_dns::ExternalDnsProvider;
use crate::harness::*;

fn sink_table(url: &str) -> String {
    format!(
        "[sinks.edns]\nkind = \"external_dns_webhook\"\nurl = \"{url}\"\ntimeout = \"1s\"\nmax_requests_per_second = 50.0\n"
    )
}

fn tenant(name: &str, domains: &str) -> String {
    format!("[[tenants]]\nname = \"{name}\"\ndomains = [{domains}]\nsinks = [\"edns\"]\nttl = \"60s\"\n\n")
}

/// Wildcards with `txt_wildcard_replacement`, as external-dns's
/// `--txt-wildcard-replacement`: external-dns (owner `default`, stand-in `wildcard`) holds
/// `*.web`, marked at `a-wildcard.web`; the orchestrator writes `*.apps` with its marks at
/// `a-wildcard.apps` and `aaaa-wildcard.apps`, and leaves `*.web` alone as another
/// owner's.
#[actix_rt::test]
async fn wildcards_are_marked_as_external_dns_marks_them() {
    let dir = tempfile::tempdir().unwrap();
    let provider = ExternalDnsProvider::start(&["shared.test"], 0).await;
    provider.insert("*.web.shared.test", "A", &["198.51.100.7"]);
    provider.insert(
        "a-wildcard.web.shared.test",
        "TXT",
        &["\"heritage=external-dns,external-dns/owner=default,external-dns/resource=ingress/shop/web\""],
    );
    let gws = gateways(1);
    let text = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
        .with(&tenant(
            "t",
            "\"*.apps.shared.test\", \"*.web.shared.test\"",
        ))
        .with(&format!(
            "{}txt_wildcard_replacement = \"wildcard\"\n",
            sink_table(&provider.url)
        ))
        .render();
    let engine = start_engine(dir.path(), &text).await;
    let error = wait_for_sink_error(&engine, "edns", "the wildcard of another owner").await;
    assert!(
        error.contains("left alone") && error.contains("*.web.shared.test"),
        "{error}"
    );
    eventually("*.apps written", || {
        provider.addresses("*.apps.shared.test") == Some(vec![ip(&gws[0])])
    })
    .await;
    let mut marks: Vec<String> = (provider.records().into_iter())
        .filter(|r| r.record_type == "TXT")
        .map(|r| r.dns_name)
        .collect();
    marks.sort();
    assert_eq!(
        marks,
        [
            "a-wildcard.apps.shared.test",
            "a-wildcard.web.shared.test",
            "aaaa-wildcard.apps.shared.test"
        ]
    );
    assert_eq!(
        provider.addresses("*.web.shared.test"),
        Some(vec!["198.51.100.7".into()])
    );
}

/// external-dns (owner `default`) holds `web`; someone else holds `legacy` by hand. The
/// orchestrator writes `api` with registry marks external-dns reads as another owner's,
/// and leaves both other names as they were, saying why.
#[actix_rt::test]
async fn external_dns_and_the_orchestrator_share_a_zone_and_leave_each_other_alone() {
    let dir = tempfile::tempdir().unwrap();
    let provider = ExternalDnsProvider::start(&["shared.test"], 0).await;
    provider.insert("web.shared.test", "A", &["198.51.100.7"]);
    provider.insert(
        "a-web.shared.test",
        "TXT",
        &["\"heritage=external-dns,external-dns/owner=default,external-dns/resource=ingress/shop/web\""],
    );
    provider.insert("legacy.shared.test", "A", &["198.51.100.8"]);
    let gws = gateways(2);
    let text = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
        .with(&tenant(
            "t",
            "\"api.shared.test\", \"web.shared.test\", \"legacy.shared.test\"",
        ))
        .with(&sink_table(&provider.url))
        .render();
    let engine = start_engine(dir.path(), &text).await;
    let error = wait_for_sink_error(&engine, "edns", "the names of others").await;
    assert!(
        error.contains("left alone")
            && error.contains("web.shared.test")
            && error.contains("legacy.shared.test"),
        "{error}"
    );
    let mut ips: Vec<String> = gws.iter().map(ip).collect();
    ips.sort();
    eventually("api written", || {
        provider.addresses("api.shared.test") == Some(ips.clone())
    })
    .await;
    assert_eq!(
        provider.addresses("web.shared.test"),
        Some(vec!["198.51.100.7".into()])
    );
    assert_eq!(
        provider.addresses("legacy.shared.test"),
        Some(vec!["198.51.100.8".into()])
    );
    let marks: Vec<(String, String)> = provider
        .records()
        .into_iter()
        .filter(|r| r.record_type == "TXT" && r.dns_name.ends_with("api.shared.test"))
        .map(|r| (r.dns_name, r.targets[0].clone()))
        .collect();
    assert_eq!(marks.len(), 2, "{marks:?}");
    for (name, text) in &marks {
        assert!(["a-api.shared.test", "aaaa-api.shared.test"].contains(&name.as_str()));
        assert!(
            text.starts_with("\"heritage=external-dns,external-dns/owner=")
                && !text.contains("owner=default,")
                && text.ends_with(",external-dns/resource=health-orchestrator/t\""),
            "{text}"
        );
    }
}

/// A server answering `/` with plain JSON is not a provider; a name outside the domain
/// filter fails its tenant with the filter named, and nothing is written for it.
#[actix_rt::test]
async fn a_server_not_speaking_the_protocol_and_a_name_outside_the_filter_are_specific_errors() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    ho_testkit::serve_http(listener, |_req| async {
        hyper::Response::builder()
            .header("content-type", "application/json")
            .body(http_body_util::Full::new(bytes::Bytes::from_static(b"{}")))
            .unwrap()
    });
    let gws = gateways(1);
    let dir = tempfile::tempdir().unwrap();
    let text = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
        .with(&tenant("t", "\"api.shared.test\""))
        .with(&sink_table(&url))
        .render();
    let engine = start_engine(dir.path(), &text).await;
    let error = wait_for_sink_error(&engine, "edns", "the negotiation").await;
    assert!(
        error.contains("answered Content-Type \"application/json\"")
            && error.contains("does not speak version 1 of external-dns's webhook protocol"),
        "{error}"
    );
    drop(engine);

    let provider = ExternalDnsProvider::start(&["shared.test"], 0).await;
    let dir = tempfile::tempdir().unwrap();
    let text = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
        .with(&tenant("t", "\"api.elsewhere.test\""))
        .with(&sink_table(&provider.url))
        .render();
    let engine = start_engine(dir.path(), &text).await;
    let error = wait_for_sink_error(&engine, "edns", "the domain filter").await;
    assert!(
        error.contains("the provider's domain filter (include [\"shared.test\"], exclude [])")
            && error.contains("does not take api.elsewhere.test"),
        "{error}"
    );
    assert!(provider.records().is_empty(), "nothing written");
}

#[actix_rt::test]
async fn reports_round_trip_through_txt_record_sets() {
    let provider = ExternalDnsProvider::start(&["tenant-a.io"], 0).await;
    let config = ExternalDnsWebhookConfig {
        url: provider.url.clone(),
        max_requests_per_second: 50.0,
        max_changes: 500,
        timeout: Duration::from_secs(1),
        txt_wildcard_replacement: None,
    };
    let sink = ExternalDnsWebhookSink::new(&config, "eu-1").unwrap();
    let store = sink.reports().expect("the sink holds reports");
    let name = "eu-1._reports.api.tenant-a.io".to_string();
    let write = |texts: &[&str]| {
        store.write(vec![Rrset::new(
            name.clone(),
            texts.iter().map(|t| t.to_string()).collect(),
        )])
    };
    // Longer than one TXT string: split into 255-byte strings and joined again.
    let long = "x".repeat(600);
    write(&["v1 a", &long]).await.unwrap();
    let read = store
        .read(vec!["._reports.api.tenant-a.io".into()])
        .await
        .unwrap();
    let mut texts = read[0].texts.clone();
    texts.sort();
    assert_eq!((read.len(), &read[0].name), (1, &name));
    assert_eq!(texts, ["v1 a".to_string(), long.clone()]);
    write(&["v1 b"]).await.unwrap();
    let applied = provider.applied.load(Ordering::Relaxed);
    write(&["v1 b"]).await.unwrap();
    assert_eq!(
        provider.applied.load(Ordering::Relaxed),
        applied,
        "unchanged: nothing sent"
    );
    assert_eq!(provider.records().len(), 1);
    store.remove(name).await.unwrap();
    assert!(provider.records().is_empty());
}

/// Thirty tenants losing one shared gateway at once are written in a few rounds (a
/// listing, an adjustment and a change each), not one per tenant.
#[actix_rt::test]
async fn tenants_changing_at_once_share_rounds() {
    let provider = ExternalDnsProvider::start(&["tenant-a.io"], 0).await;
    let load = |c: &AtomicUsize| c.load(Ordering::Relaxed);
    let [lists, changes] = thirty_tenants_lose_a_shared_gateway(
        &sink_table(&provider.url),
        "edns",
        "tenant-a.io",
        "ttl = \"60s\"\n",
        |name| provider.addresses(name),
        || [load(&provider.lists), load(&provider.applied)],
    )
    .await;
    println!("30 tenants changing at once: {lists} listings, {changes} change requests");
    assert!(
        lists <= 5 && changes <= 5,
        "{lists} listings and {changes} change requests for 30 tenants"
    );
}

/// The sink plans failover rounds on its own view of the record sets (no listing per
/// round); a record set someone creates meanwhile at a name the sink then claims is never
/// overwritten: the provider refuses the create, the view is dropped, and the retry's
/// listing shows the name as someone else's, left alone.
#[actix_rt::test]
async fn a_set_created_behind_the_views_back_is_never_overwritten() {
    use ho_engine::snapshot::{PublishedAddress, TenantSnapshot};
    use std::sync::Arc;
    let provider = ExternalDnsProvider::start(&["tenant-a.io"], 0).await;
    let config = ExternalDnsWebhookConfig {
        url: provider.url.clone(),
        max_requests_per_second: 50.0,
        max_changes: 500,
        timeout: Duration::from_secs(1),
        txt_wildcard_replacement: None,
    };
    let sink = ExternalDnsWebhookSink::new(&config, "eu-1").unwrap();
    let snapshot = |tenant: &str, name: &str, seq: u64| {
        let a = "192.0.2.1";
        let mut s = TenantSnapshot::healthy(
            tenant,
            &[name],
            ho_config::RoutingPolicy::All,
            vec![PublishedAddress::of(
                a,
                a.parse().unwrap(),
                1,
                Default::default(),
            )],
        );
        s.seq = seq;
        Arc::new(s)
    };
    sink.apply(snapshot("api", "api.tenant-a.io", 1))
        .await
        .unwrap();
    let lists = provider.lists.load(Ordering::Relaxed);
    sink.apply(snapshot("api", "api.tenant-a.io", 2))
        .await
        .unwrap();
    assert_eq!(
        provider.lists.load(Ordering::Relaxed),
        lists,
        "a new snapshot plans on the view"
    );

    provider.insert("web.tenant-a.io", "A", &["198.51.100.7"]);
    let refused = sink
        .apply(snapshot("web", "web.tenant-a.io", 1))
        .await
        .unwrap_err();
    assert!(
        refused.retriable && refused.message.contains("already exists"),
        "{refused:?}"
    );
    let left = sink
        .apply(snapshot("web", "web.tenant-a.io", 1))
        .await
        .unwrap_err();
    assert!(
        left.message.contains("left alone") && left.message.contains("web.tenant-a.io"),
        "{left:?}"
    );
    assert_eq!(
        provider.addresses("web.tenant-a.io"),
        Some(vec!["198.51.100.7".into()])
    );
    assert!(
        provider
            .records()
            .iter()
            .all(|r| !r.dns_name.ends_with("web.tenant-a.io") || r.record_type == "A"),
        "no mark of ours at the foreign name"
    );
}
