//! The time every decision core is handed: the cores (tracker, delivery, report rounds)
//! never read a clock or the writer fence themselves, so their tests move time by hand and
//! their shells pass the real one.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Serialize, Serializer};

use tokio::time::Instant;

/// The time the caller passes in: monotonic for timers and pacing, wall clock for what
/// operators and receivers read (`since`, `seq`, `decided_at`).
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    /// Monotonic now.
    pub mono: Instant,
    /// Wall-clock now.
    pub wall: SystemTime,
}

impl Clock {
    /// The real time.
    pub fn now() -> Clock {
        Clock {
            mono: Instant::now(),
            wall: SystemTime::now(),
        }
    }

    /// This clock moved on by `d`: how the cores' tests move time.
    #[cfg(test)]
    pub fn after(self, d: std::time::Duration) -> Clock {
        Clock {
            mono: self.mono + d,
            wall: self.wall + d,
        }
    }
}

/// The moment a shell passes to a core that writes shared back ends: the time, and whether
/// the writer fence (leader election) is open now. The fence is read by the shell because
/// it closes by itself when a renewal is late, with no event to tell the core.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Now {
    /// The time.
    pub clock: Clock,
    /// Whether this replica may write shared back ends now.
    pub writer: bool,
}

/// Seconds since the Unix epoch, with sub-second precision: for metrics gauges
/// (`*_timestamp_seconds`), which Prometheus wants as numbers.
pub fn unix_seconds(t: SystemTime) -> f64 {
    since_epoch(t).as_secs_f64()
}

/// Time since the Unix epoch (zero before it): the one conversion of a wall-clock time into
/// the numbers wire formats and files carry (TSIG and RRSIG times, cookies, SOA serials,
/// report and heartbeat milliseconds, snapshot sequence numbers, metrics gauges).
pub fn since_epoch(t: SystemTime) -> Duration {
    t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO)
}

/// Whole seconds since the Unix epoch, now: what TSIG, RRSIG and webhook signatures carry.
pub fn unix_now() -> u64 {
    since_epoch(SystemTime::now()).as_secs()
}

/// The wall-clock time `d` after the Unix epoch: what a file, a report or a certificate names.
pub fn after_epoch(d: Duration) -> SystemTime {
    UNIX_EPOCH + d
}

/// Milliseconds since the Unix epoch: the availability ledger's and the canary's times.
pub fn unix_millis(t: SystemTime) -> u64 {
    since_epoch(t).as_millis() as u64
}

/// The [`Timestamp`] of [`unix_millis`] `ms`.
pub fn at_unix_millis(ms: u64) -> Timestamp {
    Timestamp(after_epoch(Duration::from_millis(ms)))
}

/// A point in time as people and scripts read it: RFC 3339 in UTC with milliseconds
/// (`2026-11-25T03:12:45.123Z`), the one format of every timestamp in `/status` and
/// `/events`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Timestamp(pub SystemTime);

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_rfc3339_millis(self.0))
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}
