//! The night's script, drawn from a seed, and the test's own account of it: which name was
//! in which condition for how many seconds, by the script's clock and `dig`, kept apart
//! from anything the engine computes.

use std::collections::BTreeMap;
use std::time::SystemTime;

/// The names of the night, each the one name of its tenant.
pub const WEB: &str = "www.night.test";
pub const MAIL: &str = "smtp.night.test";
pub const API: &str = "api.night.test";
pub const NAMES: [&str; 3] = [WEB, MAIL, API];

/// The gateways: `Shared` carries an HTTP-checked web endpoint and a TCP-checked mail
/// endpoint (one host, two services); each name has one gateway of its own besides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gw {
    Shared,
    Web,
    Mail,
    Api1,
    Api2,
}

pub const GATEWAYS: [Gw; 5] = [Gw::Shared, Gw::Web, Gw::Mail, Gw::Api1, Gw::Api2];

/// `(endpoint, gateway, check kind, name)`: the endpoints of the config.
pub const ENDPOINTS: [(&str, Gw, &str, &str); 6] = [
    ("web-1", Gw::Shared, "http", WEB),
    ("web-2", Gw::Web, "http", WEB),
    ("mail-1", Gw::Shared, "tcp", MAIL),
    ("mail-2", Gw::Mail, "tcp", MAIL),
    ("api-1", Gw::Api1, "http", API),
    ("api-2", Gw::Api2, "http", API),
];

/// One step of the night. `hold`: how many of each replica's canary questions the step's
/// condition lasts once in place (2 to 4, about 0.4 to 0.8 s).
#[derive(Debug, Clone)]
pub enum Step {
    /// The shared gateway answers HTTP 503 with its port open: the web name's endpoint
    /// there fails, the mail name's TCP check there passes.
    Http503 { hold: u32 },
    /// A gateway of one name refuses connections.
    Refuse { gateway: Gw, hold: u32 },
    /// PowerDNS edited by hand to serve an address nobody probes for `name`.
    HandEdit { name: &'static str, hold: u32 },
    /// A delegation put in front of `name` in PowerDNS: a referral.
    Referral { name: &'static str, hold: u32 },
    /// A record that makes PowerDNS answer SERVFAIL for `name`.
    Servfail { name: &'static str, hold: u32 },
    /// An operator drains `endpoint` through replica `via`, undrains it through the other.
    Drain {
        endpoint: &'static str,
        via: usize,
        hold: u32,
    },
}

/// The seed: `HO_SEED` to replay one, else drawn (and printed by the test).
pub fn seed() -> u64 {
    match std::env::var("HO_SEED").ok().filter(|s| !s.is_empty()) {
        Some(s) => s
            .parse()
            .unwrap_or_else(|_| panic!("HO_SEED={s}: not a number")),
        None => fastrand::u64(..),
    }
}

/// The steps of `seed`: one of each kind, in a drawn order, each on a drawn name, gateway or
/// endpoint, held for a drawn number of canary questions.
pub fn script(seed: u64) -> Vec<Step> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut hold = || rng.u32(2..=4);
    let holds: Vec<u32> = (0..6).map(|_| hold()).collect();
    let mut rng = fastrand::Rng::with_seed(seed.rotate_left(17));
    let own = [Gw::Web, Gw::Mail, Gw::Api1, Gw::Api2];
    let mut steps = vec![
        Step::Http503 { hold: holds[0] },
        Step::Refuse {
            gateway: own[rng.usize(..own.len())],
            hold: holds[1],
        },
        Step::HandEdit {
            name: NAMES[rng.usize(..3)],
            hold: holds[2],
        },
        Step::Referral {
            name: NAMES[rng.usize(..3)],
            hold: holds[3],
        },
        Step::Servfail {
            name: NAMES[rng.usize(..3)],
            hold: holds[4],
        },
        Step::Drain {
            endpoint: ENDPOINTS[rng.usize(..ENDPOINTS.len())].0,
            via: rng.usize(..2),
            hold: holds[5],
        },
    ];
    rng.shuffle(&mut steps);
    steps
}

/// The endpoints at gateway `g` whose check `behaviour` fails: a 503 fails HTTP checks
/// only, a refusal every check.
pub fn failing(
    g: Gw,
    refused: bool,
) -> impl Iterator<Item = &'static (&'static str, Gw, &'static str, &'static str)> {
    ENDPOINTS
        .iter()
        .filter(move |(_, at, kind, _)| *at == g && (refused || *kind == "http"))
}

/// The conditions the account keeps, as `/v1/availability` names their seconds.
pub const KINDS: [&str; 4] = ["dead_address", "wrong_address", "unanswered", "maintenance"];

/// The script's account for one replica: per name, per condition, seconds and stretches.
#[derive(Debug, Default, Clone)]
pub struct Truth(BTreeMap<(&'static str, &'static str), (f64, u32)>);

impl Truth {
    /// Adds a stretch of `kind` at `name` from `from` to `to`.
    pub fn add(
        &mut self,
        name: &'static str,
        kind: &'static str,
        from: SystemTime,
        to: SystemTime,
    ) {
        let entry = self.0.entry((name, kind)).or_default();
        entry.0 += to.duration_since(from).unwrap().as_secs_f64();
        entry.1 += 1;
    }

    /// Seconds and stretches of `kind` at `name` (none: zero).
    pub fn of(&self, name: &str, kind: &str) -> (f64, u32) {
        (self.0.iter())
            .find(|((n, k), _)| *n == name && *k == kind)
            .map_or((0.0, 0), |(_, v)| *v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A seed gives one script, every kind once, holds within bounds, and the draws vary
    /// over seeds (orders, gateways, names).
    #[test]
    fn a_seed_gives_one_script_of_every_kind() {
        let kinds = |s: &[Step]| -> Vec<String> {
            s.iter()
                .map(|s| {
                    format!("{s:?}")
                        .split([' ', '{'])
                        .next()
                        .unwrap()
                        .to_owned()
                })
                .collect()
        };
        let mut orders = std::collections::BTreeSet::new();
        for seed in 0..200 {
            let steps = script(seed);
            assert_eq!(format!("{steps:?}"), format!("{:?}", script(seed)));
            let mut k = kinds(&steps);
            orders.insert(k.join(","));
            k.sort();
            assert_eq!(
                k,
                ["Drain", "HandEdit", "Http503", "Referral", "Refuse", "Servfail"]
            );
        }
        assert!(orders.len() > 50, "{} orders in 200 seeds", orders.len());
    }
}
