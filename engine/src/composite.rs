//! An endpoint judged by several checks (`checks`, `require`, `must_pass`): each check is
//! a target with its own hysteresis, and the endpoint's verdict is a count of theirs, as
//! Cloudflare's monitor groups and F5's dependency lists decide.
//!
//! A check still without a verdict counts as neither: the endpoint is up once enough
//! checks are up, down once too few can still be, unknown in between, so a composite
//! endpoint waits at start-up exactly as a single check does.

use ho_config::{Composite, Endpoint};

use crate::hysteresis::Health;

/// The verdict of `endpoint` given each target's health (`health(target index)`): its
/// one check's, or its checks' combined.
pub fn combine(endpoint: &Endpoint, health: impl Fn(usize) -> Health) -> Health {
    let also = (endpoint.composite().into_iter()).flat_map(|c| c.also.iter().map(|&t| health(t)));
    combine_healths(health(endpoint.target()), also, endpoint.composite())
}

/// The verdict of an endpoint whose first check (`Endpoint::target`) is `first` and whose
/// other checks (`Composite::also`, in order) are `also`: the first alone without a
/// `composite`. The tracker and the availability ledger judge endpoints by this one rule.
pub fn combine_healths(
    first: Health,
    also: impl Iterator<Item = Health>,
    composite: Option<&Composite>,
) -> Health {
    let Some(composite) = composite else {
        return first;
    };
    if composite.must_pass && first == Health::Down {
        return Health::Down;
    }
    let (mut up, mut unknown) = (0, 0);
    for h in std::iter::once(first).chain(also) {
        match h {
            Health::Up => up += 1,
            Health::Unknown => unknown += 1,
            Health::Down => {}
        }
    }
    let needed = composite.needed();
    if up >= needed && (!composite.must_pass || first == Health::Up) {
        Health::Up
    } else if up + unknown < needed {
        Health::Down
    } else {
        Health::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ho_config::{Composite, EndpointExtras, Require};
    use Health::{Down, Unknown, Up};

    fn endpoint(require: Require, must_pass: bool) -> Endpoint {
        Endpoint::new("gw", "192.0.2.1".parse().unwrap(), 0).with_extras(EndpointExtras {
            composite: Some(Composite {
                also: vec![1, 2],
                require,
                must_pass,
            }),
            ..EndpointExtras::default()
        })
    }

    fn verdict(ep: &Endpoint, checks: [Health; 3]) -> Health {
        combine(ep, |t| checks[t])
    }

    #[test]
    fn all_any_and_quorum_count_the_checks_up() {
        let all = endpoint(Require::All, false);
        assert_eq!(verdict(&all, [Up, Up, Up]), Up);
        assert_eq!(verdict(&all, [Up, Down, Up]), Down);
        assert_eq!(verdict(&all, [Up, Unknown, Up]), Unknown);
        let any = endpoint(Require::Any, false);
        assert_eq!(verdict(&any, [Down, Down, Up]), Up);
        assert_eq!(verdict(&any, [Down, Down, Down]), Down);
        assert_eq!(verdict(&any, [Down, Unknown, Down]), Unknown);
        let two = endpoint(Require::Quorum { quorum: 2 }, false);
        assert_eq!(verdict(&two, [Down, Up, Up]), Up);
        assert_eq!(verdict(&two, [Down, Up, Down]), Down);
        assert_eq!(verdict(&two, [Unknown, Up, Down]), Unknown);
    }

    #[test]
    fn a_must_pass_check_decides_alone_when_it_fails() {
        let ep = endpoint(Require::Quorum { quorum: 1 }, true);
        assert_eq!(
            verdict(&ep, [Down, Up, Up]),
            Down,
            "its failure is the endpoint's"
        );
        assert_eq!(verdict(&ep, [Unknown, Up, Up]), Unknown, "up waits for it");
        assert_eq!(
            verdict(&ep, [Up, Down, Down]),
            Up,
            "itself one of the quorum"
        );
        let two = endpoint(Require::Quorum { quorum: 2 }, true);
        assert_eq!(
            verdict(&two, [Up, Down, Down]),
            Down,
            "and a quorum still needed"
        );
    }

    #[test]
    fn one_check_is_its_own_verdict() {
        let ep = endpoint(Require::All, false).with_extras(EndpointExtras::default());
        for h in [Up, Down, Unknown] {
            assert_eq!(verdict(&ep, [h, Down, Down]), h);
        }
    }
}
