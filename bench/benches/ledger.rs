//! The availability ledger at its stated load: 10,000 names, 400 days of history, one
//! transition per name per hour (30 s of a dead address, then answered again). Prints what
//! that history costs on disk and how long reading it all back at a start takes, then
//! times the 90-day question `/v1/availability` answers for one name. `LEDGER_NAMES`
//! and `LEDGER_DAYS` scale it down for a quick look.

use std::time::{Duration, Instant};

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use ho_engine::ledger::book::{Change, Condition, Served};
use ho_engine::ledger::store::Store;
use ho_engine::ledger::tally::{spans, Tally};

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

// criterion_group! generates an undocumented public function.
#[allow(missing_docs)]
mod group {
    use super::*;
    criterion_group! {
        name = benches;
        config = Criterion::default().measurement_time(Duration::from_secs(5));
        targets = ledger
    }
}
criterion_main!(group::benches);
