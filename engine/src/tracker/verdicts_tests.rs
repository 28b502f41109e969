//! [`Verdicts`] alone, without the tenants' side: what a result does to its target, and what
//! a new plan keeps.

use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::index::TargetIx;
use super::tests::plan;
use super::verdicts::{Judged, Verdicts};
use crate::hysteresis::Health;
use crate::probe::{Failure, ProbeResult};

fn result(outcome: Result<(), Failure>) -> ProbeResult {
    ProbeResult {
        outcome,
        latency: Duration::from_millis(1),
        reused: false,
        cert_not_after: None,
        weight: None,
    }
}

/// Judges `outcome` of target `t`, with the check's timing of the plan (rise 1, fall 2).
pub(super) fn judge(
    v: &mut Verdicts,
    t: usize,
    outcome: Result<(), Failure>,
    at: Instant,
) -> Judged {
    let timing = plan(2, "", "").targets[t].check.timing;
    v.judge(
        TargetIx(t),
        result(outcome),
        &timing,
        (at, SystemTime::now()),
    )
}

pub(super) fn counted(judged: Judged) -> super::verdicts::Counted {
    match judged {
        Judged::Counted(c) => c,
        Judged::NotJudged => panic!("not judged"),
    }
}

#[test]
fn a_verdict_changes_by_the_hysteresis_and_an_up_targets_first_failure_is_told() {
    let now = Instant::now();
    let mut v = Verdicts::default();
    v.adopt(&plan(2, "", ""), vec![1, 2], now);
    let up = counted(judge(&mut v, 0, Ok(()), now));
    assert_eq!(up.before, Health::Unknown);
    assert_eq!(up.transition.map(|t| t.to), Some(Health::Up), "rise 1");
    let first = counted(judge(&mut v, 0, Err(Failure::Refused), now));
    assert!(first.starts_failing, "an up target's first failure");
    assert_eq!(first.transition, None, "fall 2: not down yet");
    let second = counted(judge(&mut v, 0, Err(Failure::Refused), now));
    assert!(
        !second.starts_failing,
        "only the first failure starts a wave"
    );
    assert_eq!(second.transition.map(|t| t.to), Some(Health::Down));
    assert_eq!(v.effective(TargetIx(0)), Health::Down);
    assert_eq!(v.failing(), 1);
    assert_eq!(v.unknown(), 1, "the other target has no verdict yet");
    assert_eq!(v.latest_reason(TargetIx(0)), Failure::Refused.to_string());
}

#[test]
fn a_result_this_machine_caused_is_kept_as_the_latest_but_counts_for_nothing() {
    let now = Instant::now();
    let mut v = Verdicts::default();
    v.adopt(&plan(1, "", ""), vec![1], now);
    counted(judge(&mut v, 0, Ok(()), now));
    let local = judge(&mut v, 0, Err(Failure::Local("no descriptors".into())), now);
    assert!(matches!(local, Judged::NotJudged));
    assert_eq!(v.get(TargetIx(0)).probes, 1);
    assert_eq!(v.effective(TargetIx(0)), Health::Up);
    assert!(v.latest_reason(TargetIx(0)).contains("no descriptors"));
}

#[test]
fn a_new_plan_keeps_the_verdicts_of_the_ids_it_keeps() {
    let now = Instant::now();
    let mut v = Verdicts::default();
    v.adopt(&plan(2, "", ""), vec![1, 2], now);
    counted(judge(&mut v, 0, Ok(()), now));
    counted(judge(&mut v, 1, Ok(()), now));
    // Target 2 stays (now first), target 1 goes, target 3 is new.
    v.adopt(&plan(2, "", ""), vec![2, 3], now);
    assert_eq!(v.index(2), Some(TargetIx(0)));
    assert_eq!(
        v.index(1),
        None,
        "a removed target's late result finds nothing"
    );
    assert_eq!(v.effective(TargetIx(0)), Health::Up, "kept its verdict");
    assert_eq!(v.effective(TargetIx(1)), Health::Unknown, "new");
    assert!(!v.all_known());
}
