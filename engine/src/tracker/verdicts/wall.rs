//! Wall-clock times as a target's state keeps them: 8 bytes where a [`SystemTime`] takes
//! 16 (and an `Option` of one 16 or 24), for each of up to millions of targets.

use std::num::NonZeroU64;
use std::time::{Duration, SystemTime};

/// A wall-clock time: nanoseconds since the Unix epoch, plus one so that `Option<Wall>`
/// takes no more room than `Wall`. Exact from the epoch to the year 2554; a time before
/// the epoch reads as the epoch and one after 2554 as 2554, as every wire format here
/// clamps them ([`crate::clock::since_epoch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::tracker) struct Wall(NonZeroU64);

impl Wall {
    /// `t`, kept.
    pub(in crate::tracker) fn of(t: SystemTime) -> Wall {
        let ns = u64::try_from(crate::clock::since_epoch(t).as_nanos()).unwrap_or(u64::MAX);
        Wall(NonZeroU64::new(ns.saturating_add(1)).unwrap_or(NonZeroU64::MAX))
    }

    /// The time kept.
    pub(in crate::tracker) fn time(self) -> SystemTime {
        crate::clock::after_epoch(Duration::from_nanos(self.0.get() - 1))
    }
}

/// A certificate's expiry: whole seconds since the Unix epoch (a certificate names no
/// finer time, and may name the year 9999, beyond [`Wall`]'s range). Zero: none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(in crate::tracker) struct CertExpiry(u64);

impl CertExpiry {
    /// `t` (to the second, as probes report it), or none.
    pub(in crate::tracker) fn of(t: Option<SystemTime>) -> CertExpiry {
        CertExpiry(t.map_or(0, |t| crate::clock::since_epoch(t).as_secs().max(1)))
    }

    /// The expiry kept, if any.
    pub(in crate::tracker) fn time(self) -> Option<SystemTime> {
        (self.0 > 0).then(|| crate::clock::after_epoch(Duration::from_secs(self.0)))
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::{CertExpiry, Wall};

    /// Seeded times over the whole range a wall clock reads (and its ends): each comes back
    /// to the nanosecond, as the `SystemTime` kept before did.
    #[test]
    fn a_wall_time_comes_back_exactly() {
        let mut rng = fastrand::Rng::with_seed(0x9e37_79b9_7f4a_7c15);
        let mut next = |below: u64| rng.u64(..below);
        let end = u64::MAX - 1;
        let ends = [0, 1, end - 1, end];
        let drawn = (0..10_000).map(|i| match i % 3 {
            0 => next(end),
            1 => 1_700_000_000_000_000_000 + next(1 << 50),
            _ => next(1 << 20),
        });
        for ns in ends.into_iter().chain(drawn) {
            let t = crate::clock::after_epoch(Duration::from_nanos(ns));
            assert_eq!(Wall::of(t).time(), t, "{ns} ns");
        }
        assert_eq!(std::mem::size_of::<Option<Wall>>(), 8);
        assert_eq!(
            Wall::of(SystemTime::UNIX_EPOCH - Duration::from_secs(1)).time(),
            SystemTime::UNIX_EPOCH
        );
    }

    /// Expiries as probes report them (whole seconds after the epoch, up to the year 9999)
    /// come back exactly; none stays none.
    #[test]
    fn a_certificates_expiry_comes_back_exactly() {
        let mut rng = fastrand::Rng::with_seed(0x2545_f491_4f6c_dd1d);
        let mut next = |below: u64| rng.u64(..below);
        let year_9999 = 253_402_300_799;
        for secs in [1, year_9999]
            .into_iter()
            .chain((0..10_000).map(|_| 1 + next(year_9999)))
        {
            let t = Some(crate::clock::after_epoch(Duration::from_secs(secs)));
            assert_eq!(CertExpiry::of(t).time(), t, "{secs} s");
        }
        assert_eq!(CertExpiry::of(None).time(), None);
    }
}
