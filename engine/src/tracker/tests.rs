//! The tracker core under a fake clock: no actix, no sockets. Plans come from TOML through
//! the real config loader; observations are made by hand; time moves only when a test says.

use std::sync::Arc;
use std::time::Duration;

use figment::providers::{Format, Toml};
use figment::Figment;
use ho_config::Plan;
use tokio::time::Instant;

use super::core::{Clock, Effect, TrackerCore, Wake};
use super::pacing::MIN_PUBLISH_GAP;
use crate::hysteresis::Health;
use crate::metrics::Metrics;
use crate::multi_cluster::report::{Owned, Report};
use crate::multi_cluster::vote::Tally;
use crate::multi_cluster::LocalView;
use crate::observation::{Observation, TargetId};
use crate::probe::{Failure, ProbeResult};
use crate::snapshot::{PublishMode, TenantSnapshot};

/// A plan of `n` endpoints (`e0`.., 10.0.0.1..) in one tenant `t` with a hosts-file sink,
/// checks with rise 1 / fall 2 and a 5 s start-up grace; `extra` adds or overrides keys
/// of the tenant table and `check` of the default check.
pub(crate) fn plan(n: usize, tenant: &str, check: &str) -> Arc<Plan> {
    let mut text = format!(
        "[defaults]\nstartup_grace = \"5s\"\n[defaults.check]\ninterval = \"1s\"\ntimeout = \"500ms\"\nrise = 1\nfall = 2\n{check}\n"
    );
    for i in 0..n {
        text.push_str(&format!(
            "[[endpoints]]\nname = \"e{i}\"\naddress = \"10.0.0.{}\"\npriority = {}\n",
            i + 1,
            i / 2
        ));
    }
    text.push_str(&format!(
        "[[tenants]]\nname = \"t\"\ndomains = [\"t.example\"]\nsinks = [\"s\"]\n{tenant}\n[sinks.s]\nkind = \"test\"\n"
    ));
    let config = Figment::from(figment::providers::Serialized::defaults(
        ho_config::load::builtin(),
    ))
    .merge(Toml::string(&text))
    .extract()
    .unwrap();
    let kinds = ho_config::Kinds {
        sinks: &TestSinks,
        checks: &crate::probe::BUILT_IN,
    };
    Arc::new(ho_config::validate(&config, &kinds).unwrap_or_else(|e| panic!("{e}\n{text}")))
}

/// The engine knows no concrete sink: its tests use a kind `test` with no settings that
/// expresses every policy.
struct TestSinks;

#[derive(Debug)]
struct TestSpec;

impl ho_config::SinkCatalog for TestSinks {
    fn kinds(&self) -> Vec<&'static str> {
        vec!["test"]
    }

    fn parse(&self, _: &str, _: &ho_config::SinkTable) -> ho_config::Parsed {
        ho_config::Parsed {
            spec: Some(Arc::new(TestSpec)),
            errors: Vec::new(),
        }
    }
}

impl ho_config::SinkSpec for TestSpec {
    fn kind(&self) -> &'static str {
        "test"
    }

    fn supports(&self, _: ho_config::RoutingPolicy) -> Result<(), &'static str> {
        Ok(())
    }

    fn check_tenant(
        &self,
        _: &str,
        _: &ho_config::TenantUse<'_>,
        _: &mut Vec<ho_config::FieldError>,
    ) {
    }

    fn holds_reports(&self) -> bool {
        true
    }
}

/// A core over `plan` (target ids 0..) at a fixed start.
pub(super) struct Harness {
    pub(super) core: TrackerCore,
    pub(super) now: Clock,
    /// Timers the core asked for and that have not fired yet.
    timers: Vec<(Instant, Wake)>,
    /// Snapshots published, in order.
    published: Vec<Arc<TenantSnapshot>>,
    forgotten: Vec<String>,
    /// Views of voting tenants handed to the coordinator, in order.
    views: Vec<LocalView>,
    /// Operator state the core asked to save, in order.
    remembered: Vec<crate::drain::OperatorState>,
    /// `[ring]`: own verdict changes the core shared, in order.
    pub(super) shared: Vec<(String, crate::hysteresis::Health)>,
}

impl Harness {
    pub(super) fn new(plan: Arc<Plan>) -> Harness {
        let now = Clock {
            mono: Instant::now(),
            wall: crate::clock::after_epoch(Duration::from_secs(1_700_000_000)),
        };
        let ids = (0..plan.targets.len() as TargetId).collect();
        let mut h = Harness {
            core: TrackerCore::new(
                plan,
                ids,
                Arc::new(Metrics::new()),
                crate::events::Events::default(),
                now,
            ),
            now,
            timers: Vec::new(),
            published: Vec::new(),
            forgotten: Vec::new(),
            views: Vec::new(),
            remembered: Vec::new(),
            shared: Vec::new(),
        };
        let mut fx = Vec::new();
        h.core.start(now, &mut fx);
        h.take(fx);
        h
    }

    pub(super) fn take(&mut self, fx: Vec<Effect>) {
        for e in fx {
            match e {
                Effect::Publish { snapshot, .. } => self.published.push(snapshot),
                Effect::Forget { tenant, .. } => self.forgotten.push(tenant),
                Effect::WakeAt { at, wake } => self.timers.push((at, wake)),
                Effect::Vote(view) => self.views.push(view),
                Effect::Remember(state) => self.remembered.push(state),
                Effect::Share { key, health } => self.shared.push((key, health)),
            }
        }
    }

    /// Moves the clock by `d`, firing due timers in time order.
    pub(super) fn advance(&mut self, d: Duration) {
        let until = self.now.mono + d;
        loop {
            self.timers.sort_by_key(|(at, _)| *at);
            match self.timers.first() {
                Some((at, _)) if *at <= until => {
                    let (at, wake) = self.timers.remove(0);
                    let now = self.now.after(at.saturating_duration_since(self.now.mono));
                    self.now = now;
                    let mut fx = Vec::new();
                    self.core.wake(wake, now, &mut fx);
                    self.take(fx);
                }
                _ => break,
            }
        }
        self.now = self
            .now
            .after(until.saturating_duration_since(self.now.mono));
    }

    /// One probe result per (target, ok) pair, in one batch at the current time.
    pub(super) fn observe(&mut self, results: &[(TargetId, bool)]) {
        let batch = results
            .iter()
            .map(|&(target, ok)| Observation {
                target,
                result: ProbeResult {
                    outcome: if ok { Ok(()) } else { Err(Failure::Refused) },
                    latency: Duration::from_millis(1),
                    reused: false,
                    cert_not_after: None,
                    weight: None,
                },
                start_delay: Duration::ZERO,
            })
            .collect();
        let mut fx = Vec::new();
        self.core.observe(batch, self.now, &mut fx);
        self.take(fx);
    }

    fn last(&self) -> &TenantSnapshot {
        self.published.last().expect("something was published")
    }

    /// The last snapshot's addresses' last octets.
    pub(super) fn hosts(&self) -> Vec<u8> {
        self.last()
            .addresses
            .iter()
            .map(|a| match a.address {
                std::net::IpAddr::V4(v4) => v4.octets()[3],
                std::net::IpAddr::V6(_) => unreachable!(),
            })
            .collect()
    }
}

#[test]
fn waits_for_verdicts_until_the_grace_ends() {
    let mut h = Harness::new(plan(3, "", ""));
    h.observe(&[(0, true), (1, true)]);
    assert!(h.published.is_empty(), "e2 has no verdict yet: wait");
    assert!(!h.core.ready());
    h.advance(Duration::from_millis(4999));
    assert!(h.published.is_empty());
    h.advance(Duration::from_millis(1));
    assert!(h.core.ready(), "grace over");
    assert_eq!(
        h.hosts(),
        [1, 2],
        "unknown counts as unhealthy after the grace"
    );
    assert_eq!(h.last().mode, PublishMode::Healthy);
}

#[test]
fn publishes_at_once_when_every_endpoint_has_a_verdict() {
    let mut h = Harness::new(plan(2, "", ""));
    h.observe(&[(0, true), (1, true)]);
    assert_eq!(h.published.len(), 1);
    assert_eq!(h.hosts(), [1, 2]);
    assert!(h.core.ready());
}

#[test]
fn pacing_folds_a_burst_into_one_decision_per_gap() {
    let mut h = Harness::new(plan(4, "", ""));
    h.observe(&[(0, true), (1, true), (2, true), (3, true)]);
    assert_eq!(h.published.len(), 1);
    // e0 falls (fall = 2) just after the first decision: paced, not published yet.
    h.advance(Duration::from_millis(1));
    h.observe(&[(0, false), (0, false)]);
    assert_eq!(
        h.published.len(),
        1,
        "inside the gap: scheduled, not decided"
    );
    // e1 falls too inside the same gap: carried by the same scheduled decision.
    h.advance(Duration::from_millis(5));
    h.observe(&[(1, false), (1, false)]);
    assert_eq!(h.published.len(), 1);
    h.advance(MIN_PUBLISH_GAP);
    assert_eq!(h.published.len(), 2, "one decision for both changes");
    assert_eq!(h.hosts(), [3, 4]);
    assert_eq!(
        h.last().changes.len(),
        2,
        "both verdict changes are carried"
    );
    // After a quiet gap, the next change is decided at once.
    h.advance(Duration::from_secs(1));
    h.observe(&[(0, true)]);
    assert_eq!(h.published.len(), 3);
    assert_eq!(h.hosts(), [1, 3, 4]);
}

#[test]
fn a_decision_that_changes_nothing_publishes_nothing() {
    let mut h = Harness::new(plan(2, "", ""));
    h.observe(&[(0, true), (1, true)]);
    h.advance(Duration::from_secs(1));
    h.observe(&[(0, false)]);
    h.advance(Duration::from_secs(1));
    h.observe(&[(0, true), (1, true)]);
    assert_eq!(
        h.published.len(),
        1,
        "one failure below fall changes no verdict"
    );
}

#[test]
fn fail_open_modes() {
    let all_down = |on_all: &str| {
        let mut h = Harness::new(plan(2, &format!("on_all_unhealthy = \"{on_all}\""), ""));
        h.observe(&[(0, true), (1, true)]);
        h.advance(Duration::from_secs(1));
        h.observe(&[(0, false), (0, false), (1, false), (1, false)]);
        h.advance(Duration::from_secs(1));
        h
    };
    let h = all_down("publish_all");
    assert_eq!(h.last().mode, PublishMode::FailOpenAllUnhealthy);
    assert_eq!(h.hosts(), [1, 2], "never empty: every address");

    let h = all_down("keep_last");
    assert_eq!(
        h.last().mode,
        PublishMode::Healthy,
        "the last healthy set stays"
    );
    assert_eq!(
        h.hosts(),
        [2],
        "e0 fell first and was withdrawn; e1's fall keeps that set"
    );
    assert_eq!(
        h.published.len(),
        2,
        "nothing was sent when the last one fell"
    );

    let h = all_down("publish_none");
    assert_eq!(h.last().mode, PublishMode::NoneHealthy);
    assert!(h.hosts().is_empty());
}

/// `hold_failback`: an endpoint that fails while up is held forced down (and the core asks
/// for that to be saved); healthy again, it stays out until released. One that was down
/// from its first verdict never served and is not held.
#[test]
fn a_held_endpoint_stays_out_after_it_recovers_until_released() {
    let mut p = (*plan(3, "", "")).clone();
    p.endpoints[0].hold_failback = true;
    p.endpoints[1].hold_failback = true;
    let mut h = Harness::new(Arc::new(p));
    h.observe(&[(0, true), (1, false), (1, false), (2, true)]);
    h.advance(Duration::from_secs(1));
    assert_eq!(h.hosts(), [1, 3]);
    h.observe(&[(0, false), (0, false)]);
    h.advance(Duration::from_secs(1));
    assert_eq!(h.hosts(), [3]);
    let held = h.remembered.last().expect("the hold is saved").clone();
    assert_eq!(held.forced.get("e0"), Some(&crate::drain::Forced::Down));
    assert_eq!(held.forced.len(), 1, "e1 never served: not held");
    h.observe(&[(0, true), (1, true)]);
    h.advance(Duration::from_secs(1));
    assert_eq!(
        h.hosts(),
        [2, 3],
        "e0 healthy again and still held; e1 joins"
    );
    let (now, mut fx) = (h.now, Vec::new());
    h.core.set_forced(Default::default(), now, &mut fx);
    h.take(fx);
    h.advance(Duration::from_secs(1));
    assert_eq!(h.hosts(), [1, 2, 3], "released");
    assert_eq!(h.remembered.len(), 1);
}

/// A reload recounts a tenant's endpoints from their verdicts, as transitions keep the
/// counts: an endpoint forced up before its first verdict is still waited for, and its
/// verdict arriving after the reload leaves the counts whole (they once went below zero).
#[test]
fn a_reload_counts_verdicts_not_forced_health() {
    let mut h = Harness::new(plan(2, "", ""));
    let (now, mut fx) = (h.now, Vec::new());
    let forced = [("e0".to_string(), crate::drain::Forced::Up)].into();
    h.core.set_forced(forced, now, &mut fx);
    let plan_again = Arc::new((*h.core.plan).clone());
    h.core.reload(plan_again, vec![0, 1], now, &mut fx);
    h.take(fx);
    h.observe(&[(0, false), (0, false), (1, true)]);
    h.advance(Duration::from_secs(1));
    assert_eq!(h.hosts(), [1, 2], "e0 forced up, e1 up");
    let summary = &h.core.summaries()[0];
    assert_eq!((summary.healthy, summary.unknown), (2, 0));
    assert_eq!(h.core.tenants[0].healthy, 1, "e0's verdict is down");
    assert_eq!(h.core.tenants[0].unknown, 0);
}

#[test]
fn below_min_healthy_publishes_every_endpoint() {
    let mut h = Harness::new(plan(4, "min_healthy = 0.5", ""));
    h.observe(&[(0, true), (1, true), (2, true), (3, true)]);
    h.advance(Duration::from_secs(1));
    h.observe(&[(0, false), (0, false), (1, false), (1, false)]);
    h.advance(Duration::from_secs(1));
    assert_eq!(
        h.last().mode,
        PublishMode::Healthy,
        "2 of 4 is not below 0.5"
    );
    assert_eq!(h.hosts(), [3, 4]);
    h.observe(&[(2, false), (2, false)]);
    h.advance(Duration::from_secs(1));
    assert_eq!(h.last().mode, PublishMode::FailOpenBelowMinHealthy);
    assert_eq!(h.hosts(), [1, 2, 3, 4]);
}

#[test]
fn damping_holds_a_flapping_endpoint_out_until_its_penalty_decays() {
    let damping = "damping = { half_life = \"10s\", penalty = 1000, suppress = 1500, reuse = 750, max_suppress = \"60s\" }";
    let mut h = Harness::new(plan(2, "", damping));
    h.observe(&[(0, true), (1, true)]);
    for _ in 0..2 {
        h.advance(Duration::from_secs(1));
        h.observe(&[(0, false), (0, false)]);
        h.advance(Duration::from_secs(1));
        h.observe(&[(0, true)]);
    }
    assert_eq!(
        h.hosts(),
        [2],
        "the second flap crossed suppress: held out though up"
    );
    let held_at = h.now.mono;
    h.advance(Duration::from_secs(60));
    assert_eq!(
        h.hosts(),
        [1, 2],
        "released once the penalty fell below reuse"
    );
    let status = h.core.status(h.now);
    assert!(!status.endpoints[0].damping.as_ref().unwrap().held);
    assert!(h.now.mono > held_at);
}

#[test]
fn reload_keeps_verdicts_by_stable_id_and_resends_the_unchanged_snapshot() {
    let mut h = Harness::new(plan(3, "", ""));
    h.observe(&[(0, true), (1, true), (2, false), (2, false)]);
    assert_eq!(h.hosts(), [1, 2]);
    let seq = h.last().seq;
    // The new plan drops e0: targets 1 and 2 keep ids 1 and 2 at new indices 0 and 1.
    let mut next = (*plan(3, "", "")).clone();
    next.endpoints.remove(0);
    next.targets.remove(0);
    for e in &mut next.endpoints {
        e.set_target(e.target() - 1);
    }
    next.tenants[0].endpoints = vec![0, 1];
    let mut fx = Vec::new();
    h.core.reload(Arc::new(next), vec![1, 2], h.now, &mut fx);
    h.take(fx);
    assert_eq!(
        h.hosts(),
        [2],
        "e1 kept its up verdict, e2 its down verdict"
    );
    assert!(h.last().seq > seq);
    // A reload that changes nothing sends the same snapshot again (rebuilt sinks converge).
    let before = h.published.len();
    let same = h.core.status(h.now);
    let mut fx = Vec::new();
    let plan_again = Arc::new((*h.core.plan).clone());
    h.core.reload(plan_again, vec![1, 2], h.now, &mut fx);
    h.take(fx);
    assert_eq!(h.published.len(), before + 1);
    assert_eq!(
        h.last().seq,
        h.published[before - 1].seq,
        "same snapshot, resent"
    );
    assert_eq!(same.endpoints.len(), 2);
}

#[test]
fn a_reload_that_removes_a_tenant_forgets_it_or_withdraws_it() {
    let mut h = Harness::new(plan(1, "", ""));
    h.observe(&[(0, true)]);
    let mut next = (*plan(1, "", "")).clone();
    next.tenants[0].name = "other".into();
    let mut fx = Vec::new();
    h.core
        .reload(Arc::new(next.clone()), vec![0], h.now, &mut fx);
    h.take(fx);
    assert_eq!(
        h.forgotten,
        ["t"],
        "no cleanup_on_remove: sinks forget, records stay"
    );

    let mut h = Harness::new(plan(1, "cleanup_on_remove = true", ""));
    h.observe(&[(0, true)]);
    let mut fx = Vec::new();
    h.core.reload(Arc::new(next), vec![0], h.now, &mut fx);
    h.take(fx);
    let withdrawn = h
        .published
        .iter()
        .find(|s| s.tenant == "t" && s.addresses.is_empty());
    assert!(
        withdrawn.is_some(),
        "cleanup_on_remove: an empty snapshot withdraws the records"
    );
}

#[test]
fn a_tenant_added_by_reload_waits_for_its_own_grace() {
    let mut h = Harness::new(plan(1, "", ""));
    h.observe(&[(0, true)]);
    h.advance(Duration::from_secs(10));
    let mut next = (*plan(2, "", "")).clone();
    next.tenants[0].name = "new".into();
    let mut fx = Vec::new();
    h.core.reload(Arc::new(next), vec![0, 1], h.now, &mut fx);
    h.take(fx);
    assert!(
        h.published.iter().all(|s| s.tenant != "new"),
        "e1 has no verdict: the new tenant waits although the start-up grace is long over"
    );
    h.advance(Duration::from_secs(5));
    let new = h
        .published
        .iter()
        .rev()
        .find(|s| s.tenant == "new")
        .unwrap();
    assert_eq!(
        new.addresses.len(),
        1,
        "after its grace: the healthy endpoint"
    );
}

/// A result this machine caused (out of descriptors, ports, buffers) for `target`.
fn local_failure(target: TargetId) -> Observation {
    Observation {
        target,
        result: ProbeResult {
            outcome: Err(Failure::Local("no descriptors".into())),
            latency: Duration::ZERO,
            reused: false,
            cert_not_after: None,
            weight: None,
        },
        start_delay: Duration::ZERO,
    }
}

#[test]
fn results_this_machine_caused_are_not_judged() {
    let mut h = Harness::new(plan(1, "", ""));
    h.observe(&[(0, true)]);
    let mut fx = Vec::new();
    h.core.observe(vec![local_failure(0)], h.now, &mut fx);
    h.core.observe(vec![local_failure(0)], h.now, &mut fx);
    h.take(fx);
    assert_eq!(h.published.len(), 1);
    let status = h.core.status(h.now);
    assert_eq!(
        status.endpoints[0].probes, 1,
        "local failures are not counted as probes"
    );
    assert_eq!(status.endpoints[0].consecutive_failures, 0);
}

#[test]
fn a_voting_tenant_publishes_the_tally_not_its_own_verdicts() {
    let mut h = Harness::new(plan(2, "multi_cluster = true", ""));
    h.observe(&[(0, true), (1, true)]);
    h.advance(Duration::from_secs(1));
    h.observe(&[(1, false), (1, false)]);
    assert!(h.published.is_empty(), "a voting tenant waits for the vote");
    let view = h.views.last().expect("the view went to the coordinator");
    let health: Vec<Health> = view.endpoints.iter().map(|e| e.health).collect();
    assert_eq!(health, [Health::Up, Health::Down]);
    let views = h.views.len();
    h.advance(Duration::from_secs(1));
    h.observe(&[(0, true)]);
    assert_eq!(h.views.len(), views, "an unchanged view is not sent again");
    // Another cluster owns 10.0.0.9; only this cluster sees e1 (10.0.0.2) down: 1 of 2
    // voters is below 0.66, so e1 stays published.
    let owned = |last: u8, name: &str| Owned {
        address: std::net::IpAddr::from([10, 0, 0, last]),
        name: name.into(),
        weight: 1,
        priority: 0,
        geo: None,
    };
    let now_ms = 1_700_000_000_000;
    let reports = [
        Report {
            owner: "o".into(),
            cluster: "a".into(),
            at_ms: now_ms,
            owned: vec![owned(1, "e0"), owned(2, "e1")],
            down: vec![std::net::IpAddr::from([10, 0, 0, 2])],
        },
        Report {
            owner: "o".into(),
            cluster: "b".into(),
            at_ms: now_ms,
            owned: vec![owned(9, "gw-b")],
            down: vec![],
        },
    ];
    let tally = Tally::count(&reports, now_ms, Duration::from_secs(15), 0.66);
    let mut fx = Vec::new();
    h.core.voted("t", Arc::new(tally), h.now, &mut fx);
    h.take(fx);
    assert_eq!(h.hosts(), [1, 2, 9]);
    assert!(h.last().votes.is_some(), "the snapshot carries the votes");
    let status = h.core.status(h.now);
    let tenant = &status.tenants[0];
    assert_eq!(tenant.votes.as_ref().unwrap().live, ["a", "b"]);
    assert_eq!(
        tenant.endpoints[1].why,
        crate::status::Why::KeptByVote,
        "down here, kept by the vote"
    );
    // The same outcome counted again renews the published set's count, and sends nothing.
    let published = h.last().votes.clone().unwrap();
    let later_at = tokio::time::Instant::now() + Duration::from_secs(60);
    let later = Tally::count(&reports, now_ms, Duration::from_secs(15), 0.66).counted_at(later_at);
    let sent = h.published.len();
    let mut fx = Vec::new();
    h.core.voted("t", Arc::new(later), h.now, &mut fx);
    h.take(fx);
    assert_eq!(h.published.len(), sent, "unchanged: nothing sent");
    assert!(
        published.current_at(later_at + Duration::from_secs(10)),
        "renewed to the later count"
    );
}

/// `[brake] per_tenant = 2`: four endpoints failing at once leave DNS two per window; the
/// rest stay published until the window frees up.
#[test]
fn the_brake_withdraws_at_most_its_limit_per_window() {
    let mut h = Harness::new(plan(6, "\n[brake]\nper_tenant = 2\nwindow = \"60s\"\n", ""));
    h.observe(&[
        (0, true),
        (1, true),
        (2, true),
        (3, true),
        (4, true),
        (5, true),
    ]);
    assert_eq!(h.hosts(), [1, 2, 3, 4, 5, 6]);
    for _ in 0..2 {
        h.advance(Duration::from_millis(100));
        h.observe(&[(2, false), (3, false), (4, false), (5, false)]);
    }
    h.advance(Duration::from_secs(1));
    assert_eq!(h.hosts(), [1, 2, 5, 6], "two withdrawn, two held");
    assert_eq!(h.core.brake().held().get("t"), Some(&2));
    h.advance(Duration::from_secs(30));
    assert_eq!(h.hosts(), [1, 2, 5, 6], "the window is still full");
    h.advance(Duration::from_secs(30));
    assert_eq!(h.hosts(), [1, 2], "the window freed up: the rest withdrawn");
    assert!(h.core.brake().held().is_empty());
}

/// An operator's release lets every held withdrawal through at once.
#[test]
fn releasing_the_brake_withdraws_what_it_held() {
    let mut h = Harness::new(plan(4, "\n[brake]\nper_tenant = 1\n", ""));
    h.observe(&[(0, true), (1, true), (2, true), (3, true)]);
    for _ in 0..2 {
        h.advance(Duration::from_millis(100));
        h.observe(&[(1, false), (2, false), (3, false)]);
    }
    h.advance(Duration::from_secs(1));
    assert_eq!(h.hosts().len(), 3, "one withdrawn, two held");
    let mut fx = Vec::new();
    assert_eq!(h.core.release_brake(h.now, &mut fx), 2);
    h.take(fx);
    assert_eq!(h.hosts(), [1]);
}

/// The self-check (on by default): 20 of 30 targets starting to fail at once make the
/// prober judge itself impaired before their verdicts change, so none is withdrawn; once
/// fewer than a quarter have been down for its window it resumes and withdraws those still
/// down.
#[test]
fn a_wave_of_failures_is_held_as_the_probers_own_until_it_passes() {
    let mut h = Harness::new(plan(30, "", ""));
    let all: Vec<(TargetId, bool)> = (0..30).map(|t| (t, true)).collect();
    h.observe(&all);
    assert_eq!(h.hosts().len(), 30);
    fail_at_once(&mut h, 20);
    assert!(h.core.status(h.now).impaired);
    assert_eq!(h.hosts().len(), 30, "every withdrawal held");
    assert_eq!(h.core.brake().held().get("t"), Some(&20));
    // 13 recover: 7 of 30 still down, fewer than a quarter; after a window of that (10 s,
    // every target probed again meanwhile) withdrawals go on.
    let back: Vec<(TargetId, bool)> = (0..13).map(|t| (t, true)).collect();
    h.observe(&back);
    h.advance(Duration::from_secs(1));
    assert!(h.core.status(h.now).impaired, "settling");
    assert_eq!(h.hosts().len(), 30);
    h.advance(Duration::from_secs(10));
    assert!(!h.core.status(h.now).impaired);
    assert_eq!(h.hosts().len(), 23, "the seven still down leave");
    // Both turns are announced on /events (and so on the page).
    let (kept, _) = h
        .core
        .events
        .subscribe(Some(crate::clock::Timestamp(std::time::UNIX_EPOCH)));
    let turns: Vec<(bool, usize, usize)> = kept
        .iter()
        .filter_map(|e| match **e {
            crate::events::Event::Impaired {
                impaired,
                failing,
                targets,
                ..
            } => Some((impaired, failing, targets)),
            _ => None,
        })
        .collect();
    assert_eq!(turns, [(true, 20, 30), (false, 7, 30)]);
}

/// Targets `0..n` fail twice, 100 ms apart (enough for `fall = 2`): a wave; then a second.
fn fail_at_once(h: &mut Harness, n: TargetId) {
    let wave: Vec<(TargetId, bool)> = (0..n).map(|t| (t, false)).collect();
    for _ in 0..2 {
        h.advance(Duration::from_millis(100));
        h.observe(&wave);
    }
    h.advance(Duration::from_secs(1));
}

/// A busy machine: results it caused itself (out of ports or descriptors) come between a
/// target's last success and its first real failure. They are not judged, so they must not
/// hide that first failure from the self-check either: the wave is still the prober's own.
#[test]
fn a_wave_after_local_failures_is_still_held_as_the_probers_own() {
    let mut h = Harness::new(plan(30, "", ""));
    let all: Vec<(TargetId, bool)> = (0..30).map(|t| (t, true)).collect();
    h.observe(&all);
    let mut fx = Vec::new();
    h.core
        .observe((0..20).map(local_failure).collect(), h.now, &mut fx);
    h.take(fx);
    fail_at_once(&mut h, 20);
    assert!(h.core.status(h.now).impaired);
    assert_eq!(h.hosts().len(), 30, "every withdrawal held");
}

/// A few failures are not a wave: withdrawn at once, as always.
#[test]
fn a_few_failures_are_withdrawn_at_once() {
    let mut h = Harness::new(plan(30, "", ""));
    let all: Vec<(TargetId, bool)> = (0..30).map(|t| (t, true)).collect();
    h.observe(&all);
    let few: Vec<(TargetId, bool)> = (0..5).map(|t| (t, false)).collect();
    for _ in 0..2 {
        h.advance(Duration::from_millis(100));
        h.observe(&few);
    }
    h.advance(Duration::from_secs(1));
    assert!(!h.core.status(h.now).impaired);
    assert_eq!(h.hosts().len(), 25);
}

/// `degraded_ttl`: while any endpoint of the tenant is down its records carry the shorter
/// TTL; back to `ttl` once all are up.
#[test]
fn a_degraded_tenant_publishes_its_degraded_ttl() {
    let mut h = Harness::new(plan(3, "ttl = \"30s\"\ndegraded_ttl = \"5s\"", ""));
    h.observe(&[(0, true), (1, true), (2, true)]);
    assert_eq!(h.last().ttl, Duration::from_secs(30));
    for _ in 0..2 {
        h.advance(Duration::from_millis(100));
        h.observe(&[(2, false)]);
    }
    h.advance(Duration::from_secs(1));
    assert_eq!(h.hosts(), [1, 2]);
    assert_eq!(h.last().ttl, Duration::from_secs(5));
    h.observe(&[(2, true)]);
    h.advance(Duration::from_secs(1));
    assert_eq!(
        (h.hosts(), h.last().ttl),
        (vec![1, 2, 3], Duration::from_secs(30))
    );
}
