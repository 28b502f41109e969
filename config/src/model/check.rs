//! `[defaults.check]` and an endpoint's `check`: every field optional, merged field by
//! field (endpoint wins), and flap damping.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A check kind's own keys as written, parsed by the kind (the engine's probe registry):
/// the rest of a check table after its common keys.
pub type KindSettings = BTreeMap<String, figment::value::Value>;

/// A health check, every field optional so that `[defaults.check]` and an endpoint's `check`
/// can each set a few fields and be merged field by field (endpoint wins).
///
/// The fields here are the ones every kind reads; each kind's own keys (`path`,
/// `expect_status`, `insecure`, ...) are kept in [`CheckOverrides::settings`] as written and
/// parsed by that kind's typed settings, so a key no kind reads, or one the endpoint's kind
/// does not read, is an error at its path (`crate::validate::CheckCatalog`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[schemars(extend("x-check-table" = true))]
pub struct CheckOverrides {
    /// The check kind (`http`, `https`, `tcp`, `dns`, ...: the schema lists them); which kind
    /// reads the table's other keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// TCP port on the endpoint's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Time between two scheduled probes of a settled endpoint.
    #[serde(
        default,
        with = "humantime_serde::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>")]
    pub interval: Option<Duration>,
    /// Hard deadline over the whole probe (connect + TLS + request + body). Must be shorter
    /// than `interval` so probes of one target never overlap. Default: 500 ms, or 0.8 x
    /// `interval` when that is shorter.
    #[serde(
        default,
        with = "humantime_serde::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>")]
    pub timeout: Option<Duration>,
    /// Consecutive successes that turn a down (or unknown) endpoint up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rise: Option<u32>,
    /// Consecutive failures that turn an up (or unknown) endpoint down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fall: Option<u32>,
    /// Re-check delay while a result disagrees with the current state, so a verdict settles
    /// in `interval + (fall-1)·fast_interval` instead of `fall·interval`. Default: 100 ms,
    /// or `interval` when that is shorter.
    #[serde(
        default,
        with = "humantime_serde::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>")]
    pub fast_interval: Option<Duration>,
    /// Flap damping: an endpoint that keeps going down and up is held out of DNS until it
    /// has been calm for a while. Off unless this table is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damping: Option<DampingConfig>,
    /// Local address probes leave from (HAProxy's `source`): on a multi-homed host, the
    /// interface whose path to the gateways is the one to judge; the same family as the
    /// endpoint's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_address: Option<IpAddr>,
    /// The kind's own keys, parsed by the kind (their schema comes from the kinds:
    /// `ho_engine::probe::check_fields_schema`).
    #[serde(flatten)]
    #[schemars(skip)]
    pub settings: KindSettings,
}

/// `damping = { ... }`: route-flap damping as BGP does it (RFC 2439), applied to endpoint
/// verdicts. Each time the endpoint goes down its penalty grows by `penalty`; the penalty
/// halves every `half_life`. Above `suppress` the endpoint is held out of DNS (as if down)
/// until the penalty decays below `reuse`, and never longer than `max_suppress` after its
/// last flap. With the defaults the third down within about a minute holds the endpoint out.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DampingConfig {
    /// `false` turns damping off for one endpoint when `[defaults.check]` turns it on.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Time for the penalty to halve.
    #[serde(default = "default_half_life", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub half_life: Duration,
    /// Added each time the endpoint goes down.
    #[serde(default = "default_flap_penalty")]
    pub penalty: u32,
    /// Held out of DNS while the penalty is above this.
    #[serde(default = "default_suppress")]
    pub suppress: u32,
    /// Released once the penalty decays below this.
    #[serde(default = "default_reuse")]
    pub reuse: u32,
    /// Longest hold after the last flap (caps the penalty).
    #[serde(default = "default_max_suppress", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub max_suppress: Duration,
}

pub(super) fn yes() -> bool {
    true
}

fn default_half_life() -> Duration {
    Duration::from_secs(60)
}

fn default_flap_penalty() -> u32 {
    1000
}

fn default_suppress() -> u32 {
    2000
}

fn default_reuse() -> u32 {
    750
}

fn default_max_suppress() -> Duration {
    Duration::from_secs(600)
}

impl CheckOverrides {
    /// The built-in check: the lowest configuration layer, below files and environment.
    /// The kinds' own keys take their defaults from the kind (`path = "/"`,
    /// `expect_status = [200]`, ...).
    pub fn builtin() -> CheckOverrides {
        CheckOverrides {
            kind: Some("http".into()),
            // port: the kind's default (`CheckCatalog::default_port`).
            interval: Some(Duration::from_secs(1)),
            // timeout and fast_interval follow the interval unless set: see
            // `validate::checks::required`.
            rise: Some(1),
            fall: Some(2),
            ..CheckOverrides::default()
        }
    }

    /// A check table that sets only its kind, for building checks in code
    /// (`CheckOverrides::of_kind("http").with("path", "/healthz")`).
    pub fn of_kind(kind: &str) -> CheckOverrides {
        CheckOverrides {
            kind: Some(kind.into()),
            ..CheckOverrides::default()
        }
    }

    /// `self` with the kind's key `key` set to `value`, as if written in the table.
    ///
    /// # Panics
    /// When `value` has no TOML form (a map with non-string keys): a bug in the caller.
    pub fn with(mut self, key: &str, value: impl Serialize) -> CheckOverrides {
        let value = figment::value::Value::serialize(value)
            .expect("a check setting has a configuration form");
        self.settings.insert(key.into(), value);
        self
    }

    /// Every field of `self` that is set, else the field of `base`: the endpoint-over-defaults
    /// merge. A kind's key set on both is `self`'s; which of `base`'s keys the resolved kind
    /// reads is decided when the check is resolved.
    pub fn over(&self, base: &CheckOverrides) -> CheckOverrides {
        fn pick<T: Clone>(top: &Option<T>, base: &Option<T>) -> Option<T> {
            top.clone().or_else(|| base.clone())
        }
        let mut settings = base.settings.clone();
        settings.extend(self.settings.clone());
        CheckOverrides {
            kind: pick(&self.kind, &base.kind),
            port: pick(&self.port, &base.port),
            interval: pick(&self.interval, &base.interval),
            timeout: pick(&self.timeout, &base.timeout),
            rise: pick(&self.rise, &base.rise),
            fall: pick(&self.fall, &base.fall),
            fast_interval: pick(&self.fast_interval, &base.fast_interval),
            damping: pick(&self.damping, &base.damping),
            source_address: pick(&self.source_address, &base.source_address),
            settings,
        }
    }
}
