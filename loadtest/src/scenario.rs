//! Fault scenarios: which share of the farm misbehaves how, when, and for how long.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use ho_testkit::Behaviour;

/// A scenario file: `[[fault]]` tables.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Faults, applied to disjoint groups of endpoints in file order.
    #[serde(default, rename = "fault")]
    pub faults: Vec<Fault>,
}

/// How a faulty endpoint misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// The listener closes: connections are refused.
    Refuse,
    /// HTTP 503.
    Status,
    /// RST right after accept.
    Reset,
    /// Accept and never answer.
    Hang,
    /// Down and up again every half `period`.
    Flap,
}

/// One fault.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    /// What happens.
    pub kind: FaultKind,
    /// Share of the endpoints (0.0-1.0) it hits.
    pub share: f64,
    /// When, from the start of the measured window.
    #[serde(with = "humantime_serde")]
    pub at: Duration,
    /// How long; the endpoints are healthy again afterwards.
    #[serde(with = "humantime_serde")]
    pub duration: Duration,
    /// `flap` only: a full down-up cycle.
    #[serde(default, with = "humantime_serde::option")]
    pub period: Option<Duration>,
}

impl Fault {
    /// The misbehaviour (for `flap`, the down half).
    pub fn behaviour(&self) -> Behaviour {
        match self.kind {
            FaultKind::Refuse | FaultKind::Flap => Behaviour::Refuse,
            FaultKind::Status => Behaviour::Status(503),
            FaultKind::Reset => Behaviour::Reset,
            FaultKind::Hang => Behaviour::Hang,
        }
    }
}

impl Scenario {
    /// Reads and checks a scenario file.
    pub fn load(path: &Path) -> anyhow::Result<Scenario> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let scenario: Scenario =
            toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let total: f64 = scenario.faults.iter().map(|f| f.share).sum();
        for (i, f) in scenario.faults.iter().enumerate() {
            anyhow::ensure!(
                (0.0..=1.0).contains(&f.share),
                "fault[{i}].share: {} is not between 0 and 1",
                f.share
            );
            anyhow::ensure!(
                f.kind != FaultKind::Flap || f.period.is_some_and(|p| !p.is_zero()),
                "fault[{i}].period: a flap needs a period"
            );
        }
        anyhow::ensure!(
            total <= 1.0,
            "the shares add up to {total}, more than the whole farm"
        );
        Ok(scenario)
    }
}
