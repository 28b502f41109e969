//! The availability ledger at its stated load: 10,000 names, 400 days of history, one
//! transition per name per hour (30 s of a dead address, then answered again). Prints what
//! that history costs on disk and how long reading it all back at a start takes, then
//! times the 90-day question `/v1/availability` answers for one name. `LEDGER_NAMES`
//! and `LEDGER_DAYS` scale it down for a quick look. Then the book's work at a sink's
//! reported write, for one tenant of 1,000, 10,000 and 100,000 endpoints (the book judges
//! the tenant's whole served set against the decisions in force at every write), and at a
//! mass failure and recovery of every endpoint of such a tenant: the transitions in the
//! batches the ledger takes them in, and one at a time.

use std::time::{Duration, Instant, SystemTime};

use std::net::{IpAddr, Ipv4Addr};

use std::sync::Arc;

use criterion::{black_box, criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use ho_engine::clock::Timestamp;
use ho_engine::ledger::book::{
    Book, Change, CheckKey, Condition, EndpointPlan, Served, TenantPlan,
};
use ho_engine::ledger::store::Store;
use ho_engine::ledger::tally::{spans, Tally};
use ho_engine::Event;

const HOUR: u64 = 3_600_000;

fn env(key: &str, default: u64) -> u64 {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn condition(served: Served) -> Condition {
    Condition {
        served,
        maintenance: false,
    }
}

fn ledger(c: &mut Criterion) {
    let names = env("LEDGER_NAMES", 10_000);
    let days = env("LEDGER_DAYS", 400);
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let end = 1_790_000_000_000u64;
    let start = end - days * 24 * HOUR;
    let wrote = Instant::now();
    for n in 0..names {
        let name = format!("name-{n}.example.com");
        // Each name's hourly fault at its own minute, lasting 25-35 s.
        let offset = (n * 7_919) % HOUR;
        let mut changes = vec![Change {
            name: name.clone(),
            tenant: "t".into(),
            at: start,
            condition: condition(Served::Answered),
        }];
        let mut hour = start;
        while hour + HOUR <= end {
            let down = hour + offset;
            let up = down + 25_000 + (down % 10_000);
            for (at, served) in [(down, Served::DeadAddress), (up, Served::Answered)] {
                changes.push(Change {
                    name: name.clone(),
                    tenant: "t".into(),
                    at,
                    condition: condition(served),
                });
            }
            hour += HOUR;
        }
        store.append(&changes).unwrap();
    }
    let wrote = wrote.elapsed();
    let size = store.size();
    let read = Instant::now();
    let mut records = 0;
    for name in store.names().unwrap() {
        records += store.read(&name).unwrap().len();
    }
    println!(
        "ledger: {names} names x {days} days, {records} changes: {:.1} MiB on disk ({:.2} bytes a change), written in {:.1} s, every file read back in {:.2} s",
        size as f64 / 1_048_576.0,
        size as f64 / records as f64,
        wrote.as_secs_f64(),
        read.elapsed().as_secs_f64(),
    );
    let from = end - 90 * 24 * HOUR;
    c.bench_function("ledger_90_day_availability_of_one_name", |b| {
        let mut n = 0;
        b.iter(|| {
            n = (n + 1) % names;
            let changes = store.read(&format!("name-{n}.example.com")).unwrap();
            black_box(Tally::of(&spans(&changes, from, end)).figures())
        })
    });
}

/// A book with one tenant of `n` endpoints whose every address was published (twice, so
/// the write below reports a set the book keeps beside a newer one).
fn book_of_one_tenant(n: u32) -> Book {
    let address = |i: u32| IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i));
    let endpoints = (0..n)
        .map(|i| EndpointPlan {
            name: format!("ep-{i}"),
            address: address(i),
            checks: vec![CheckKey::of(&format!("tcp://{}:443", address(i)))].into(),
            composite: None,
        })
        .collect();
    let mut book = Book::new(Vec::new());
    book.plan(
        vec![TenantPlan {
            tenant: "t".into(),
            names: vec!["t.example".into()],
            sinks: vec!["hook".into()],
            observed: Default::default(),
            shared: Default::default(),
            vantages: Default::default(),
            endpoints,
        }],
        0,
    );
    for seq in [1, 2] {
        book.event(&Event::Publish {
            at: Timestamp(SystemTime::now()),
            tenant: "t".into(),
            seq,
            mode: "healthy",
            addresses: (0..n - seq as u32 + 1).map(address).collect(),
            hosts: Vec::new(),
            voted_down: None,
        });
    }
    book
}

fn sink_write(c: &mut Criterion) {
    let mut group = c.benchmark_group("ledger_sink_write_of_one_tenant");
    group.sample_size(10);
    for n in [1_000, 10_000, 100_000] {
        let mut book = book_of_one_tenant(n);
        let mut seq = 0;
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                // The two kept sets in turn: each write changes what the sink serves.
                seq = seq % 2 + 1;
                black_box(book.event(&Event::SinkWrite {
                    at: Timestamp(SystemTime::now()),
                    sink: "hook".into(),
                    tenant: "t".into(),
                    seq,
                    result: "changed",
                    error: None,
                }))
            })
        });
    }
    group.finish();
}

/// Every endpoint of one tenant of `n` down, then up again (their first counted failure a
/// second before each verdict), as the ledger's queue hands them over.
fn transitions(n: u32) -> Vec<Arc<Event>> {
    let address = |i: u32| IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i));
    let start = SystemTime::now();
    let at = |ms: u64| Timestamp(start + Duration::from_millis(ms));
    [("up", "down"), ("down", "up")]
        .into_iter()
        .enumerate()
        .flat_map(|(phase, (from, to))| {
            (0..n).map(move |i| {
                let ms = 10_000 * phase as u64 + 1_000 + u64::from(i) / 10;
                Arc::new(Event::Transition {
                    at: at(ms),
                    target: format!("tcp://{}:443", address(i)),
                    endpoints: vec![format!("ep-{i}")],
                    address: address(i),
                    from,
                    to,
                    failing_since: (to == "down").then(|| at(ms - 1_000)),
                    reason: "refused".into(),
                })
            })
        })
        .collect()
}

fn mass_failure(c: &mut Criterion) {
    let mut group = c.benchmark_group("ledger_mass_failure_of_one_tenant");
    group.sample_size(10);
    // The ledger's batch (`ledger::BATCH`), and one at a time as before it took batches.
    for (batch, sizes) in [(4096, &[1_000, 10_000, 100_000][..]), (1, &[1_000, 4_000])] {
        for &n in sizes {
            let events = transitions(n);
            let id = BenchmarkId::new(format!("batches_of_{batch}"), n);
            group.bench_with_input(id, &n, |b, &n| {
                b.iter_batched(
                    || {
                        let mut book = book_of_one_tenant(n);
                        book.event(&Event::SinkWrite {
                            at: Timestamp(SystemTime::now()),
                            sink: "hook".into(),
                            tenant: "t".into(),
                            seq: 1,
                            result: "changed",
                            error: None,
                        });
                        book
                    },
                    |mut book| {
                        for chunk in events.chunks(batch) {
                            black_box(book.events(chunk));
                        }
                        book
                    },
                    BatchSize::PerIteration,
                )
            });
        }
    }
    group.finish();
}

// criterion_group! generates an undocumented public function.
#[allow(missing_docs)]
mod group {
    use super::*;
    criterion_group! {
        name = benches;
        config = Criterion::default().measurement_time(Duration::from_secs(5));
        targets = ledger, sink_write, mass_failure
    }
}
criterion_main!(group::benches);
