//! [`HealthView`] alone: what an endpoint counts as when its tenant is decided, from
//! verdicts and what operators set.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::carried::Carried;
use super::health::HealthView;
use super::index::TenantIx;
use super::tests::plan;
use super::verdicts::Verdicts;
use super::verdicts_tests::{counted, judge};
use crate::drain::{Forced, OperatorState};
use crate::snapshot::EndpointMeta;

/// The addresses' last octets `view` publishes for the plan's one tenant, and its TTL.
fn decided(view: HealthView<'_>) -> (Vec<u8>, Duration) {
    let meta: Vec<Arc<EndpointMeta>> = view
        .plan
        .endpoints
        .iter()
        .map(|e| Arc::new(EndpointMeta::of(e)))
        .collect();
    let decided = view
        .decide(TenantIx(0), &meta)
        .expect("a decision, not the last set kept");
    let octets = decided
        .addresses
        .iter()
        .map(|a| match a.address {
            std::net::IpAddr::V4(v4) => v4.octets()[3],
            std::net::IpAddr::V6(_) => unreachable!("the plan is IPv4"),
        })
        .collect();
    (octets, decided.ttl)
}

#[test]
fn forced_health_and_drains_count_but_never_empty_a_name() {
    let plan = plan(2, "ttl = \"60s\"\ndegraded_ttl = \"5s\"", "");
    let now = Instant::now();
    let mut verdicts = Verdicts::default();
    verdicts.adopt(&plan, vec![1, 2], now);
    counted(judge(&mut verdicts, 0, Ok(()), now));
    counted(judge(&mut verdicts, 1, Ok(()), now));
    let carried = Carried::default();
    let view = |operator| HealthView {
        plan: &plan,
        verdicts: &verdicts,
        operator,
        carried: &carried,
    };
    let none = OperatorState::default();
    assert_eq!(decided(view(&none)), (vec![1, 2], Duration::from_secs(60)));
    let one_down = OperatorState {
        drained: BTreeSet::new(),
        forced: BTreeMap::from([("e0".to_owned(), Forced::Down)]),
    };
    assert_eq!(
        decided(view(&one_down)),
        (vec![2], Duration::from_secs(5)),
        "forced down counts as down, degraded TTL with it"
    );
    let all_down = OperatorState {
        drained: BTreeSet::new(),
        forced: BTreeMap::from([
            ("e0".to_owned(), Forced::Down),
            ("e1".to_owned(), Forced::Down),
        ]),
    };
    assert_eq!(
        decided(view(&all_down)).0,
        [1, 2],
        "every member forced down: the verdicts decide"
    );
    let all_drained = OperatorState {
        drained: BTreeSet::from(["e0".to_owned(), "e1".to_owned()]),
        forced: BTreeMap::new(),
    };
    assert_eq!(
        decided(view(&all_drained)).0,
        [1, 2],
        "a drain never empties a name"
    );
}
