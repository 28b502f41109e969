//! A name's history over a window: the intervals its changes make, the time spent in
//! each condition, and the availability figures operators quote.

use serde::Serialize;

use super::book::{Condition, Served};
use crate::clock::Timestamp;

/// One stretch of one condition, `[from, to)` in unix milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Start.
    pub from: u64,
    /// End (exclusive).
    pub to: u64,
    /// The condition throughout.
    pub condition: Condition,
}

/// The stretches that `changes` (time-ordered, each the condition from its time on; the
/// time before the first is unknown) make within `[from, to)`.
pub fn spans(changes: &[(u64, Condition)], from: u64, to: u64) -> Vec<Span> {
    let start = changes.partition_point(|(at, _)| *at <= from);
    let mut condition = start
        .checked_sub(1)
        .map_or(Condition::UNKNOWN, |i| changes[i].1);
    let mut at = from;
    let mut out = Vec::new();
    for &(next, c) in changes[start..].iter().take_while(|(t, _)| *t < to) {
        if next > at {
            out.push(Span {
                from: at,
                to: next,
                condition,
            });
        }
        at = next;
        condition = c;
    }
    if to > at {
        out.push(Span {
            from: at,
            to,
            condition,
        });
    }
    out
}

/// Milliseconds spent in each condition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    ms: [u64; 16],
}

impl Tally {
    /// The tally of `spans`.
    pub fn of(spans: &[Span]) -> Tally {
        let mut tally = Tally::default();
        for s in spans {
            tally.ms[usize::from(s.condition.code())] += s.to - s.from;
        }
        tally
    }

    /// Milliseconds served as `served`, in maintenance or not (`None`: both).
    fn ms(&self, served: Served, maintenance: Option<bool>) -> u64 {
        [false, true]
            .into_iter()
            .filter(|m| maintenance.is_none_or(|want| want == *m))
            .map(|m| {
                let c = Condition {
                    served,
                    maintenance: m,
                };
                self.ms[usize::from(c.code())]
            })
            .sum()
    }

    /// Answered over known time, or `None` when nothing was known; `outside_maintenance`
    /// leaves the time an operator held an endpoint out of both.
    fn availability(&self, outside_maintenance: bool) -> Option<f64> {
        let only = outside_maintenance.then_some(false);
        let good = self.ms(Served::Answered, only);
        let bad = [
            Served::DeadAddress,
            Served::Unanswered,
            Served::WrongAddress,
        ];
        let known = good + bad.iter().map(|&s| self.ms(s, only)).sum::<u64>();
        (known > 0).then(|| good as f64 / known as f64)
    }

    /// The figures as `/v1/availability` shows them.
    pub fn figures(&self) -> Figures {
        let secs = |served, m| self.ms(served, m) as f64 / 1000.0;
        Figures {
            availability: self.availability(false),
            availability_outside_maintenance: self.availability(true),
            seconds_answered: secs(Served::Answered, None),
            seconds_dead_address: secs(Served::DeadAddress, None),
            seconds_unanswered: secs(Served::Unanswered, None),
            seconds_wrong_address: secs(Served::WrongAddress, None),
            seconds_maintenance: (Served::KNOWN.into_iter())
                .map(|s| secs(s, Some(true)))
                .sum(),
            seconds_unknown: secs(Served::Unknown, None),
        }
    }
}

/// A window's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figures {
    /// Share of the known time the name answered with live addresses only (`null`: no
    /// time known).
    pub availability: Option<f64>,
    /// The same with the time an operator held one of its endpoints left out.
    pub availability_outside_maintenance: Option<f64>,
    /// Seconds answered with live addresses only.
    pub seconds_answered: f64,
    /// Seconds a dead address was served.
    pub seconds_dead_address: f64,
    /// Seconds a back end answered nothing.
    pub seconds_unanswered: f64,
    /// Seconds an address no decision in force included was served.
    pub seconds_wrong_address: f64,
    /// Seconds an operator held one of its endpoints (in the three above as well).
    pub seconds_maintenance: f64,
    /// Seconds not recorded (the orchestrator stopped, or before the name's first write).
    pub seconds_unknown: f64,
}

/// A stretch as `/v1/availability` lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Interval {
    /// Start (RFC 3339).
    pub from: Timestamp,
    /// End (RFC 3339).
    pub to: Timestamp,
    /// `answered`, `dead_address`, `unanswered` or `unknown`.
    pub served: &'static str,
    /// An operator held one of the name's endpoints.
    pub maintenance: bool,
}

impl From<&Span> for Interval {
    fn from(s: &Span) -> Interval {
        let at = |ms| crate::clock::at_unix_millis(ms);
        Interval {
            from: at(s.from),
            to: at(s.to),
            served: s.condition.served.as_str(),
            maintenance: s.condition.maintenance,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: Condition = Condition {
        served: Served::Answered,
        maintenance: false,
    };
    const DEAD: Condition = Condition {
        served: Served::DeadAddress,
        maintenance: false,
    };
    const HELD_DEAD: Condition = Condition {
        served: Served::DeadAddress,
        maintenance: true,
    };

    #[test]
    fn spans_cut_the_changes_to_the_window() {
        let changes = [(1_000, OK), (5_000, DEAD), (6_000, OK), (9_000, HELD_DEAD)];
        let got = spans(&changes, 0, 8_000);
        let want = [
            Span {
                from: 0,
                to: 1_000,
                condition: Condition::UNKNOWN,
            },
            Span {
                from: 1_000,
                to: 5_000,
                condition: OK,
            },
            Span {
                from: 5_000,
                to: 6_000,
                condition: DEAD,
            },
            Span {
                from: 6_000,
                to: 8_000,
                condition: OK,
            },
        ];
        assert_eq!(got, want);
        assert_eq!(
            spans(&changes, 5_500, 10_000),
            [
                Span {
                    from: 5_500,
                    to: 6_000,
                    condition: DEAD
                },
                Span {
                    from: 6_000,
                    to: 9_000,
                    condition: OK
                },
                Span {
                    from: 9_000,
                    to: 10_000,
                    condition: HELD_DEAD
                },
            ]
        );
    }

    #[test]
    fn availability_leaves_unknown_time_out_and_maintenance_out_when_asked() {
        let changes = [(1_000, OK), (5_000, DEAD), (6_000, OK), (9_000, HELD_DEAD)];
        let figures = Tally::of(&spans(&changes, 0, 10_000)).figures();
        assert_eq!(figures.seconds_unknown, 1.0);
        assert_eq!(figures.seconds_dead_address, 2.0);
        assert_eq!(figures.seconds_maintenance, 1.0);
        assert_eq!(figures.availability, Some(7.0 / 9.0));
        assert_eq!(figures.availability_outside_maintenance, Some(7.0 / 8.0));
        assert_eq!(Tally::default().figures().availability, None);
    }
}
