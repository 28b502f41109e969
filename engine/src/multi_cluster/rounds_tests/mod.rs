//! The report rounds in virtual time: no actor, no zone. Exchanges are effects the test
//! answers by hand with what a zone would hold; the wall clock moves only when a test says.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use ho_config::Plan;
use tokio::time::Instant;

use super::report::{relayed_name, report_name, report_suffix, Owned, Report};
use super::rounds::{tally_without, unix_ms, Answers, Effect, Round, RoundsCore};
use super::vote::Tally;
use super::{LocalEndpoint, LocalView};
use crate::clock::{Clock, Now};
use crate::hysteresis::Health;
use crate::metrics::Metrics;
use crate::sink::reports::Rrset;
use crate::sink::SinkError;

mod turns;

/// The zone every test's tenant `t` (domain `t.example`) reports in.
const ZONE: &str = "s";

/// Rounds for a plan of two endpoints in one voting tenant, at a fixed wall time.
struct Run {
    core: RoundsCore,
    plan: Arc<Plan>,
    now: Now,
    /// Exchanges started and not answered yet.
    rounds: Vec<Round>,
    /// Every round started: how many reports each wrote.
    written: Vec<usize>,
    voted: Vec<Arc<Tally>>,
    discovered: Vec<Vec<IpAddr>>,
    /// Tenants that left their zone: (tenant, report removed, sinks written).
    left: Vec<(String, String, Vec<String>)>,
}

impl Run {
    fn new() -> Run {
        let plan = crate::tracker::tests::plan(2, "multi_cluster = true", "");
        let stores: BTreeSet<String> = [ZONE.to_owned()].into();
        Run {
            core: RoundsCore::new(plan.clone(), stores, Arc::new(Metrics::new())),
            plan,
            now: Now {
                clock: Clock {
                    mono: Instant::now(),
                    wall: crate::clock::after_epoch(Duration::from_secs(1_700_000_000)),
                },
                writer: true,
            },
            rounds: Vec::new(),
            written: Vec::new(),
            voted: Vec::new(),
            discovered: Vec::new(),
            left: Vec::new(),
        }
    }

    /// A run whose cluster `c1` id is known and which saw `e0` with `health`.
    fn started(health: Health) -> Run {
        Run::started_as("c1", Duration::ZERO, health)
    }

    /// A run of cluster `id` started `after` the fixed wall time, which saw `e0` with
    /// `health`.
    fn started_as(id: &str, after: Duration, health: Health) -> Run {
        let mut run = Run::new();
        run.advance(after);
        run.step(|core, now, fx| core.set_cluster(id.into(), now, fx));
        run.view(health);
        run
    }

    fn step(&mut self, f: impl FnOnce(&mut RoundsCore, Now, &mut Vec<Effect>)) {
        let (now, mut fx) = (self.now, Vec::new());
        f(&mut self.core, now, &mut fx);
        for effect in fx {
            match effect {
                Effect::Exchange(round) => {
                    self.written.push(round.writes.len());
                    self.rounds.push(round);
                }
                Effect::Voted { tenant, tally } => {
                    assert_eq!(tenant, "t");
                    self.voted.push(tally);
                }
                Effect::Discovered(all) => {
                    self.discovered
                        .push(all.iter().map(|d| d.address).collect());
                }
                Effect::Leave(l) => self.left.push((l.tenant.name, l.report, l.sinks)),
            }
        }
    }

    /// This cluster's view: e0 with `health`, e1 up.
    fn view(&mut self, health: Health) {
        let endpoint = |i: u8, health| LocalEndpoint {
            address: IpAddr::from([10, 0, 0, i + 1]),
            name: format!("e{i}"),
            cluster: None,
            weight: 1,
            priority: 0,
            geo: None,
            health,
            drained: false,
        };
        let view = LocalView {
            tenant: "t".into(),
            endpoints: vec![endpoint(0, health), endpoint(1, Health::Up)],
        };
        self.step(|core, now, fx| core.view(view, now, fx));
    }

    /// Answers the oldest exchange: its writes succeed (or `write_error`), the zone holds
    /// what it wrote plus `others`.
    fn answer(&mut self, others: &[Report], write_error: bool) {
        self.answer_relayed(others, &[], write_error);
    }

    /// [`Run::answer`], with `relayed` read as reports a peer relays.
    fn answer_relayed(&mut self, others: &[Report], relayed: &[Report], write_error: bool) {
        let round = self.rounds.remove(0);
        let mut zone: Vec<Rrset> = round.writes.clone();
        if write_error {
            zone.clear();
        }
        zone.extend(
            others
                .iter()
                .map(|r| Rrset::new(report_name(&r.cluster, "t.example"), r.encode())),
        );
        let suffix = report_suffix("t.example");
        zone.extend(
            relayed
                .iter()
                .map(|r| Rrset::new(relayed_name(&r.cluster, &suffix), r.encode())),
        );
        let written = (!round.writes.is_empty()).then(|| {
            if write_error {
                Err(SinkError::retriable("zone busy"))
            } else {
                Ok(())
            }
        });
        let read = round.read.then_some(Ok(zone));
        self.step(|core, now, fx| core.finished(round, Answers { written, read }, now, fx));
    }

    /// Fails the oldest exchange: the zone can be neither written nor read.
    fn fail(&mut self) {
        let round = self.rounds.remove(0);
        let written = (!round.writes.is_empty()).then(|| Err(SinkError::retriable("down")));
        let read = (round.read).then(|| Err(SinkError::retriable("zone unreachable")));
        self.step(|core, now, fx| core.finished(round, Answers { written, read }, now, fx));
    }

    fn advance(&mut self, d: Duration) {
        self.now.clock = self.now.clock.after(d);
    }

    /// Timer rounds a `report_interval` apart (heartbeats out of turn answered) until one
    /// reads the zone: this cluster's next turn to read.
    fn tick_to_read(&mut self) {
        for _ in 0..10 {
            self.advance(self.plan.multi_cluster.report_interval);
            self.step(RoundsCore::tick);
            match self.rounds.last() {
                Some(round) if round.read => return,
                Some(_) => self.answer(&[], false),
                None => {}
            }
        }
        panic!("no turn to read in 10 rounds");
    }

    /// Another cluster's report, written `age` ago, owning `owned` and seeing `down` down.
    fn report(&self, cluster: &str, age: Duration, owned: &[&str], down: &[&str]) -> Report {
        Report {
            owner: self.plan.owner_id.clone(),
            cluster: cluster.into(),
            at_ms: unix_ms(self.now.clock.wall - age),
            owned: owned
                .iter()
                .map(|a| Owned {
                    address: a.parse().unwrap(),
                    name: format!("{cluster}-gw"),
                    weight: 1,
                    priority: 0,
                    geo: None,
                })
                .collect(),
            down: down.iter().map(|a| a.parse().unwrap()).collect(),
        }
    }
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[test]
fn no_round_runs_before_the_cluster_id_is_known() {
    let mut run = Run::new();
    run.view(Health::Up);
    assert!(run.rounds.is_empty());
    run.step(|core, now, fx| core.set_cluster("c1".into(), now, fx));
    assert_eq!(run.rounds.len(), 1);
    let round = &run.rounds[0];
    assert_eq!(round.writes[0].name, report_name("c1", "t.example"));
    assert_eq!(round.suffixes, [report_suffix("t.example")]);
}

#[test]
fn a_change_during_a_round_starts_one_more_right_after_it() {
    let mut run = Run::started(Health::Up);
    run.view(Health::Down);
    run.view(Health::Up);
    assert_eq!(run.rounds.len(), 1, "one round per zone at a time");
    run.answer(&[], false);
    assert_eq!(run.voted.len(), 1);
    assert_eq!(
        run.rounds.len(),
        1,
        "the changes meanwhile make one more round"
    );
    run.answer(&[], false);
    assert!(run.rounds.is_empty());
}

#[test]
fn a_report_is_written_again_when_it_changes_or_a_third_of_the_ttl_passed() {
    let mut run = Run::started(Health::Up);
    run.answer(&[], false);
    // report_ttl 15 s: unchanged reports are read every round, written every 5 s.
    for (after, writes) in [(2, 0), (2, 0), (1, 1), (2, 0)] {
        run.advance(secs(after));
        run.step(RoundsCore::tick);
        run.answer(&[], false);
        assert_eq!(*run.written.last().unwrap(), writes, "after {after} s more");
    }
    run.view(Health::Down);
    assert_eq!(
        *run.written.last().unwrap(),
        1,
        "a changed view is written at once"
    );
}

#[test]
fn a_failed_write_is_tried_again_next_round() {
    let mut run = Run::started(Health::Up);
    run.answer(&[], true);
    run.advance(secs(1));
    run.step(RoundsCore::tick);
    assert_eq!(run.written, [1, 1]);
}

#[test]
fn a_standby_reads_and_counts_but_never_writes() {
    let mut run = Run::new();
    run.now.writer = false;
    run.step(|core, now, fx| core.set_cluster("c1".into(), now, fx));
    run.view(Health::Down);
    let leader_wrote = run.report("c1", secs(1), &["10.0.0.1", "10.0.0.2"], &[]);
    run.answer(&[leader_wrote], false);
    assert_eq!(run.written, [0]);
    // The standby counts its leader's report, not its own view (which saw e0 down).
    let tally = &run.voted[0];
    assert_eq!(tally.live, ["c1"]);
    assert!(tally.addresses.iter().all(|a| a.kept));
}

/// A report is as old as the time since its stamp last changed, on this reader's clock:
/// c2 keeps rewriting, c3 stopped; c3 ages out `report_ttl` (15 s) after its last change,
/// not before, whatever their stamps say.
#[test]
fn report_age_is_the_time_since_its_stamp_last_changed_here() {
    let mut run = Run::started(Health::Up);
    let c3 = run.report("c3", secs(1), &["10.8.8.8"], &[]);
    for round in 0..4 {
        let c2 = run.report("c2", secs(1), &["10.9.9.9"], &[]);
        run.answer(&[c2, c3.clone()], false);
        let tally = run.voted.last().unwrap();
        assert_eq!(tally.live, ["c1", "c2", "c3"], "round {round}");
        run.advance(secs(5));
        run.step(RoundsCore::tick);
    }
    // 20 s after c3's stamp was first read, unchanged since.
    let c2 = run.report("c2", secs(1), &["10.9.9.9"], &[]);
    run.answer(&[c2, c3], false);
    let tally = run.voted.last().unwrap();
    assert_eq!(tally.live, ["c1", "c2"]);
    assert_eq!(tally.aged_out, ["c3"]);
}

/// Clock skew of 30 s either way (twice `report_ttl`): a live cluster whose clock is behind
/// is never counted dead, and a dead one whose clock is ahead does not vote past
/// `report_ttl`; the vote never withdraws without the live quorum.
#[test]
fn a_writers_clock_skew_neither_hides_nor_fakes_a_voter() {
    // e0 (10.0.0.1) is down here and at c3, whose clock is 30 s ahead; c2 (30 s behind)
    // sees it up. 2 of 3 live withdraw it; once c3 is dead, 1 of 2 does not.
    let mut run = Run::started(Health::Down);
    let behind = |run: &Run| run.report("c2", secs(30), &[], &[]);
    let ahead = run.report("c3", Duration::ZERO, &[], &["10.0.0.1"]);
    let ahead = Report {
        at_ms: ahead.at_ms + 30_000,
        ..ahead
    };
    let e0_kept = |t: &Tally| {
        t.addresses
            .iter()
            .find(|a| a.address == IpAddr::from([10, 0, 0, 1]))
            .unwrap()
            .kept
    };
    for round in 0..3 {
        let ahead = Report {
            at_ms: ahead.at_ms + round * 5_000,
            ..ahead.clone()
        };
        run.answer(&[behind(&run), ahead], false);
        let tally = run.voted.last().unwrap();
        assert_eq!(tally.live, ["c1", "c2", "c3"], "round {round}");
        assert!(!e0_kept(tally), "round {round}: 2 of 3 live see it down");
        run.advance(secs(5));
        run.step(RoundsCore::tick);
    }
    // c3 stops writing: its last stamp (still 30 s in this reader's future, first read 5 s
    // ago) stops changing; read at 5, 11, 17 and 23 s after it first appeared, it is live
    // until 15 s.
    let last = Report {
        at_ms: ahead.at_ms + 10_000,
        ..ahead.clone()
    };
    for round in 0..4 {
        run.answer(&[behind(&run), last.clone()], false);
        let tally = run.voted.last().unwrap();
        let live = if round < 2 { 3 } else { 2 };
        assert_eq!(
            tally.live.len(),
            live,
            "round {round} after c3 died: {tally:?}"
        );
        assert!(
            tally.live.contains(&"c2".to_owned()),
            "c2 is never counted dead"
        );
        run.advance(secs(6));
        run.step(RoundsCore::tick);
    }
    let tally = run.voted.last().unwrap();
    assert!(e0_kept(tally), "1 of 2 live voters is no quorum");
}

#[test]
fn this_clusters_own_view_is_one_vote_among_the_live() {
    // e0 (10.0.0.1) is down here; c2 agrees, c3 does not: 2 of 3 >= 0.66 withdraws it.
    let mut run = Run::started(Health::Down);
    let c2 = run.report("c2", secs(1), &[], &["10.0.0.1"]);
    let c3 = run.report("c3", secs(1), &[], &[]);
    run.answer(&[c2, c3.clone()], false);
    let kept = |t: &Tally, a: [u8; 4]| {
        let address = IpAddr::from(a);
        t.addresses
            .iter()
            .find(|v| v.address == address)
            .unwrap()
            .kept
    };
    assert!(!kept(&run.voted[0], [10, 0, 0, 1]));
    assert!(kept(&run.voted[0], [10, 0, 0, 2]));
    // Alone (1 of 2 live), this cluster's view does not withdraw it.
    run.tick_to_read();
    run.answer(&[c3], false);
    assert!(kept(&run.voted[1], [10, 0, 0, 1]));
}

#[test]
fn a_report_that_stops_parsing_counts_as_it_last_parsed() {
    let mut run = Run::started(Health::Up);
    let c2 = run.report("c2", secs(1), &["10.9.9.9"], &[]);
    run.answer(&[c2], false);
    run.advance(secs(5));
    run.step(RoundsCore::tick);
    let round = run.rounds.remove(0);
    let garbled = vec![Rrset::new(
        report_name("c2", "t.example"),
        vec!["not a report".to_owned()],
    )];
    let answers = Answers {
        written: None,
        read: Some(Ok(garbled)),
    };
    run.step(|core, now, fx| core.finished(round, answers, now, fx));
    assert_eq!(run.voted[1].live, ["c1", "c2"]);
}

#[test]
fn a_read_error_keeps_the_published_set() {
    let mut run = Run::started(Health::Up);
    let round = run.rounds.remove(0);
    let read = Err(SinkError::retriable("zone unreachable"));
    let answers = Answers {
        written: Some(Ok(())),
        read: Some(read),
    };
    run.step(|core, now, fx| core.finished(round, answers, now, fx));
    assert!(
        run.voted.is_empty(),
        "no tally, so the tracker keeps what it published"
    );
}

/// A zone outage longer than `report_ttl` (15 s), when no cluster could write: the reports
/// read first after it count as live (this reader was blind, the writers not dead); one
/// unchanged for `report_ttl` of reading afterwards ages out as usual.
#[test]
fn reports_do_not_age_while_the_zone_cannot_be_read() {
    let mut run = Run::started(Health::Up);
    let c2 = run.report("c2", secs(1), &["10.9.9.9"], &[]);
    run.answer(std::slice::from_ref(&c2), false);
    assert_eq!(run.voted.last().unwrap().live, ["c1", "c2"]);
    for _ in 0..4 {
        run.advance(secs(5));
        run.step(RoundsCore::tick);
        run.fail();
    }
    let before = run.voted.len();
    run.advance(secs(1));
    run.step(RoundsCore::tick);
    run.answer(std::slice::from_ref(&c2), false);
    assert_eq!(run.voted.len(), before + 1);
    let tally = run.voted.last().unwrap();
    assert_eq!(tally.live, ["c1", "c2"], "21 s blind is not 21 s dead");
    for _ in 0..4 {
        run.advance(secs(5));
        run.step(RoundsCore::tick);
        run.answer(std::slice::from_ref(&c2), false);
    }
    let tally = run.voted.last().unwrap();
    assert_eq!(tally.aged_out, ["c2"], "20 s of reading it unchanged");
}

/// Reports a peer relays (each cluster's server holding its own reports): a cluster this
/// reader has no report of lends its addresses, newest relay first, never its down votes;
/// this cluster's own relayed report is not taken; once the cluster's own report is read,
/// only that one counts.
/// The addresses a tally publishes, as text.
fn addresses_of(t: &Tally) -> Vec<String> {
    t.addresses.iter().map(|a| a.address.to_string()).collect()
}

#[test]
fn a_relayed_report_lends_its_addresses_never_its_votes() {
    let mut run = Run::started(Health::Up);
    let c2 = run.report("c2", secs(1), &["10.9.9.9"], &[]);
    let c3 = run.report("c3", secs(1), &["10.3.3.3"], &["10.9.9.9"]);
    let c3_older = run.report("c3", secs(5), &["10.3.3.4"], &[]);
    let c1_old = run.report("c1", secs(5), &["10.1.1.1"], &[]);
    run.answer_relayed(
        std::slice::from_ref(&c2),
        &[c3_older, c3.clone(), c1_old],
        false,
    );
    let tally = run.voted.last().unwrap();
    assert_eq!(tally.live, ["c1", "c2"]);
    assert_eq!(tally.aged_out, ["c3"], "relayed: never a voter");
    let addresses = addresses_of(tally);
    assert!(addresses.contains(&"10.3.3.3".to_string()), "{addresses:?}");
    assert!(
        !addresses.contains(&"10.3.3.4".to_string()),
        "the newest relay: {addresses:?}"
    );
    assert!(
        !addresses.contains(&"10.1.1.1".to_string()),
        "not our own: {addresses:?}"
    );
    let nine: IpAddr = "10.9.9.9".parse().unwrap();
    let vote = |t: &Tally| {
        t.addresses
            .iter()
            .find(|a| a.address == nine)
            .unwrap()
            .clone()
    };
    assert!(vote(tally).down_votes.is_empty(), "a relayed down vote");
    run.tick_to_read();
    let c4 = run.report("c4", secs(3), &["10.4.4.4"], &[]);
    let c4_left = run.report("c4", secs(2), &[], &[]);
    run.answer_relayed(std::slice::from_ref(&c2), &[c4, c4_left], false);
    let tally = run.voted.last().unwrap();
    assert!(
        !tally.aged_out.contains(&"c4".to_string())
            && !addresses_of(tally).contains(&"10.4.4.4".to_string()),
        "the newest relay of c4 holds no address (it left): {tally:?}"
    );
    run.tick_to_read();
    let c3_relayed = run.report("c3", secs(0), &["10.3.3.5"], &[]);
    run.answer_relayed(&[c2, c3], &[c3_relayed], false);
    let tally = run.voted.last().unwrap();
    assert_eq!(tally.live, ["c1", "c2", "c3"]);
    assert_eq!(vote(tally).down_votes, ["c3"], "its own report votes");
    assert!(
        !addresses_of(tally).contains(&"10.3.3.5".to_string()),
        "read itself, the relay is not taken"
    );
}

#[test]
fn addresses_other_clusters_contribute_are_announced_when_they_change() {
    let mut run = Run::started(Health::Up);
    let c2 = run.report("c2", secs(1), &["10.9.9.9"], &[]);
    run.answer(std::slice::from_ref(&c2), false);
    run.tick_to_read();
    run.answer(&[c2], false);
    let nine: IpAddr = "10.9.9.9".parse().unwrap();
    assert_eq!(run.discovered, [vec![nine]], "announced once");
    run.tick_to_read();
    run.answer(&[], false);
    assert_eq!(run.discovered.last().unwrap(), &Vec::<IpAddr>::new());
}

#[test]
fn leaving_counts_only_the_clusters_that_remain() {
    let run = Run::started(Health::Up);
    let reports = [
        run.report("c1", secs(1), &["10.0.0.1"], &[]),
        run.report("c2", secs(1), &["10.9.9.9"], &[]),
    ];
    let rrsets = reports
        .iter()
        .map(|r| Rrset::new(report_name(&r.cluster, "t.example"), r.encode()))
        .collect();
    let tally = tally_without(&run.plan, "c1", rrsets, run.now.clock.wall);
    assert_eq!(tally.live, ["c2"]);
    let addresses: Vec<IpAddr> = tally.addresses.iter().map(|a| a.address).collect();
    assert_eq!(addresses, ["10.9.9.9".parse::<IpAddr>().unwrap()]);
}

/// A reload that removes a voting tenant with `cleanup_on_remove` takes this cluster's
/// report out of its zone, on the replica that writes it; without `cleanup_on_remove`, or
/// on a standby of a shared zone, nothing leaves (the report ages out).
#[test]
fn a_removed_voting_tenant_leaves_its_zone_when_it_asked_for_cleanup() {
    let without_tenants = |plan: &Plan| {
        let mut p = plan.clone();
        p.tenants.clear();
        Arc::new(p)
    };
    for (cleanup, writer, leaves) in [
        (true, true, true),
        (false, true, false),
        (true, false, false),
    ] {
        let mut run = Run::new();
        let extra = format!("multi_cluster = true\ncleanup_on_remove = {cleanup}");
        run.plan = crate::tracker::tests::plan(2, &extra, "");
        run.core = RoundsCore::new(
            run.plan.clone(),
            [ZONE.to_owned()].into(),
            Arc::new(Metrics::new()),
        );
        run.step(|core, now, fx| core.set_cluster("c1".into(), now, fx));
        run.now.writer = writer;
        let (next, stores) = (without_tenants(&run.plan), [ZONE.to_owned()].into());
        run.step(|core, now, fx| core.retarget(next, stores, now, fx));
        let want = match leaves {
            true => vec![(
                "t".to_owned(),
                report_name("c1", "t.example"),
                vec![ZONE.to_owned()],
            )],
            false => vec![],
        };
        assert_eq!(run.left, want, "cleanup {cleanup}, writer {writer}");
    }
}
