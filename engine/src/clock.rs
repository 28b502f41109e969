//! The time every decision core is handed: the cores (tracker, delivery) never read a clock
//! themselves, so their tests move time by hand and their shells pass the real one.

use std::time::{Duration, SystemTime};

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

    /// This clock moved on by `d` (tests, and deriving deadlines).
    pub fn after(self, d: Duration) -> Clock {
        Clock {
            mono: self.mono + d,
            wall: self.wall + d,
        }
    }
}
