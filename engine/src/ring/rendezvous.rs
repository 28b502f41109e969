//! Which members own a target: rendezvous (highest-random-weight) hashing. Every member
//! scores every target, and the `replication` highest scores own it. A join takes from each
//! other member only the targets the newcomer now outscores it on (about 1/N of them); a
//! leave hands only the leaver's targets to their next-best members. consul-esm's
//! `node mod instances` moves nearly every check on any change; this moves the minimum.
//!
//! The hash is written out here, not taken from `std`: every replica, whatever its Rust
//! version, must compute the same owners for the same target key.

/// A target's place on the ring, from its stable key ([`ho_config::Target::key`]).
pub fn target_hash(key: &str) -> u64 {
    fnv1a(key.as_bytes())
}

/// A member's identity, hashed once.
pub fn member_hash(identity: &str) -> u64 {
    mix(fnv1a(identity.as_bytes()))
}

/// The member's score for a target: the highest scores own it.
fn score(member: u64, target: u64) -> u64 {
    mix(member ^ target.rotate_left(29))
}

/// The indices into `members` (their [`member_hash`]es) of the `replication` members owning
/// `target`, best first; all of them when there are fewer.
pub fn owners(target: u64, members: &[u64], replication: usize) -> Vec<usize> {
    // Insertion into a list of the best so far: `replication` is small (2 or 3).
    let mut best: Vec<(u64, usize)> = Vec::with_capacity(replication + 1);
    for (i, m) in members.iter().enumerate() {
        let s = score(*m, target);
        if best.len() == replication && best.last().is_some_and(|(low, _)| *low >= s) {
            continue;
        }
        let at = best.partition_point(|(b, _)| *b > s);
        best.insert(at, (s, i));
        best.truncate(replication);
    }
    best.into_iter().map(|(_, i)| i).collect()
}

/// FNV-1a, 64 bits.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// splitmix64's finaliser: spreads FNV's weak low bits over the whole word.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hash is part of the protocol between replicas: a change here would split a ring
    /// of mixed versions into two views of ownership.
    #[test]
    fn the_hash_is_fixed_across_versions() {
        assert_eq!(target_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(
            target_hash("http://10.0.0.1:80/healthz"),
            4_723_567_015_814_266_268
        );
        assert_eq!(
            owners(target_hash("tcp://10.0.0.7:443"), &members(5), 2),
            vec![3, 2]
        );
    }

    fn members(n: usize) -> Vec<u64> {
        (0..n).map(|i| member_hash(&format!("ho-{i}"))).collect()
    }

    #[test]
    fn owners_are_distinct_and_as_many_as_asked() {
        let m = members(4);
        for t in 0..1000u64 {
            let o = owners(mix(t), &m, 2);
            assert_eq!(o.len(), 2);
            assert_ne!(o[0], o[1]);
        }
        assert_eq!(owners(1, &m[..1], 2), vec![0]);
        assert!(owners(1, &[], 2).is_empty());
    }

    /// Removing a member changes the owners only of the targets it owned, and adding it
    /// back restores them exactly.
    #[test]
    fn a_leave_moves_only_the_leavers_targets() {
        let all = members(6);
        let without: Vec<u64> = all.iter().copied().filter(|m| *m != all[2]).collect();
        for t in 0..5000u64 {
            let before: Vec<u64> = owners(mix(t), &all, 2).iter().map(|i| all[*i]).collect();
            let after: Vec<u64> = owners(mix(t), &without, 2)
                .iter()
                .map(|i| without[*i])
                .collect();
            if !before.contains(&all[2]) {
                assert_eq!(before, after, "target {t} moved without its owner leaving");
            } else {
                let kept = before.iter().find(|m| **m != all[2]).unwrap();
                assert!(
                    after.contains(kept),
                    "target {t}: the remaining owner lost it"
                );
            }
        }
    }
}
