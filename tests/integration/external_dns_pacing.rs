//! The external-dns webhook sink as a good API citizen, against the protocol's test server
//! (`fakes::external_dns`) logging every request as it arrives: a seeded run of writes never
//! puts more requests in any sliding second than the provider allows; after a 429 or 503
//! naming a time (`Retry-After` in seconds or as a date), no request of any tenant arrives
//! before it; and the provider's regex domain filter decides which names are written, as an
//! oracle built with the generated names says.

use std::sync::Arc;
use std::time::Duration;

use ho_config::RoutingPolicy;
use ho_engine::sink::{Sink, SinkError};
use ho_engine::snapshot::{PublishedAddress, TenantSnapshot};
use ho_sinks::{ExternalDnsWebhookConfig, ExternalDnsWebhookSink};
use tokio::task::JoinSet;

use crate::fakes::external_dns::{Arrival, ExternalDnsProvider, RetryAfter};

const ZONE: &str = "tenant-a.io";

fn sink(provider: &ExternalDnsProvider, rate: f64) -> Arc<ExternalDnsWebhookSink> {
    let config = ExternalDnsWebhookConfig {
        url: provider.url.clone(),
        max_requests_per_second: rate,
        max_changes: 500,
        timeout: Duration::from_secs(5),
        txt_wildcard_replacement: None,
    };
    Arc::new(ExternalDnsWebhookSink::new(&config, "eu-1").unwrap())
}

fn snapshot(tenant: &str, name: &str, addresses: &[String], seq: u64) -> Arc<TenantSnapshot> {
    let published = addresses
        .iter()
        .map(|a| PublishedAddress::of(a, a.parse().unwrap(), 1, Default::default()))
        .collect();
    let mut s = TenantSnapshot::healthy(tenant, &[name], RoutingPolicy::All, published);
    s.seq = seq;
    Arc::new(s)
}

/// Writes `writes` at once (tenants waiting together share the sink's rounds); each
/// tenant's result, in the order given.
async fn apply_all(
    sink: &Arc<ExternalDnsWebhookSink>,
    writes: Vec<Arc<TenantSnapshot>>,
) -> Vec<(String, Result<(), SinkError>)> {
    let mut set = JoinSet::new();
    for (i, s) in writes.into_iter().enumerate() {
        let sink = sink.clone();
        set.spawn(async move { (i, s.tenant.clone(), sink.apply(s).await.map(|_| ())) });
    }
    let mut out = set.join_all().await;
    out.sort_by_key(|(i, _, _)| *i);
    out.into_iter().map(|(_, t, r)| (t, r)).collect()
}

/// The most requests that arrived within one second of each other (the provider's count in
/// its worst sliding second).
fn busiest_second(arrivals: &[Arrival]) -> usize {
    (0..arrivals.len())
        .map(|i| {
            let end = arrivals[i].at;
            arrivals[..=i]
                .iter()
                .filter(|a| end.duration_since(a.at) < Duration::from_secs(1))
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// A provider allowing 6 requests in any one second and the sink configured for 6 a
/// second: a seeded run of writes by 12 tenants, in groups arriving together and apart,
/// some writing a state again (a listing each), leaves every name as last written, and the
/// provider never counts a seventh request in a second nor refuses one.
#[actix_rt::test]
async fn no_sliding_second_holds_more_than_the_allowance() {
    const ALLOWANCE: usize = 6;
    let provider = ExternalDnsProvider::start(&[ZONE], 0).await;
    provider.set_window(ALLOWANCE);
    let sink = sink(&provider, ALLOWANCE as f64);
    let mut rng = fastrand::Rng::with_seed(77);
    let mut seqs = [0u64; 12];
    let mut last: [Option<Vec<String>>; 12] = Default::default();
    for _ in 0..14 {
        let mut tenants: Vec<usize> = (0..12).collect();
        rng.shuffle(&mut tenants);
        let mut group = Vec::new();
        for &t in &tenants[..rng.usize(1..5)] {
            // A write of the same state again now and then: the sink lists afresh for it.
            if last[t].is_none() || rng.u8(..4) > 0 {
                seqs[t] += 1;
                let mut addrs: Vec<String> = (1..=4)
                    .filter(|_| rng.bool())
                    .map(|g| format!("192.0.2.{}", 10 * t + g))
                    .collect();
                if addrs.is_empty() {
                    addrs.push(format!("192.0.2.{}", 10 * t + 1));
                }
                last[t] = Some(addrs);
            }
            let addrs = last[t].clone().unwrap();
            group.push(snapshot(
                &format!("t{t}"),
                &format!("t{t}.{ZONE}"),
                &addrs,
                seqs[t],
            ));
        }
        for (tenant, result) in apply_all(&sink, group).await {
            assert!(result.is_ok(), "{tenant}: {result:?}");
        }
        tokio::time::sleep(Duration::from_millis(rng.u64(0..60))).await;
    }
    for (t, addrs) in last.iter().enumerate() {
        let Some(addrs) = addrs else { continue };
        let mut want = addrs.clone();
        want.sort();
        assert_eq!(provider.addresses(&format!("t{t}.{ZONE}")), Some(want));
    }
    let arrivals = provider.arrivals();
    assert!(
        arrivals.len() > 3 * ALLOWANCE,
        "{} requests",
        arrivals.len()
    );
    assert!(
        arrivals.iter().all(|a| a.status != 429),
        "refused: {arrivals:?}"
    );
    let busiest = busiest_second(&arrivals);
    println!(
        "{} requests, at most {busiest} in any one second (allowance {ALLOWANCE})",
        arrivals.len()
    );
    assert!(busiest <= ALLOWANCE, "{busiest} requests in one second");
}

/// Refusals, 429 and 503, naming their time in seconds or as a (seeded) date: the tenant
/// whose request was refused fails with the wait carried (the engine retries it after
/// that), and the other tenants writing right after wait too: no request arrives before the time
/// named (a date to its whole second, the form's resolution).
#[actix_rt::test]
async fn after_a_refusal_naming_a_time_no_request_arrives_earlier() {
    let provider = ExternalDnsProvider::start(&[ZONE], 0).await;
    let sink = sink(&provider, 50.0);
    let mut rng = fastrand::Rng::with_seed(429);
    let forms = [
        (429, RetryAfter::Seconds(1)),
        (
            503,
            RetryAfter::Date(Duration::from_millis(rng.u64(100..900))),
        ),
        (
            429,
            RetryAfter::Date(Duration::from_millis(rng.u64(100..900))),
        ),
        (503, RetryAfter::Seconds(1)),
    ];
    for (seq, (status, after)) in (1u64..).zip(forms) {
        let write = |t: usize| {
            let a = format!("198.51.100.{seq}");
            snapshot(&format!("t{t}"), &format!("t{t}.{ZONE}"), &[a], seq)
        };
        provider.refuse_next(status, after);
        let e = sink.apply(write(0)).await.expect_err("refused");
        assert!(
            e.retriable && e.retry_after.is_some() && e.throttled == (status == 429),
            "after {status} {after:?}: {e:?}"
        );
        for (tenant, result) in apply_all(&sink, (1..4).map(write).collect()).await {
            assert!(result.is_ok(), "{tenant}: {result:?}");
        }
    }
    let arrivals = provider.arrivals();
    let mut held = 0;
    for (i, refused) in arrivals.iter().enumerate() {
        let Some(named) = refused.named else { continue };
        held += 1;
        let early: Vec<&Arrival> = arrivals[i + 1..]
            .iter()
            .filter(|a| !named.kept_by(a))
            .collect();
        assert!(early.is_empty(), "after {refused:?}, early: {early:?}");
    }
    assert_eq!(held, 4, "{arrivals:?}");
}

/// The provider's filter from the negotiation, generated per seed: names taken by a regex
/// of prefixes and refused by a regex of a last digit. Each generated name is its own
/// tenant; the oracle (the prefix is taken and the number does not end in the digit)
/// says which writes succeed, and only those names reach the provider. A filter with both
/// domain lists and a regex is refused as external-dns refuses it.
#[actix_rt::test]
async fn the_regex_domain_filter_decides_what_is_written() {
    const PREFIXES: [&str; 4] = ["api", "web", "db", "mail"];
    for seed in 0..3u64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let taken: Vec<&str> = PREFIXES.iter().copied().filter(|_| rng.bool()).collect();
        let digit = rng.u8(0..10);
        let provider = ExternalDnsProvider::start(&[ZONE], 0).await;
        provider.set_filter(serde_json::json!({
            "regexInclude": format!("^({})-[0-9]+\\.", taken.join("|")),
            "regexExclude": format!("^[a-z]+-[0-9]*{digit}\\."),
        }));
        let sink = sink(&provider, 100.0);
        let names: Vec<(String, bool)> = (0..24)
            .map(|i| {
                let prefix = PREFIXES[rng.usize(..PREFIXES.len())];
                let number = format!("{i}{}", rng.u16(..1000));
                let oracle = taken.contains(&prefix) && !number.ends_with(&digit.to_string());
                (format!("{prefix}-{number}.{ZONE}"), oracle)
            })
            .collect();
        let writes = names
            .iter()
            .enumerate()
            .map(|(i, (n, _))| snapshot(&format!("n{i}"), n, &["192.0.2.1".into()], 1))
            .collect();
        let results = apply_all(&sink, writes).await;
        for ((name, oracle), (_, result)) in names.iter().zip(&results) {
            match result {
                Ok(()) => assert!(oracle, "seed {seed}: {name} written"),
                Err(e) => assert!(
                    !oracle
                        && e.message.contains("regexInclude")
                        && e.message.contains(&format!("does not take {name}")),
                    "seed {seed}: {name}: {e:?}"
                ),
            }
            assert_eq!(
                provider.addresses(name).is_some(),
                *oracle,
                "seed {seed}: {name}"
            );
        }
    }
    let provider = ExternalDnsProvider::start(&[ZONE], 0).await;
    provider.set_filter(serde_json::json!({ "include": [ZONE], "regexInclude": "^api" }));
    let e = sink(&provider, 100.0)
        .apply(snapshot(
            "t",
            &format!("api.{ZONE}"),
            &["192.0.2.1".into()],
            1,
        ))
        .await
        .unwrap_err();
    assert!(
        !e.retriable && e.message.contains("both domain lists and a regex"),
        "{e:?}"
    );
    assert!(provider.records().is_empty());
}
