//! The promises, checked over a run's recorded history: the answers read from the zone's
//! back end every 50 ms and the faults as they were applied (their real start and heal).
//! Each rule is judged generously where the orchestrator may legitimately see the world
//! late (detection, report intervals, report ageing) and strictly where nothing excuses it:
//! 1. no answer is ever empty (once the name had an address);
//! 2. no address is withdrawn unless, within the window before, at least
//!    `failure_threshold` of the clusters that were surely live saw it failing (a cluster
//!    counts as seeing it down while its report of the failure may still be fresh);
//! 3. after the last heal every answer converges to every gateway within `converge`;
//! 4. a replica under a Lease writes the shared back end only while the Lease is its own:
//!    each write request reaching the back end (as its link saw it pass) from a replica is
//!    judged against the Lease's holder at that moment (as the API server changed it), so
//!    two replicas' writes never interleave;
//! 5. a gateway down from every vantage, the others up and every cluster and the back end
//!    running, leaves the answer within `detect`.
//!
//! A cluster may run as several processes (replicas under a Lease, one writing). It surely
//! takes part while none of its processes has a fault, and may take part while one of them
//! has none: rule 2 counts the first as voters and the second as seeing a failure, rule 5
//! asks the first, so neither blames a cluster in the middle of a handover.

use std::time::Duration;

use super::schedule::Fault;

/// What a run recorded.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// Each answer read, by when it came since the run's start, sorted (reads that got no
    /// answer left out).
    pub answers: Vec<(Duration, Vec<String>)>,
    /// Each fault with its real start and heal (`None`: never healed).
    pub faults: Vec<(Fault, Duration, Option<Duration>)>,
    /// How many clusters.
    pub clusters: usize,
    /// Each process's cluster.
    pub processes: Vec<usize>,
    /// The gateways' addresses, by index.
    pub gateways: Vec<String>,
    /// Each write request of a replica under a Lease reaching the back end: when, and
    /// which process sent it.
    pub writes: Vec<(Duration, usize)>,
    /// The Lease's holder (a process) from each change on, in order.
    pub holders: Vec<(Duration, Option<usize>)>,
    /// Each process's log (warnings and errors), for a violation's report.
    pub logs: Vec<String>,
    /// Whose server the answers were read from, when each cluster serves the zone itself:
    /// a cluster it cannot read the reports of (a partition) takes no part in its vote.
    pub reader: Option<usize>,
    /// The clusters that keep a `state_dir`: restarted, they recall their peers' reports.
    pub recalling: Vec<usize>,
}

/// The bounds the rules allow.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// How far back a withdrawal may rest on what the clusters saw.
    pub window: Duration,
    /// How long a started cluster takes before it surely votes.
    pub warmup: Duration,
    /// How long a report counts after its cluster stops refreshing it (`report_ttl`).
    pub report_ttl: Duration,
    /// `failure_threshold`.
    pub threshold: f64,
    /// Longest convergence after the last heal.
    pub converge: Duration,
    /// Longest time for a gateway down everywhere to leave.
    pub detect: Duration,
}

/// A broken promise, with the moment and what was seen.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    /// Which rule.
    pub rule: u8,
    /// When, since the run's start.
    pub at: Duration,
    /// What.
    pub what: String,
}

/// What a run that kept its promises measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figures {
    /// From the last heal to the answer holding every gateway for good.
    pub convergence: Duration,
}

const STEP: Duration = Duration::from_millis(50);

impl History {
    fn span<'a>(
        &'a self,
        pick: impl Fn(&Fault) -> bool + 'a,
    ) -> impl Iterator<Item = (Duration, Duration)> + 'a {
        self.faults
            .iter()
            .filter(move |(f, _, _)| pick(f))
            .map(|(_, from, to)| (*from, to.unwrap_or(Duration::MAX)))
    }

    /// Whether process `p` is stopped, killed or cut from the back end at `t`; with
    /// `any_fault`, also while its link to the back end is slowed or it is cut from the API
    /// server (a leader cut from it keeps writing until its fence closes, `renew_deadline`
    /// later, so it may still vote).
    fn process_out(&self, p: usize, t: Duration, any_fault: bool) -> bool {
        self.span(|f| {
            f.process() == Some(p)
                && match f {
                    Fault::Pause(_) | Fault::Kill(_) | Fault::BackendCut(_) => true,
                    Fault::BackendSlow(..) | Fault::ApiCut(_) | Fault::Loss(..) => any_fault,
                    _ => false,
                }
        })
        .any(|(from, to)| from <= t && t < to)
    }

    /// Whether cluster `c` takes part at `t`, its processes running and reaching the zone's
    /// back end (a process cut from it neither writes its report nor reads the others'):
    /// `surely`, all of them with no fault at all; else at least one of them.
    pub fn running(&self, c: usize, t: Duration, surely: bool) -> bool {
        self.running_for(self.reader, c, t, surely)
    }

    /// [`History::running`] as `reader`'s cluster sees it (`None`: the shared zone's
    /// back end). A reader losing packets may fail to read any peer (its reads time out
    /// before TCP retransmits), so it may count alone, as one cut off from them.
    fn running_for(&self, reader: Option<usize>, c: usize, t: Duration, surely: bool) -> bool {
        if let Some(reader) = reader.filter(|r| *r != c) {
            let cut = self
                .span(|f| match f {
                    Fault::Loss(p, _) => self.processes[*p] == reader,
                    f => f.cuts(reader, c),
                })
                .any(|(from, to)| from <= t && t < to);
            if cut {
                return false;
            }
        }
        let mut mine = (0..self.processes.len()).filter(|&p| self.processes[p] == c);
        if surely {
            mine.all(|p| !self.process_out(p, t, true))
        } else {
            mine.any(|p| !self.process_out(p, t, false))
        }
    }

    /// Whether this history's reader could read cluster `c` at some moment of
    /// `[from, to]` (sampled every 50 ms).
    fn read_between(&self, c: usize, from: Duration, to: Duration) -> bool {
        let mut t = from;
        while t <= to {
            if self.running(c, t, false) {
                return true;
            }
            t += STEP;
        }
        false
    }

    /// Whether cluster `c` surely ran over the whole of `[from, to]` (sampled every 50 ms).
    fn ran_throughout(&self, c: usize, from: Duration, to: Duration) -> bool {
        let mut t = from;
        while t <= to {
            if !self.running(c, t, true) {
                return false;
            }
            t += STEP;
        }
        self.running(c, to, true)
    }

    /// The Lease's holder at `t`.
    fn holder(&self, t: Duration) -> Option<usize> {
        let i = self.holders.partition_point(|(at, _)| *at <= t);
        i.checked_sub(1).and_then(|i| self.holders[i].1)
    }

    /// Whether gateway `g` fails for cluster `c` at `t`, or may (a process of `c` loses
    /// packets: any gateway may look down from there).
    pub fn failing(&self, g: usize, c: usize, t: Duration) -> bool {
        self.span(|f| match f {
            Fault::Gateway { gateway, vantages } => *gateway == g && vantages.contains(&c),
            Fault::Loss(p, _) => self.processes[*p] == c,
            _ => false,
        })
        .any(|(from, to)| from <= t && t < to)
    }

    /// The last moment at or before `t` a process of cluster `c` (re)started in the run.
    fn last_start(&self, c: usize, t: Duration) -> Option<Duration> {
        let restarts = self.faults.iter().flat_map(|(f, from, to)| match f {
            Fault::Kill(p) if self.processes[*p] == c => vec![*to],
            Fault::Skew(p, _) if self.processes[*p] == c => vec![Some(*from), *to],
            _ => vec![],
        });
        restarts.flatten().filter(|s| *s <= t).max()
    }

    /// Whether reader `r`'s cluster has not yet learned gateway `g` at `t`. With each
    /// cluster serving the zone itself, a cluster's reports live on its own server, and each
    /// server relays the reports it last read from its peers (and, with a `state_dir`, those
    /// it recalled after a restart, until it has heard every peer). A cluster that
    /// (re)started without a `state_dir` learns `g` (owned by cluster `g`) once it reads
    /// cluster `g` itself, or a cluster that knows `g`: one that read `g` since its own last
    /// start, or that recalls it. Each hop takes a round (`warmup / 2`, generously). Until
    /// then it does not know `g`, and its own server answers without it (the other servers
    /// keep it): the gap left when such a cluster restarts while every cluster that knows a
    /// peer's gateways is down or cut off from it, excused here and documented. A cluster
    /// with a `state_dir` recalls every gateway (it heard every peer before the run started),
    /// and a shared zone keeps every report for every reader: no gap.
    fn not_yet_learned(&self, g: usize, t: Duration, b: &Bounds) -> bool {
        let Some(r) = self
            .reader
            .filter(|r| *r != g && !self.recalling.contains(r))
        else {
            return false;
        };
        let Some(start) = self.last_start(r, t) else {
            return false;
        };
        let hop = b.warmup / 2;
        let relays: Vec<usize> = (0..self.clusters).filter(|&q| q != r && q != g).collect();
        // Since when each cluster knows g: all do when the (settled) run starts.
        let mut knows_since = vec![Some(Duration::ZERO); self.clusters];
        let mut u = Duration::ZERO;
        while u + hop <= t {
            for &q in &relays {
                let restarting = self.last_start(q, u).is_some_and(|s| u < s + hop);
                if restarting && !self.recalling.contains(&q) {
                    knows_since[q] = None;
                } else if knows_since[q].is_none()
                    && self.running_for(None, q, u, false)
                    && self.running_for(Some(q), g, u, false)
                {
                    knows_since[q] = Some(u);
                }
            }
            let reads = |c: usize| self.running_for(Some(r), c, u, false);
            let relayed = relays
                .iter()
                .any(|&q| knows_since[q].is_some_and(|k| k + hop <= u) && reads(q));
            if u >= start + hop && reads(r) && (reads(g) || relayed) {
                return false;
            }
            u += STEP;
        }
        true
    }

    /// Whether a withdrawal of gateway `g` seen at `t` rests on a quorum of what the
    /// clusters saw within `b.window` before.
    fn justified(&self, g: usize, t: Duration, b: &Bounds) -> bool {
        if self.not_yet_learned(g, t, b) {
            return true;
        }
        let mut s = t.saturating_sub(b.window);
        while s <= t {
            let surely_live = (0..self.clusters)
                .filter(|&c| self.ran_throughout(c, s.saturating_sub(b.warmup), s))
                .count();
            // A cluster saw it down at `u` when it ran and it failed from there; its report
            // says so until it is read, which may be later (a reader cut off from it reads
            // what it saw meanwhile once the partition heals).
            let saw_down = (0..self.clusters)
                .filter(|&c| {
                    let mut u = s.saturating_sub(b.report_ttl);
                    while u <= s {
                        if self.running_for(None, c, u, false)
                            && self.failing(g, c, u)
                            && self.read_between(c, u, s)
                        {
                            return true;
                        }
                        u += STEP;
                    }
                    false
                })
                .count();
            if saw_down >= 1 && saw_down as f64 >= b.threshold * surely_live as f64 {
                return true;
            }
            s += STEP;
        }
        false
    }
}

/// Judges `h` against the rules; the figures of a run that kept them, or every violation.
pub fn check(h: &History, b: &Bounds) -> Result<Figures, Vec<Violation>> {
    let mut violations = Vec::new();
    let mut seen_address = false;
    for (i, (t, answer)) in h.answers.iter().enumerate() {
        if answer.is_empty() && seen_address {
            violations.push(Violation {
                rule: 1,
                at: *t,
                what: "the name answered no address".into(),
            });
        }
        seen_address |= !answer.is_empty();
        let Some((_, before)) = i.checked_sub(1).map(|p| &h.answers[p]) else {
            continue;
        };
        for gone in before.iter().filter(|a| !answer.contains(a)) {
            let Some(g) = h.gateways.iter().position(|x| x == gone) else {
                continue;
            };
            if !h.justified(g, *t, b) {
                violations.push(Violation {
                    rule: 2,
                    at: *t,
                    what: format!("{gone} withdrawn without a quorum of live clusters seeing it down: {before:?} -> {answer:?}"),
                });
            }
        }
    }
    for &(t, p) in &h.writes {
        let holder = h.holder(t);
        if holder != Some(p) {
            violations.push(Violation {
                rule: 4,
                at: t,
                what: format!(
                    "process {p} wrote the shared back end while the Lease was {}",
                    holder.map_or("nobody's".to_owned(), |h| format!("process {h}'s"))
                ),
            });
        }
    }
    for (fault, from, to) in &h.faults {
        let Fault::Gateway { gateway, vantages } = fault else {
            continue;
        };
        let to = to.unwrap_or(Duration::MAX);
        let deadline = *from + b.detect;
        let everywhere = vantages.len() == h.clusters;
        let quiet = to > deadline
            && (0..h.clusters)
                .all(|c| h.ran_throughout(c, from.saturating_sub(b.warmup), deadline))
            && !h.faults.iter().any(|(f, a, z)| {
                let z = z.unwrap_or(Duration::MAX);
                let overlaps = *a < deadline && z > *from;
                overlaps && f != fault && matches!(f, Fault::Gateway { .. } | Fault::BackendDown)
            });
        if everywhere && quiet {
            let address = &h.gateways[*gateway];
            let left = h
                .answers
                .iter()
                .any(|(t, a)| *t >= *from && *t <= deadline && !a.contains(address));
            if !left {
                violations.push(Violation {
                    rule: 5,
                    at: deadline,
                    what: format!(
                        "{address} down from every vantage since {from:?} was still answered"
                    ),
                });
            }
        }
    }
    let last_heal = h
        .faults
        .iter()
        .map(|(_, _, to)| to.unwrap_or(Duration::MAX))
        .max()
        .unwrap_or_default();
    let mut all = h.gateways.clone();
    all.sort();
    // The answer holds every gateway for good from the first read of its last run.
    let settled = match h.answers.iter().rposition(|(_, a)| *a != all) {
        Some(i) => h.answers.get(i + 1).map(|(t, _)| *t),
        None => h.answers.first().map(|(t, _)| *t),
    };
    let end = h.answers.last().map_or(Duration::ZERO, |(t, _)| *t);
    match settled {
        Some(at) if at <= last_heal + b.converge && end > last_heal + b.converge => {
            if violations.is_empty() {
                return Ok(Figures {
                    convergence: at.saturating_sub(last_heal),
                });
            }
        }
        _ => violations.push(Violation {
            rule: 3,
            at: last_heal + b.converge,
            what: format!(
                "not every gateway answered for good within {:?} of the last heal; last answer {:?}",
                b.converge,
                h.answers.last()
            ),
        }),
    }
    Err(violations)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: Bounds = Bounds {
        window: Duration::from_secs(1),
        warmup: Duration::from_millis(500),
        report_ttl: Duration::from_millis(500),
        threshold: 0.66,
        converge: Duration::from_secs(2),
        detect: Duration::from_secs(1),
    };

    fn s(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    fn history(
        faults: Vec<(Fault, Duration, Option<Duration>)>,
        answers: &[(u64, &[&str])],
    ) -> History {
        History {
            answers: answers
                .iter()
                .map(|(t, a)| (s(*t), a.iter().map(|x| (*x).to_owned()).collect()))
                .collect(),
            faults,
            clusters: 3,
            processes: vec![0, 1, 2],
            gateways: vec!["a".into(), "b".into(), "c".into()],
            writes: vec![],
            holders: vec![],
            logs: vec![],
            reader: None,
            recalling: vec![],
        }
    }

    const ALL: &[&str] = &["a", "b", "c"];
    const AC: &[&str] = &["a", "c"];

    #[test]
    fn a_withdrawal_needs_a_quorum_of_the_live_clusters() {
        let two = Fault::Gateway {
            gateway: 1,
            vantages: vec![0, 1],
        };
        let h = history(
            vec![(two, s(1_000), Some(s(2_000)))],
            &[(0, ALL), (1_200, AC), (2_200, ALL), (5_000, ALL)],
        );
        assert_eq!(check(&h, &BOUNDS).map(|f| f.convergence), Ok(s(200)));

        let one = Fault::Gateway {
            gateway: 1,
            vantages: vec![0],
        };
        let h = history(
            vec![(one.clone(), s(1_000), Some(s(2_000)))],
            &[(0, ALL), (1_200, AC), (2_200, ALL), (5_000, ALL)],
        );
        let v = check(&h, &BOUNDS).unwrap_err();
        assert_eq!(v[0].rule, 2, "{v:?}");

        // The same single vantage with the two other clusters killed: it is the quorum.
        let h = history(
            vec![
                (Fault::Kill(1), s(0), Some(s(3_000))),
                (Fault::Kill(2), s(0), Some(s(3_000))),
                (one, s(1_000), Some(s(2_000))),
            ],
            &[(0, ALL), (1_200, AC), (2_200, ALL), (6_000, ALL)],
        );
        assert!(check(&h, &BOUNDS).is_ok(), "{:?}", check(&h, &BOUNDS));
    }

    #[test]
    fn an_empty_answer_and_a_late_convergence_are_violations() {
        let h = history(vec![], &[(0, ALL), (100, &[]), (5_000, ALL)]);
        assert_eq!(check(&h, &BOUNDS).unwrap_err()[0].rule, 1);
        let down = Fault::Gateway {
            gateway: 1,
            vantages: vec![0, 1, 2],
        };
        let h = history(
            vec![(down, s(1_000), Some(s(1_500)))],
            &[
                (0, ALL),
                (1_200, AC),
                (4_000, AC),
                (5_000, ALL),
                (9_000, ALL),
            ],
        );
        let v = check(&h, &BOUNDS).unwrap_err();
        assert_eq!(v.last().unwrap().rule, 3, "{v:?}");
    }

    #[test]
    fn a_gateway_down_everywhere_must_leave_within_the_detection_bound() {
        let down = Fault::Gateway {
            gateway: 1,
            vantages: vec![0, 1, 2],
        };
        let h = history(
            vec![(down, s(1_000), Some(s(3_000)))],
            &[
                (0, ALL),
                (1_500, ALL),
                (2_500, AC),
                (3_200, ALL),
                (6_000, ALL),
            ],
        );
        let v = check(&h, &BOUNDS).unwrap_err();
        assert_eq!(v[0].rule, 5, "{v:?}");
    }

    #[test]
    fn a_replica_writes_only_while_the_lease_is_its_own() {
        let mut h = history(vec![], &[(0, ALL), (5_000, ALL)]);
        h.processes = vec![0, 0, 1, 2];
        h.holders = vec![(s(0), Some(0)), (s(1_000), Some(0)), (s(3_000), Some(1))];
        h.writes = vec![(s(100), 0), (s(1_900), 0), (s(3_100), 1)];
        assert!(check(&h, &BOUNDS).is_ok(), "{:?}", check(&h, &BOUNDS));
        h.writes.push((s(3_200), 0));
        let v = check(&h, &BOUNDS).unwrap_err();
        assert_eq!((v[0].rule, v[0].at), (4, s(3_200)), "{v:?}");
        h.writes = vec![(s(0), 1)];
        h.holders = vec![];
        assert_eq!(
            check(&h, &BOUNDS).unwrap_err()[0].rule,
            4,
            "before any holder"
        );
    }

    #[test]
    fn a_cluster_of_replicas_votes_while_one_of_them_runs() {
        // Cluster 0 runs as processes 0 and 1; process 0 is paused. Gateway 1 fails for
        // clusters 0 and 1: two of three clusters, a quorum, whichever replica of 0 counts.
        let two = Fault::Gateway {
            gateway: 1,
            vantages: vec![0, 1],
        };
        let mut h = history(
            vec![
                (Fault::Pause(0), s(0), Some(s(3_000))),
                (two, s(1_000), Some(s(2_000))),
            ],
            &[(0, ALL), (1_200, AC), (2_200, ALL), (6_000, ALL)],
        );
        h.processes = vec![0, 0, 1, 2];
        assert!(check(&h, &BOUNDS).is_ok(), "{:?}", check(&h, &BOUNDS));
        // Both replicas out: cluster 0 sees nothing, cluster 1 alone is no quorum of 1 and 2.
        h.faults.push((Fault::Kill(1), s(0), Some(s(3_000))));
        assert_eq!(check(&h, &BOUNDS).unwrap_err()[0].rule, 2);
    }

    #[test]
    fn a_partition_leaves_the_cut_off_clusters_out_of_a_servers_vote() {
        // Gateway 1 fails for cluster 0 alone: no quorum of three.
        let one = Fault::Gateway {
            gateway: 1,
            vantages: vec![0],
        };
        let cut = Fault::Partition {
            reader: 0,
            peer: 1,
            both: true,
        };
        let mut h = history(
            vec![(one, s(1_000), Some(s(2_000)))],
            &[(0, ALL), (1_200, AC), (2_200, ALL), (6_000, ALL)],
        );
        h.reader = Some(0);
        assert_eq!(check(&h, &BOUNDS).unwrap_err()[0].rule, 2);
        // Cut from cluster 1 (both ways), server 0 counts clusters 0 and 2: 0 alone is half,
        // not 0.66 of them.
        h.faults.push((cut.clone(), s(0), Some(s(3_000))));
        assert_eq!(check(&h, &BOUNDS).unwrap_err()[0].rule, 2);
        // Cut from both others, cluster 0 decides alone.
        let cut_c = Fault::Partition {
            reader: 2,
            peer: 0,
            both: true,
        };
        h.faults.push((cut_c, s(0), Some(s(3_000))));
        assert!(check(&h, &BOUNDS).is_ok(), "{:?}", check(&h, &BOUNDS));
        // One way only (0 cannot read 2, 2 can read 0): server 2's vote still counts 0.
        h.faults.pop();
        h.faults.push((
            Fault::Partition {
                reader: 0,
                peer: 2,
                both: false,
            },
            s(0),
            Some(s(3_000)),
        ));
        assert!(check(&h, &BOUNDS).is_ok(), "server 0 reads neither: alone");
        h.reader = Some(2);
        assert_eq!(
            check(&h, &BOUNDS).unwrap_err()[0].rule,
            2,
            "server 2 reads 0 and 1"
        );
    }

    #[test]
    fn a_cluster_losing_packets_may_see_any_gateway_down_and_count_alone() {
        // Gateway 1 withdrawn while cluster 2 loses packets: with a shared zone, its view
        // alone is no quorum; its own server may have counted alone (it may have read no
        // peer), but no other server.
        let loss = Fault::Loss(2, 50);
        let mut h = history(
            vec![(loss, s(1_000), Some(s(3_000)))],
            &[(0, ALL), (2_000, AC), (3_500, ALL), (7_000, ALL)],
        );
        assert_eq!(check(&h, &BOUNDS).unwrap_err()[0].rule, 2);
        h.reader = Some(2);
        assert!(check(&h, &BOUNDS).is_ok(), "{:?}", check(&h, &BOUNDS));
        h.reader = Some(0);
        assert_eq!(check(&h, &BOUNDS).unwrap_err()[0].rule, 2);
    }

    /// Seed 4004 (own servers, 60 s): server 1, cut from cluster 0 while 0 and 2 saw
    /// gateway 2 down, read 0's report right after the partition healed (it still said
    /// down) and withdrew the gateway with 0's and 2's votes. What 0 saw while cut off
    /// counts once it can be read; never while it cannot.
    #[test]
    fn what_a_cut_off_cluster_saw_counts_once_it_can_be_read() {
        let cut = Fault::Partition {
            reader: 0,
            peer: 1,
            both: true,
        };
        let two = Fault::Gateway {
            gateway: 2,
            vantages: vec![0, 2],
        };
        let faults = vec![
            (cut, s(1_000), Some(s(3_000))),
            (two, s(2_000), Some(s(2_900))),
        ];
        let mut h = history(
            faults,
            &[(0, ALL), (3_100, &["a", "b"]), (4_000, ALL), (9_000, ALL)],
        );
        h.reader = Some(1);
        assert!(check(&h, &BOUNDS).is_ok(), "{:?}", check(&h, &BOUNDS));
        // The same answer while 0 is still cut off rests on 2 alone: no quorum.
        h.answers[1].0 = s(2_800);
        assert_eq!(check(&h, &BOUNDS).unwrap_err()[0].rule, 2);
    }

    #[test]
    fn a_server_restarted_while_no_peer_can_tell_it_a_gateway_is_excused_it_until_one_can() {
        // Cluster 1 killed from 0 to 4 s; cluster 0 restarted at 1 s: server 0 answers
        // without gateway 1 (b) from 1.5 s, and again with it once 1 is back.
        let faults = vec![
            (Fault::Kill(1), s(0), Some(s(4_000))),
            (Fault::Kill(0), s(500), Some(s(1_000))),
        ];
        let mut h = history(faults, &[(0, ALL), (1_500, AC), (4_500, ALL), (8_000, ALL)]);
        h.reader = Some(0);
        assert_eq!(
            check(&h, &BOUNDS).unwrap_err()[0].rule,
            2,
            "cluster 2 relays 1's report"
        );
        // Cut from cluster 2 meanwhile, 0 cannot learn it.
        let cut = Fault::Partition {
            reader: 0,
            peer: 2,
            both: false,
        };
        h.faults.push((cut, s(0), Some(s(4_000))));
        assert!(check(&h, &BOUNDS).is_ok(), "{:?}", check(&h, &BOUNDS));
        // Nor when cluster 2 restarted while 1 was away too: it no longer holds 1's report.
        h.faults.pop();
        h.faults.push((Fault::Kill(2), s(100), Some(s(300))));
        assert!(check(&h, &BOUNDS).is_ok(), "{:?}", check(&h, &BOUNDS));
        // Without the restart of 0, the same answer is a withdrawal without a quorum.
        h.faults.remove(1);
        assert_eq!(check(&h, &BOUNDS).unwrap_err()[0].rule, 2);
        // And the shared zone's reader is never excused, nor a cluster that recalls.
        h.faults.push((Fault::Kill(0), s(500), Some(s(1_000))));
        h.recalling = vec![0];
        assert_eq!(check(&h, &BOUNDS).unwrap_err()[0].rule, 2);
        h.recalling = vec![];
        h.reader = None;
        assert_eq!(check(&h, &BOUNDS).unwrap_err()[0].rule, 2);
    }

    /// Seed 7 of 30 s (own servers): b restarted while c was paused, then cut off from it;
    /// a had restarted too. Without a state_dir, a knew c's gateway again only once it read
    /// c, so b's answer without it was the documented gap; a recalling c relays it to b.
    #[test]
    fn a_cluster_that_recalls_tells_a_restarted_one_what_it_knows() {
        let f = |x: Fault, a: u64, z: u64| (x, s(a), Some(s(z)));
        let faults = vec![
            f(Fault::Kill(2), 4_722, 7_053),
            f(Fault::Skew(0, "+30s"), 5_828, 9_421),
            f(Fault::Kill(1), 7_869, 9_547),
            f(Fault::Pause(2), 8_714, 11_729),
            f(
                Fault::Partition {
                    reader: 1,
                    peer: 2,
                    both: true,
                },
                10_705,
                13_623,
            ),
        ];
        let mut h = history(
            faults,
            &[
                (7_800, ALL),
                (11_800, &["a", "b"]),
                (20_000, ALL),
                (30_000, ALL),
            ],
        );
        h.reader = Some(1);
        assert!(
            check(&h, &super::super::BOUNDS).is_ok(),
            "{:?}",
            check(&h, &super::super::BOUNDS)
        );
        h.recalling = vec![0];
        assert_eq!(check(&h, &super::super::BOUNDS).unwrap_err()[0].rule, 2);
    }
}
