use std::time::{Duration, UNIX_EPOCH};

use super::*;
use crate::clock::Timestamp;

fn ts(ms: u64) -> Timestamp {
    Timestamp(UNIX_EPOCH + Duration::from_millis(ms))
}

fn ip(last: u8) -> IpAddr {
    IpAddr::from([192, 0, 2, last])
}

fn plan(observed: &[&str]) -> TenantPlan {
    TenantPlan {
        tenant: "shop".into(),
        names: vec!["shop.example.com".into()],
        sinks: vec!["zone".into(), "pdns".into()],
        observed: observed.iter().map(|s| (*s).to_owned()).collect(),
        shared: ["pdns".to_owned()].into(),
        vantages: BTreeSet::new(),
        endpoints: vec![endpoint("a", ip(1)), endpoint("b", ip(2))],
    }
}

/// An endpoint judged by one TCP check on port 443.
fn endpoint(name: &str, address: IpAddr) -> EndpointPlan {
    EndpointPlan {
        name: name.into(),
        address,
        checks: [format!("tcp://{address}:443").into()].into(),
        composite: None,
    }
}

/// The endpoint `plan` has at `address` (another tenant's otherwise).
fn endpoint_at(address: IpAddr) -> String {
    let names = [(ip(1), "a"), (ip(2), "b")];
    let name = names.iter().find(|(a, _)| *a == address).map(|(_, n)| *n);
    name.unwrap_or("elsewhere").to_owned()
}

/// The canary saw PowerDNS answer `addresses` for the tenant's name at `at`, asked from
/// `geo` when given.
fn seen(addresses: &[IpAddr], geo: Option<&str>, at: u64) -> Observation {
    Observation {
        sink: "pdns".into(),
        tenant: "shop".into(),
        name: "shop.example.com".into(),
        geo: geo.map(str::to_owned),
        addresses: addresses.into(),
        at,
    }
}

fn publish(seq: u64, addresses: &[IpAddr], at: u64) -> Event {
    decided(seq, addresses, None, at)
}

/// A decision of `addresses`, with what the clusters' vote withdrew for a voting tenant.
fn decided(seq: u64, addresses: &[IpAddr], voted_down: Option<&[IpAddr]>, at: u64) -> Event {
    Event::Publish {
        at: ts(at),
        tenant: "shop".into(),
        seq,
        mode: "healthy",
        addresses: addresses.to_vec(),
        hosts: Vec::new(),
        voted_down: voted_down.map(<[IpAddr]>::to_vec),
    }
}

fn written(sink: &str, seq: u64, at: u64) -> Event {
    Event::SinkWrite {
        at: ts(at),
        sink: sink.into(),
        tenant: "shop".into(),
        seq,
        result: "changed",
        error: None,
    }
}

fn transition(address: IpAddr, to: &'static str, at: u64, since: Option<u64>) -> Event {
    Event::Transition {
        at: ts(at),
        target: format!("tcp://{address}:443"),
        endpoints: vec![endpoint_at(address)],
        address,
        from: if to == "down" { "up" } else { "down" },
        to,
        failing_since: since.map(ts),
        reason: "refused".into(),
    }
}

fn served(changes: &[Change]) -> Vec<(u64, Served, bool)> {
    changes
        .iter()
        .map(|c| (c.at, c.condition.served, c.condition.maintenance))
        .collect()
}

/// Every input of one failover in order: the name answers once a sink wrote, is
/// serving a dead address from the first failed probe that counted (not from the
/// verdict), and answers again when the last sink's write drops the address.
#[test]
fn a_dead_address_counts_from_its_first_failure_until_the_last_sink_drops_it() {
    let mut book = Book::new(Vec::new());
    assert!(book.plan(vec![plan(&[])], 0).is_empty());
    book.event(&publish(1, &[ip(1), ip(2)], 100));
    assert_eq!(
        served(&book.event(&written("zone", 1, 110))),
        [(110, Served::Answered, false)]
    );
    assert!(
        book.event(&written("pdns", 1, 130)).is_empty(),
        "the same set"
    );
    assert_eq!(
        served(&book.event(&transition(ip(1), "down", 5_000, Some(4_000)))),
        [(4_000, Served::DeadAddress, false)]
    );
    book.event(&publish(2, &[ip(2)], 5_010));
    assert!(
        book.event(&written("zone", 2, 5_012)).is_empty(),
        "pdns still serves it"
    );
    assert_eq!(
        served(&book.event(&written("pdns", 2, 5_060))),
        [(5_060, Served::Answered, false)]
    );
    // Another tenant's address is not this name's concern.
    assert!(book
        .event(&transition(ip(9), "down", 6_000, Some(5_900)))
        .is_empty());
    // The address comes back: nothing changes for a name that no longer serves it.
    assert!(book.event(&transition(ip(1), "up", 9_000, None)).is_empty());
}

/// A sink the canary observes is judged by what it answered, not by its write: a back end
/// that took the write and kept answering the dead address stays "dead" until seen.
#[test]
fn an_observed_sink_is_judged_by_its_answers() {
    let mut book = Book::new(Vec::new());
    book.plan(vec![plan(&["pdns"])], 0);
    book.event(&publish(1, &[ip(1), ip(2)], 100));
    book.event(&written("zone", 1, 110));
    book.event(&written("pdns", 1, 120));
    let both = [ip(1), ip(2)];
    assert!(book.observed(&seen(&both, None, 200)).is_empty());
    book.event(&transition(ip(1), "down", 5_000, Some(4_500)));
    book.event(&publish(2, &[ip(2)], 5_010));
    book.event(&written("zone", 2, 5_012));
    assert!(
        book.event(&written("pdns", 2, 5_020)).is_empty(),
        "a write is not an answer"
    );
    assert!(book.observed(&seen(&both, None, 6_000)).is_empty());
    let changes = book.observed(&seen(&[ip(2)], None, 7_000));
    assert_eq!(served(&changes), [(7_000, Served::Answered, false)]);
    let changes = book.observed(&seen(&[], None, 8_000));
    assert_eq!(served(&changes), [(8_000, Served::Unanswered, false)]);
}

/// A `geo` name asked from each location is judged by every answer: one location handed a
/// dead address is the name serving one, one handed nothing is the name unanswered; an
/// answer from a location no longer asked from stops counting.
#[test]
fn a_geo_name_is_judged_by_each_locations_answer() {
    let mut book = Book::new(Vec::new());
    let mut tenant = plan(&["pdns"]);
    tenant.sinks = vec!["pdns".into()];
    tenant.vantages = ["IE".to_owned(), "US".to_owned()].into();
    book.plan(vec![tenant.clone()], 0);
    book.event(&publish(1, &[ip(1), ip(2)], 100));
    book.observed(&seen(&[ip(1)], Some("IE"), 200));
    book.observed(&seen(&[ip(2)], Some("US"), 210));
    book.observed(&seen(&[ip(2)], None, 220));
    book.event(&transition(ip(1), "down", 5_000, Some(4_500)));
    book.event(&publish(2, &[ip(2)], 5_010));
    // The canary's own question and the US client get the live address; the Irish client
    // is still handed the dead one.
    let changes = book.observed(&seen(&[ip(2)], Some("US"), 6_000));
    assert!(changes.is_empty(), "{changes:?}");
    let changes = book.observed(&seen(&[ip(2)], Some("IE"), 7_000));
    assert_eq!(served(&changes), [(7_000, Served::Answered, false)]);
    let changes = book.observed(&seen(&[], Some("IE"), 8_000));
    assert_eq!(served(&changes), [(8_000, Served::Unanswered, false)]);
    tenant.vantages = ["US".to_owned()].into();
    let changes = book.plan(vec![tenant], 9_000);
    assert_eq!(served(&changes), [(9_000, Served::Answered, false)]);
}

/// An operator's hold marks the name's time as maintenance, whatever it serves; released,
/// the name is counted again. A failed write changes nothing.
#[test]
fn held_endpoints_make_maintenance_and_failed_writes_change_nothing() {
    let mut book = Book::new(vec!["b".into()]);
    book.plan(vec![plan(&[])], 0);
    book.event(&publish(1, &[ip(1)], 100));
    let changes = book.event(&written("zone", 1, 110));
    assert_eq!(served(&changes), [(110, Served::Answered, true)]);
    book.event(&written("pdns", 1, 120));
    let failed = Event::SinkWrite {
        at: ts(130),
        sink: "pdns".into(),
        tenant: "shop".into(),
        seq: 1,
        result: "error",
        error: Some("timeout".into()),
    };
    assert!(book.event(&failed).is_empty());
    let released = Event::Held {
        at: ts(500),
        endpoints: Vec::new(),
    };
    assert_eq!(
        served(&book.event(&released)),
        [(500, Served::Answered, false)]
    );
}

/// A name dropped by a reload becomes unknown (no longer recorded); a backdated failure
/// never dates a change before the name's previous one.
#[test]
fn a_removed_name_becomes_unknown_and_history_is_never_reordered() {
    let mut book = Book::new(Vec::new());
    book.plan(vec![plan(&[])], 0);
    book.event(&publish(1, &[ip(1)], 100));
    book.event(&written("zone", 1, 110));
    book.event(&written("pdns", 1, 120));
    let changes = book.event(&transition(ip(1), "down", 200, Some(50)));
    assert_eq!(served(&changes), [(110, Served::DeadAddress, false)]);
    let changes = book.plan(Vec::new(), 300);
    assert_eq!(served(&changes), [(300, Served::Unknown, false)]);
    assert!(book.current().next().is_none());
}

#[test]
fn condition_codes_round_trip() {
    for code in 0..16 {
        let valid = code & 7 <= 4;
        let back = Condition::of_code(code).map(Condition::code);
        assert_eq!(back, valid.then_some(code), "code {code}");
    }
    assert_eq!(Condition::of_code(16), None);
    // The first format's codes: served in two bits, maintenance in the third.
    let v1 = Condition::of_code_v1(6).unwrap();
    assert_eq!((v1.served, v1.maintenance), (Served::DeadAddress, true));
    assert_eq!(Condition::of_code_v1(8), None);
}

/// A replica that stops being the writer no longer knows what the shared back end serves
/// (the new writer writes it): the name is judged by its local output and what the canary
/// sees; written again after it takes the role back, PowerDNS counts once more.
#[test]
fn a_standby_judges_a_shared_back_end_only_by_what_the_canary_sees() {
    let mut book = Book::new(Vec::new());
    book.plan(vec![plan(&[])], 0);
    book.event(&publish(1, &[ip(1), ip(2)], 100));
    book.event(&written("zone", 1, 110));
    book.event(&written("pdns", 1, 120));
    book.event(&transition(ip(1), "down", 5_000, Some(4_000)));
    book.event(&publish(2, &[ip(2)], 5_010));
    book.event(&written("zone", 2, 5_020));
    // Demoted before its PowerDNS write: only the local zone counts, which dropped it.
    assert_eq!(
        served(&book.role(false, 5_030)),
        [(5_030, Served::Answered, false)]
    );
    assert!(book.role(false, 5_040).is_empty(), "no change, no record");
    // Back as the writer: what it last wrote to PowerDNS (the dead address) counts again.
    assert_eq!(
        served(&book.role(true, 9_000)),
        [(9_000, Served::DeadAddress, false)]
    );

    // With the canary on PowerDNS, its answer counts whatever the role.
    let mut book = Book::new(Vec::new());
    book.plan(vec![plan(&["pdns"])], 0);
    book.event(&publish(1, &[ip(1), ip(2)], 100));
    book.event(&written("zone", 1, 110));
    book.observed(&seen(&[ip(1), ip(2)], None, 120));
    assert!(book.role(false, 200).is_empty());
    assert_eq!(
        served(&book.event(&transition(ip(1), "down", 5_000, Some(4_000)))),
        [(4_000, Served::DeadAddress, false)]
    );
}

/// One tenant of the generated script: its name, its checks (endpoint, address, target key)
/// and its only sink, which the canary observes.
struct Scripted {
    tenant: &'static str,
    name: &'static str,
    checks: [(&'static str, IpAddr, String); 2],
}

/// Two tenants on one gateway address, one checked by HTTP and one by TCP (as a web name
/// and a mail name on one host), each with a second gateway of its own, their answers
/// observed by the canary, through seeded sequences of checks failing and recovering,
/// decisions written and seen, and hand edits to an address nobody probes. After every
/// step each name's condition is what the script says, worked out here from the script
/// alone: a name is dead only when one of its own endpoints' checks is down, wrong when it
/// serves an address its tenant's last decision left out.
#[test]
fn each_name_is_judged_by_its_own_checks_and_decision_in_generated_scripts() {
    let shared = IpAddr::from([127, 0, 0, 10]);
    let tenants = [
        Scripted {
            tenant: "web",
            name: "www.example.com",
            checks: [
                ("web-a", shared, format!("http://{shared}:80/healthz")),
                ("web-b", ip(21), format!("http://{}:80/healthz", ip(21))),
            ],
        },
        Scripted {
            tenant: "mail",
            name: "smtp.example.com",
            checks: [
                ("mail-a", shared, format!("tcp://{shared}:25")),
                ("mail-b", ip(31), format!("tcp://{}:25", ip(31))),
            ],
        },
    ];
    let unprobed = IpAddr::from([127, 0, 7, 9]);
    for seed in 1..=200u64 {
        let mut rng = fastrand::Rng::with_seed(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut book = Book::new(Vec::new());
        let plans = tenants.iter().map(|t| TenantPlan {
            tenant: t.tenant.into(),
            names: vec![t.name.into()],
            sinks: vec!["dns".into()],
            observed: ["dns".to_owned()].into(),
            shared: BTreeSet::new(),
            vantages: BTreeSet::new(),
            endpoints: (t.checks.iter())
                .map(|(e, a, key)| EndpointPlan {
                    name: (*e).into(),
                    address: *a,
                    checks: [key.as_str().into()].into(),
                    composite: None,
                })
                .collect(),
        });
        book.plan(plans.collect(), 0);
        // The script's own state: which checks are down, each tenant's decision (none
        // before its first: nothing to call an answer wrong against) and what its name is
        // seen answering.
        let mut down = [[false; 2]; 2];
        let mut decided: [Option<Vec<IpAddr>>; 2] = [None, None];
        let mut seen_now: [Option<Vec<IpAddr>>; 2] = [None, None];
        let mut seq = 0;
        for step in 1..=60u64 {
            let at = step * 1_000;
            let t = rng.u64(..2) as usize;
            let tenant = &tenants[t];
            match rng.u64(..4) {
                0 => {
                    let c = rng.u64(..2) as usize;
                    down[t][c] = !down[t][c];
                    let (endpoint, address, key) = &tenant.checks[c];
                    book.event(&Event::Transition {
                        at: ts(at),
                        target: key.clone(),
                        endpoints: vec![(*endpoint).into()],
                        address: *address,
                        from: if down[t][c] { "up" } else { "down" },
                        to: if down[t][c] { "down" } else { "up" },
                        failing_since: down[t][c].then(|| ts(at - 300)),
                        reason: "scripted".into(),
                    });
                }
                1 | 2 => {
                    let up: Vec<IpAddr> = (0..2)
                        .filter(|&c| !down[t][c])
                        .map(|c| tenant.checks[c].1)
                        .collect();
                    let set = if up.is_empty() {
                        vec![tenant.checks[0].1, tenant.checks[1].1]
                    } else {
                        up
                    };
                    seq += 1;
                    book.event(&Event::Publish {
                        at: ts(at),
                        tenant: tenant.tenant.into(),
                        seq,
                        mode: "healthy",
                        addresses: set.clone(),
                        hosts: Vec::new(),
                        voted_down: None,
                    });
                    book.event(&Event::SinkWrite {
                        at: ts(at + 10),
                        sink: "dns".into(),
                        tenant: tenant.tenant.into(),
                        seq,
                        result: "changed",
                        error: None,
                    });
                    book.observed(&answer(tenant, &set, at + 20));
                    decided[t] = Some(set.clone());
                    seen_now[t] = Some(set);
                }
                _ => {
                    // A hand edit: the decided set with one address swapped for one
                    // nobody probes, or the name emptied.
                    let mut set = decided[t].clone().unwrap_or_default();
                    if rng.u64(..3) == 0 {
                        set.clear()
                    } else if let Some(first) = set.first_mut() {
                        *first = unprobed
                    } else {
                        set.push(unprobed)
                    }
                    book.observed(&answer(tenant, &set, at + 20));
                    seen_now[t] = Some(set);
                }
            }
            for (t, tenant) in tenants.iter().enumerate() {
                let expected = match &seen_now[t] {
                    None => None,
                    Some(s) if s.is_empty() => Some(Served::Unanswered),
                    Some(s) if (0..2).any(|c| down[t][c] && s.contains(&tenant.checks[c].1)) => {
                        Some(Served::DeadAddress)
                    }
                    Some(s)
                        if (decided[t].as_ref())
                            .is_some_and(|d| s.iter().any(|a| !d.contains(a))) =>
                    {
                        Some(Served::WrongAddress)
                    }
                    Some(_) => Some(Served::Answered),
                };
                let got = book
                    .current()
                    .find(|(n, _, _)| *n == tenant.name)
                    .map(|(_, c, _)| c.served);
                assert_eq!(got, expected, "seed {seed}, step {step}, {}: down {down:?}, decided {decided:?}, seen {seen_now:?}", tenant.name);
            }
        }
    }
}

/// The canary saw `tenant`'s name answer `set` at `at`.
fn answer(tenant: &Scripted, set: &[IpAddr], at: u64) -> Observation {
    Observation {
        sink: "dns".into(),
        tenant: tenant.tenant.into(),
        name: tenant.name.into(),
        geo: None,
        addresses: set.into(),
        at,
    }
}

/// An endpoint of two checks of which either may pass (`require = "any"`) is dead only
/// when both fail, from the first failure of the one that failed last.
#[test]
fn an_endpoint_of_several_checks_is_dead_by_its_own_combination() {
    let mut tenant = plan(&[]);
    tenant.sinks = vec!["zone".into()];
    let first = tenant.endpoints[0].checks[0];
    tenant.endpoints[0].checks = [first, "http://192.0.2.1:80/".into()].into();
    tenant.endpoints[0].composite = Some(Box::new(Composite {
        also: vec![7],
        require: ho_config::Require::Any,
        must_pass: false,
    }));
    let mut book = Book::new(Vec::new());
    book.plan(vec![tenant], 0);
    book.event(&publish(1, &[ip(1), ip(2)], 100));
    book.event(&written("zone", 1, 110));
    let check = |key: &str, to: &'static str, at: u64| Event::Transition {
        at: ts(at),
        target: key.into(),
        endpoints: vec!["a".into()],
        address: ip(1),
        from: if to == "down" { "up" } else { "down" },
        to,
        failing_since: (to == "down").then(|| ts(at - 500)),
        reason: "refused".into(),
    };
    assert!(
        book.event(&check("tcp://192.0.2.1:443", "down", 2_000))
            .is_empty(),
        "the other check passes"
    );
    let changes = book.event(&check("http://192.0.2.1:80/", "down", 4_000));
    assert_eq!(served(&changes), [(3_500, Served::DeadAddress, false)]);
    let changes = book.event(&check("tcp://192.0.2.1:443", "up", 6_000));
    assert_eq!(served(&changes), [(6_000, Served::Answered, false)]);
}

/// A voting tenant (`[multi_cluster]`) is judged by the clusters' vote, so every cluster
/// charges the same time: this cluster seeing an address down while the vote keeps it (it
/// is in the minority) charges nothing; once the vote judges it down, the address served
/// is dead from that decision until the served answer drops it.
#[test]
fn a_voting_tenant_is_judged_by_the_vote_not_this_clusters_view() {
    let mut book = Book::new(Vec::new());
    let mut tenant = plan(&[]);
    tenant.sinks = vec!["zone".into()];
    book.plan(vec![tenant], 0);
    assert!(book.event(&voted(1, &[ip(1), ip(2)], &[], 100)).is_empty());
    assert_eq!(
        served(&book.event(&written("zone", 1, 110))),
        [(110, Served::Answered, false)]
    );
    // This cluster sees ip(1) fail; the others do not, and the vote keeps it.
    let changes = book.event(&transition(ip(1), "down", 2_000, Some(1_500)));
    assert!(
        changes.is_empty(),
        "the minority's view is not the name's: {changes:?}"
    );
    assert!(book
        .event(&voted(2, &[ip(1), ip(2)], &[], 2_100))
        .is_empty());
    // The vote withdraws it.
    let changes = book.event(&voted(3, &[ip(2)], &[ip(1)], 5_000));
    assert_eq!(served(&changes), [(5_000, Served::DeadAddress, false)]);
    assert_eq!(
        served(&book.event(&written("zone", 3, 5_050))),
        [(5_050, Served::Answered, false)]
    );
}

fn voted(seq: u64, addresses: &[IpAddr], down: &[IpAddr], at: u64) -> Event {
    decided(seq, addresses, Some(down), at)
}

/// A voting tenant whose answer the canary observes at PowerDNS, answering both.
fn voting_and_observed() -> Book {
    let mut book = Book::new(Vec::new());
    let mut tenant = plan(&["pdns"]);
    tenant.sinks = vec!["pdns".into()];
    book.plan(vec![tenant], 0);
    book.event(&voted(1, &[ip(1), ip(2)], &[], 100));
    assert_eq!(
        served(&book.observed(&seen(&[ip(1), ip(2)], None, 110))),
        [(110, Served::Answered, false)]
    );
    book
}

#[test]
fn another_clusters_write_before_this_clusters_vote_still_charges_the_dead_stretch() {
    let mut book = voting_and_observed();
    // This cluster counts ip(1)'s first failure at 1,000 (down at 1,200); another
    // cluster's vote is quicker and its write drops ip(1) at 1,400; this cluster's vote
    // follows at 1,600.
    assert!(book
        .event(&transition(ip(1), "down", 1_200, Some(1_000)))
        .is_empty());
    assert!(book.observed(&seen(&[ip(2)], None, 1_400)).is_empty());
    let changes = book.event(&voted(2, &[ip(2)], &[ip(1)], 1_600));
    assert_eq!(
        served(&changes),
        [
            (1_000, Served::DeadAddress, false),
            (1_400, Served::Answered, false)
        ],
        "from the first counted failure until the answer dropped it"
    );
}

#[test]
fn a_vote_late_to_return_a_recovered_address_charges_nothing_past_the_recovery() {
    let mut book = voting_and_observed();
    book.event(&transition(ip(1), "down", 1_200, Some(1_000)));
    let changes = book.event(&voted(2, &[ip(2)], &[ip(1)], 1_300));
    assert_eq!(served(&changes), [(1_000, Served::DeadAddress, false)]);
    assert_eq!(
        served(&book.observed(&seen(&[ip(2)], None, 1_400))),
        [(1_400, Served::Answered, false)]
    );
    // It recovers here at 3,000; the others' writes serve it again at 3,100, before this
    // cluster's vote returns it at 3,400: a live address served, neither dead nor a
    // stranger.
    assert!(book.event(&transition(ip(1), "up", 3_000, None)).is_empty());
    assert!(book
        .observed(&seen(&[ip(1), ip(2)], None, 3_100))
        .is_empty());
    assert!(book
        .event(&voted(3, &[ip(1), ip(2)], &[], 3_400))
        .is_empty());
    // Withdrawn again later by a vote this cluster agrees with: dead again.
    book.event(&transition(ip(1), "down", 5_200, Some(5_000)));
    let changes = book.event(&voted(4, &[ip(2)], &[ip(1)], 5_300));
    assert_eq!(served(&changes), [(5_000, Served::DeadAddress, false)]);
}

#[path = "book_races_tests.rs"]
mod races;
