//! When a timer round reads a shared zone. Every cluster's read lists the same reports, so
//! the clusters take turns: with `n` live clusters, each reads every `n` rounds, in the
//! round of the wall-clock slot (`report_interval` wide) its rank among them names, and the
//! zone sees about one read per `report_interval` whatever the number of clusters. A
//! cluster still reads at once when its own view changes (its round writes and reads, so
//! the cluster that completes a quorum learns it in the round that completes it), and at
//! every round while a peer's report is about to age out (so a dead cluster leaves the
//! count at the first round past `report_ttl`, as when every round read). Clocks that
//! disagree only put the turns out of phase: a cluster whose slot did not come reads
//! `n + 1/2` rounds after its last read anyway.

use std::time::Duration;

/// What the decision needs to know of the zone's clusters and of this reader.
#[derive(Debug, Clone, Copy)]
pub(super) struct Turns {
    /// `report_interval`: the round timer's period and a slot's width.
    pub interval: Duration,
    /// `report_ttl`.
    pub ttl: Duration,
    /// Live clusters in the zone, this one included (at least 1).
    pub members: usize,
    /// This cluster's place among them, by cluster id.
    pub rank: usize,
}

impl Turns {
    /// Rounds between this cluster's reads: one per live cluster, but at least two reads a
    /// `report_ttl`, so a count (which stands for `report_ttl`) is renewed before it lapses
    /// even with one read failed.
    pub fn every(&self) -> u64 {
        let cap = (self.ttl.as_millis() / (2 * self.interval.as_millis().max(1))) as u64;
        (self.members as u64).clamp(1, cap.max(1))
    }

    /// Whether the timer round at wall time `wall_ms` reads, `since_read` after the last
    /// successful read, with the oldest live peer's report unchanged for `oldest_peer`.
    pub fn reads(&self, wall_ms: u64, since_read: Duration, oldest_peer: Duration) -> bool {
        let every = self.every();
        let interval_ms = self.interval.as_millis().max(1) as u64;
        let slot = wall_ms / interval_ms;
        let my_turn = slot % every == self.rank as u64 % every && since_read >= self.interval / 2;
        let overdue = since_read >= self.interval * every as u32 + self.interval / 2;
        let peer_ageing = oldest_peer + self.interval > self.ttl;
        my_turn || overdue || peer_ageing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Seeded runs of ticks every interval from a random wall-clock phase, with reads
    /// skipped where the rule says: each of `n` members reads exactly once every `n`
    /// ticks, in its own slot, and no two members read in the same slot.
    #[test]
    fn members_take_turns_one_read_a_slot() {
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..200 {
            let n = rng.usize(1..6);
            let turns = |rank| Turns {
                interval: ms(300),
                ttl: ms(300 * 2 * 6),
                members: n,
                rank,
            };
            let phase = rng.u64(0..300);
            let start = rng.u64(1_000_000..2_000_000) * 300 + phase;
            let mut readers_by_slot = vec![Vec::new(); 6 * n];
            for rank in 0..n {
                let (mut last, mut reads): (Option<u64>, usize) = (None, 0);
                for tick in 0..6 * n as u64 {
                    let wall = start + tick * 300;
                    let since = last.map_or(Duration::MAX / 2, |l| ms(wall - l));
                    if turns(rank).reads(wall, since, Duration::ZERO) {
                        // The first read is anywhere; the turns start with the second.
                        if let (Some(l), true) = (last, reads >= 2) {
                            assert_eq!(wall - l, n as u64 * 300, "n {n} rank {rank}");
                        }
                        (last, reads) = (Some(wall), reads + 1);
                        readers_by_slot[tick as usize].push(rank);
                    }
                }
            }
            // After each member's first read (anywhere), one read a slot.
            for (tick, readers) in readers_by_slot.iter().enumerate().skip(1) {
                assert_eq!(readers.len(), 1, "n {n}, tick {tick}: {readers:?}");
            }
        }
    }

    /// At least two reads a TTL (2 s rounds, 15 s TTL: every 3 rounds at most), whatever
    /// the number of members.
    #[test]
    fn reads_renew_the_count_twice_a_ttl() {
        for members in 1..40 {
            let turns = Turns {
                interval: ms(2000),
                ttl: ms(15_000),
                members,
                rank: 0,
            };
            assert_eq!(turns.every(), members.min(3) as u64);
        }
    }

    /// A peer unchanged for a TTL less one interval makes every round read; an overdue
    /// read happens whatever the slot.
    #[test]
    fn an_ageing_peer_or_a_missed_turn_reads() {
        let turns = Turns {
            interval: ms(300),
            ttl: ms(2000),
            members: 3,
            rank: 1,
        };
        let not_my_slot = 300 * 3_000_000; // slot % 3 == 0
        assert!(!turns.reads(not_my_slot, ms(300), ms(1600)));
        assert!(turns.reads(not_my_slot, ms(300), ms(1701)));
        assert!(!turns.reads(not_my_slot, ms(1049), ms(0)));
        assert!(turns.reads(not_my_slot, ms(1050), ms(0)));
        assert!(turns.reads(not_my_slot + 300, ms(300), ms(0)));
        assert!(!turns.reads(not_my_slot + 300, ms(100), ms(0)));
    }
}
