//! Timer rounds on a shared zone take turns reading it: seeded runs of three clusters at the
//! defaults (2 s rounds, 15 s TTL), peers that rewrite their reports every heartbeat (6 s:
//! the first round past a third of the TTL) from a random phase, some dying. The
//! expectations come from the script: when each peer wrote, when this cluster's reads saw it.

use super::*;

/// Round timer and report TTL of the default plan.
const INTERVAL: Duration = Duration::from_secs(2);
const TTL: Duration = Duration::from_secs(15);
/// A live cluster's heartbeat: the first 2 s round past 5 s.
const HEARTBEAT_MS: u64 = 6_000;

/// Another cluster: it writes its report every heartbeat from `phase_ms` until `dies_ms`.
struct Peer {
    id: &'static str,
    address: &'static str,
    phase_ms: u64,
    dies_ms: Option<u64>,
}

impl Peer {
    /// When its report was last written, `t_ms` into the run (before it: negative).
    fn stamp(&self, t_ms: u64) -> i64 {
        let t = self.dies_ms.map_or(t_ms, |d| t_ms.min(d)) as i64;
        let (h, phase) = (HEARTBEAT_MS as i64, self.phase_ms as i64);
        (t - phase).div_euclid(h) * h + phase
    }
}

/// One run's record: per timer round, whether it read and how many reports it wrote; the
/// tallies of the reads, with when (ms into the run) each was counted.
#[derive(Default)]
struct Record {
    reads: Vec<bool>,
    writes: Vec<usize>,
    tallies: Vec<(u64, Arc<Tally>)>,
}

/// Cluster `id` started at `phase` past the fixed wall time, with `peers`, for `rounds`
/// timer rounds a `report_interval` apart; every exchange answered with the peers' reports
/// as last written. `view_changes`: rounds after which this cluster's view flips.
fn run_rounds(
    id: &str,
    phase: Duration,
    peers: &[Peer],
    rounds: usize,
    view_changes: &[usize],
) -> Record {
    let mut run = Run::started_as(id, phase, Health::Up);
    let start = run.now.clock.mono;
    let mut record = Record::default();
    let mut health = Health::Up;
    let answer_all = |run: &mut Run, record: &mut Record| {
        let t_ms = run
            .now
            .clock
            .mono
            .saturating_duration_since(start)
            .as_millis() as u64;
        while !run.rounds.is_empty() {
            let others: Vec<Report> = peers
                .iter()
                .map(|p| {
                    let age = Duration::from_millis((t_ms as i64 - p.stamp(t_ms)) as u64);
                    run.report(p.id, age, &[p.address], &[])
                })
                .collect();
            let voted = run.voted.len();
            run.answer(&others, false);
            let counted = run.voted[voted..].iter().map(|t| (t_ms, t.clone()));
            record.tallies.extend(counted);
        }
    };
    answer_all(&mut run, &mut record);
    for round in 0..rounds {
        run.advance(INTERVAL);
        let started = run.written.len();
        run.step(RoundsCore::tick);
        let timer_round = run.rounds.first();
        record.reads.push(timer_round.is_some_and(|r| r.read));
        record.writes.push(run.written[started..].iter().sum());
        answer_all(&mut run, &mut record);
        if view_changes.contains(&round) {
            health = if health == Health::Up {
                Health::Down
            } else {
                Health::Up
            };
            run.view(health);
            let changed = run.rounds.first().expect("a changed view starts a round");
            assert!(
                changed.read && changed.writes.len() == 1,
                "read and written at once"
            );
            answer_all(&mut run, &mut record);
        }
    }
    record
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Three clusters started at the same random wall-clock phase, peers live throughout:
/// after the first reads, each reads every third round and no two read in the same round;
/// each writes one heartbeat every three rounds, whether it reads or not; a view change
/// reads at once and leaves the turns as they were.
#[test]
fn three_clusters_read_in_turn_and_heartbeat_in_between() {
    let mut rng = fastrand::Rng::with_seed(0x7075);
    for _ in 0..30 {
        let phase = ms(rng.u64(0..60_000));
        let ids = ["c1", "c2", "c3"];
        let addresses = ["10.9.9.1", "10.9.9.2", "10.9.9.3"];
        let phases: Vec<u64> = (0..3).map(|_| rng.u64(0..HEARTBEAT_MS)).collect();
        let changes = [rng.usize(5..25)];
        let reads: Vec<Vec<bool>> = (0..3)
            .map(|me| {
                let peers: Vec<Peer> = (0..3)
                    .filter(|&p| p != me)
                    .map(|p| Peer {
                        id: ids[p],
                        address: addresses[p],
                        phase_ms: phases[p],
                        dies_ms: None,
                    })
                    .collect();
                let record = run_rounds(ids[me], phase, &peers, 30, &changes);
                let heartbeats = record.writes[3..].iter().filter(|&&w| w > 0).count();
                assert!(
                    (8..=10).contains(&heartbeats),
                    "{}: {:?}",
                    ids[me],
                    record.writes
                );
                record.reads
            })
            .collect();
        for round in 3..30 {
            let readers = (0..3).filter(|&c| reads[c][round]).count();
            assert_eq!(readers, 1, "round {round}: {reads:?}");
        }
    }
}

/// A peer that dies (its report stops changing) ages out of this cluster's count at its
/// first round more than `report_ttl` after this cluster first read its last report, and
/// no later than one round after that, though this cluster reads only in its turn; its
/// address stays a candidate and no count is ever empty.
#[test]
fn a_dead_peer_ages_out_within_the_ttl_and_one_round() {
    let mut rng = fastrand::Rng::with_seed(0xdead);
    for _ in 0..50 {
        let phase = ms(rng.u64(0..60_000));
        let dies = rng.u64(10_000..40_000);
        let peers = [
            Peer {
                id: "c2",
                address: "10.9.9.2",
                phase_ms: rng.u64(0..HEARTBEAT_MS),
                dies_ms: None,
            },
            Peer {
                id: "c3",
                address: "10.9.9.3",
                phase_ms: rng.u64(0..HEARTBEAT_MS),
                dies_ms: Some(dies),
            },
        ];
        let record = run_rounds("c1", phase, &peers, 40, &[]);
        let last_write = peers[1].stamp(dies);
        // This cluster's first read of c3's last report: the first read at or after it.
        let seen = (record.tallies.iter())
            .map(|(t, _)| *t)
            .find(|&t| t as i64 >= last_write)
            .expect("read after c3's last write");
        let out = (record.tallies.iter())
            .find(|(_, tally)| tally.aged_out.iter().any(|c| c == "c3"))
            .map(|(t, _)| *t)
            .expect("c3 ages out");
        let ttl = TTL.as_millis() as u64;
        let interval = INTERVAL.as_millis() as u64;
        assert!(
            out > seen + ttl && out <= seen + ttl + interval,
            "seen {seen} out {out}"
        );
        for (t, tally) in &record.tallies {
            let c3 = tally
                .addresses
                .iter()
                .find(|a| a.address.to_string() == "10.9.9.3");
            assert!(c3.is_some_and(|a| a.kept), "at {t}: {tally:?}");
            assert_eq!(
                tally.live.iter().any(|c| c == "c3"),
                *t <= seen + ttl,
                "at {t}"
            );
        }
    }
}
