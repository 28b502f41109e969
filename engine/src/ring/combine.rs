//! One verdict from several owners' vantages: **fail fast, recover on agreement**. A target
//! is down as soon as one owner with a sound vantage judges it down, and up again once every
//! owner with a verdict judges it up. Within one cluster the owners are replicas for
//! availability, not a quorum (the vote across clusters is `[multi_cluster]`'s): each owner
//! already applied the check's hysteresis, so one owner's down verdict is as strong as the
//! single replica's is today, and detection takes the sooner of two owners' probes. Waiting
//! for both to agree on the way up is the same asymmetry as `rise` against `fall`.
//!
//! A vantage the self-check judges impaired never withdraws alone: its down verdicts are
//! set aside (its up verdicts still count: it reached the target). A target no sound owner
//! has a verdict for keeps its last one.

use crate::hysteresis::Health;

/// One owner's verdict on a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vantage {
    pub health: Health,
    /// The owner's self-check judges its own network impaired.
    pub impaired: bool,
}

/// The target's verdict from its owners' vantages; `last` when none speaks.
pub fn combine(vantages: impl IntoIterator<Item = Vantage>, last: Health) -> Health {
    let mut up = false;
    for v in vantages {
        match v.health {
            Health::Down if !v.impaired => return Health::Down,
            Health::Up => up = true,
            _ => {}
        }
    }
    if up {
        Health::Up
    } else {
        last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(health: Health, impaired: bool) -> Vantage {
        Vantage { health, impaired }
    }

    #[test]
    fn one_sound_down_withdraws_and_every_up_restores() {
        use Health::*;
        assert_eq!(combine([v(Up, false), v(Down, false)], Up), Down);
        assert_eq!(combine([v(Up, false), v(Up, false)], Down), Up);
        assert_eq!(combine([v(Up, false), v(Unknown, false)], Down), Up);
        assert_eq!(combine([v(Unknown, false)], Down), Down, "no verdict: last");
        assert_eq!(combine([], Up), Up, "owners gone: last");
    }

    #[test]
    fn an_impaired_vantage_never_withdraws_alone() {
        use Health::*;
        assert_eq!(combine([v(Down, true)], Up), Up);
        assert_eq!(combine([v(Down, true), v(Up, false)], Down), Up);
        assert_eq!(combine([v(Down, true), v(Down, false)], Up), Down);
        assert_eq!(combine([v(Up, true)], Down), Up, "it reached the target");
    }
}
