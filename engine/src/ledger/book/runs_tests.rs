//! Generated failure and recovery sequences, taken in random batches and one at a time,
//! against a model written from the script: a name serves a dead address while an address
//! its sink last wrote is down, from that failure's first counted probe (or the name's last
//! change, if later) until a recovery or a write drops it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, UNIX_EPOCH};

use super::super::*;
use crate::clock::Timestamp;

fn ts(ms: u64) -> Timestamp {
    Timestamp(UNIX_EPOCH + Duration::from_millis(ms))
}

fn ip(last: u8) -> IpAddr {
    IpAddr::from([192, 0, 2, last])
}

/// Two tenants on addresses 1-6 and 5-8: the two they share are probed by one check each,
/// which judges an endpoint of each tenant.
const TENANTS: [(&str, std::ops::RangeInclusive<u8>); 2] = [("shop", 1..=6), ("blog", 5..=8)];

fn name_of(tenant: &str) -> String {
    format!("{tenant}.example.com")
}

fn target(address: u8) -> String {
    format!("tcp://{}:443", ip(address))
}

fn plans() -> Vec<TenantPlan> {
    (TENANTS.iter())
        .map(|(tenant, addresses)| TenantPlan {
            tenant: (*tenant).into(),
            names: vec![name_of(tenant)],
            sinks: vec!["zone".into()],
            observed: BTreeSet::new(),
            shared: BTreeSet::new(),
            vantages: BTreeSet::new(),
            endpoints: (addresses.clone())
                .map(|a| EndpointPlan {
                    name: format!("{tenant}-{a}"),
                    address: ip(a),
                    checks: [target(a).as_str().into()].into(),
                    composite: None,
                })
                .collect(),
        })
        .collect()
}

fn transition(address: u8, down: bool, at: u64) -> Event {
    Event::Transition {
        at: ts(at),
        target: target(address),
        endpoints: (TENANTS.iter())
            .filter(|(_, addresses)| addresses.contains(&address))
            .map(|(tenant, _)| format!("{tenant}-{address}"))
            .collect(),
        address: ip(address),
        from: if down { "up" } else { "down" },
        to: if down { "down" } else { "up" },
        failing_since: down.then(|| ts(at - FALL_MS)),
        reason: "refused".into(),
    }
}

/// A failure's first counted probe, this long before its verdict.
const FALL_MS: u64 = 500;

fn publish(tenant: &str, seq: u64, addresses: &[IpAddr], at: u64) -> [Event; 2] {
    [
        Event::Publish {
            at: ts(at),
            tenant: tenant.into(),
            seq,
            mode: "healthy",
            addresses: addresses.to_vec(),
            hosts: Vec::new(),
            voted_down: None,
        },
        Event::SinkWrite {
            at: ts(at + 1),
            sink: "zone".into(),
            tenant: tenant.into(),
            seq,
            result: "changed",
            error: None,
        },
    ]
}

/// Each name's changes after the first write: (date, serves a dead address).
type History = BTreeMap<String, Vec<(u64, bool)>>;

/// A generated script and what the model expects of it.
fn script(seed: u64) -> (Vec<Event>, History) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut events = Vec::new();
    let mut seqs: BTreeMap<&str, u64> = BTreeMap::new();
    let mut written: BTreeMap<&str, BTreeSet<u8>> = BTreeMap::new();
    for (tenant, addresses) in &TENANTS {
        let all: Vec<IpAddr> = addresses.clone().map(ip).collect();
        events.extend(publish(tenant, 1, &all, 10));
        seqs.insert(tenant, 1);
        written.insert(tenant, addresses.clone().collect());
    }
    let mut down: BTreeSet<u8> = BTreeSet::new();
    let mut expected = History::new();
    let mut dead: BTreeMap<&str, bool> = TENANTS.iter().map(|(t, _)| (*t, false)).collect();
    let mut t = 1_000;
    for _ in 0..rng.usize(20..200) {
        t += rng.u64(1..2_000);
        let mut date = t;
        if rng.u8(0..8) == 0 {
            // A tenant's healthy set published and written.
            let (tenant, addresses) = &TENANTS[rng.usize(0..TENANTS.len())];
            let healthy: BTreeSet<u8> = addresses.clone().filter(|a| !down.contains(a)).collect();
            if healthy.is_empty() {
                continue;
            }
            let seq = seqs.get_mut(tenant).expect("a tenant");
            *seq += 1;
            let set: Vec<IpAddr> = healthy.iter().copied().map(ip).collect();
            events.extend(publish(tenant, *seq, &set, t));
            written.insert(tenant, healthy);
            date = t + 1;
        } else {
            let address = rng.u8(1..=8);
            let fails = !down.contains(&address);
            if fails {
                down.insert(address);
                date = t - FALL_MS;
            } else {
                down.remove(&address);
            }
            events.push(transition(address, fails, t));
        }
        for (tenant, _) in &TENANTS {
            let now = written[tenant].iter().any(|a| down.contains(a));
            if now != dead[tenant] {
                dead.insert(tenant, now);
                let changes = expected.entry(name_of(tenant)).or_default();
                // A failure's first probe before the name's last change dates it then.
                let date = changes.last().map_or(date, |&(last, _)| date.max(last));
                changes.push((date, now));
            }
        }
    }
    (events, expected)
}

fn changes_by_name(changes: &[Change]) -> History {
    let mut by_name = History::new();
    for c in changes {
        if c.condition.served == Served::Unknown {
            continue;
        }
        let entry = by_name.entry(c.name.clone()).or_default();
        // The first write makes a name answer: the model starts from there.
        if c.condition.served == Served::Answered && entry.is_empty() && c.at <= 11 {
            continue;
        }
        assert!(
            matches!(c.condition.served, Served::Answered | Served::DeadAddress),
            "{c:?}"
        );
        entry.push((c.at, c.condition.served == Served::DeadAddress));
    }
    by_name.retain(|_, v| !v.is_empty());
    by_name
}

#[test]
fn runs_taken_together_date_each_name_as_one_at_a_time_does() {
    for seed in 0..300 {
        let (events, expected) = script(seed);
        let events: Vec<Arc<Event>> = events.into_iter().map(Arc::new).collect();

        let mut one = Book::new(Vec::new());
        one.plan(plans(), 0);
        let singly: Vec<Change> = events.iter().flat_map(|e| one.event(e)).collect();
        assert_eq!(
            changes_by_name(&singly),
            expected,
            "seed {seed}, one at a time"
        );

        let mut rng = fastrand::Rng::with_seed(seed ^ 0x5eed);
        let mut book = Book::new(Vec::new());
        book.plan(plans(), 0);
        let mut batched = Vec::new();
        let mut rest = &events[..];
        while !rest.is_empty() {
            let (batch, after) = rest.split_at(rng.usize(1..=rest.len().min(40)));
            batched.extend(book.events(batch));
            rest = after;
        }
        assert_eq!(
            changes_by_name(&batched),
            expected,
            "seed {seed}, in batches"
        );
    }
}

/// A mass failure and recovery of one tenant taken as one batch each: the name changes
/// once each way, at the first failure's first counted probe and at the last recovery.
#[test]
fn a_mass_failure_in_one_batch_changes_its_name_once_each_way() {
    let mut book = Book::new(Vec::new());
    book.plan(plans(), 0);
    let all: Vec<IpAddr> = (1..=6).map(ip).collect();
    let setup: Vec<Arc<Event>> = publish("shop", 1, &all, 10)
        .into_iter()
        .map(Arc::new)
        .collect();
    book.events(&setup);
    let failing: Vec<Arc<Event>> = (1..=4)
        .map(|a| Arc::new(transition(a, true, 5_000 + 100 * u64::from(a))))
        .collect();
    let changes = book.events(&failing);
    let shop: Vec<_> = changes.iter().filter(|c| c.tenant == "shop").collect();
    assert_eq!(shop.len(), 1, "{changes:?}");
    assert_eq!(shop[0].at, 5_100 - FALL_MS);
    assert_eq!(shop[0].condition.served, Served::DeadAddress);
    let recovering: Vec<Arc<Event>> = (1..=4)
        .map(|a| Arc::new(transition(a, false, 9_000 + 100 * u64::from(a))))
        .collect();
    let changes = book.events(&recovering);
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(
        (changes[0].at, changes[0].condition.served),
        (9_400, Served::Answered)
    );
}
