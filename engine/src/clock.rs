//! The time every decision core is handed: the cores (tracker, delivery, report rounds)
//! never read a clock or the writer fence themselves, so their tests move time by hand and
//! their shells pass the real one.

use std::time::SystemTime;

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
