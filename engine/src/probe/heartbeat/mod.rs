//! The `heartbeat` kind: the endpoint says it is alive by pushing heartbeats to the API
//! (`POST /v1/heartbeat/{endpoint}`, see [`board`]); each scheduled probe of it
//! is healthy while the last heartbeat is younger than `ttl`. Nothing is sent to the
//! endpoint. It is Consul's TTL check: for services that already report their own health,
//! or that no probe can reach.

pub mod board;
pub use board::Heartbeats;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use ho_config::{ResolvedCheck, Target};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::registry::{CheckSettings, Prepare, Problems};
use super::Progress;
use super::{
    Attempt, Dial, Failure, KeptConnection, PreparedProbe, ProbeContext, ProbeError, ProbeKind,
};

use crate::secret::Secret;

/// `kind = "heartbeat"`: healthy while heartbeats arrive within `ttl`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatSettings {
    /// heartbeat: the longest a heartbeat counts (required): the endpoint is healthy while
    /// its last heartbeat is younger. Push at least twice per `ttl` so one lost request is
    /// not a missed heartbeat.
    #[serde(default, with = "humantime_serde::option")]
    #[schemars(with = "Option<String>")]
    pub ttl: Option<Duration>,
    /// heartbeat: a file holding this endpoint's own bearer token (a mounted Secret), read
    /// at load and every reload; without it, `api.heartbeat_token_file`'s token is asked.
    pub token_file: Option<PathBuf>,
}

/// A heartbeat check, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct HeartbeatCheck {
    /// The longest a heartbeat counts.
    pub ttl: Duration,
    /// The endpoint's own token, read from `token_file`.
    pub token: Option<Secret>,
}

impl ResolvedCheck for HeartbeatCheck {
    fn kind(&self) -> &'static str {
        HeartbeatSettings::KIND
    }

    fn url(&self, target: SocketAddr) -> String {
        format!("heartbeat://{}", target.ip())
    }
}

impl CheckSettings for HeartbeatSettings {
    const KIND: &'static str = "heartbeat";
    const DEFAULT_PORT: Option<u16> = None;
    const URL_PORT: Option<u16> = Some(0);
    const USES_PORT: bool = false;
    type Resolved = HeartbeatCheck;

    fn resolve(self, problems: &mut Problems<'_>) -> Option<HeartbeatCheck> {
        let ttl = match self.ttl {
            None => {
                problems.push("ttl", "missing: how long a heartbeat counts");
                Duration::ZERO
            }
            Some(ttl) if ttl < Duration::from_millis(10) => {
                problems.push("ttl", "must be at least 10ms");
                ttl
            }
            Some(ttl) => ttl,
        };
        let token = self
            .token_file
            .and_then(|file| match std::fs::read_to_string(&file) {
                Ok(text) if !text.trim().is_empty() => Some(Secret::new(text.trim().to_owned())),
                Ok(_) => {
                    problems.push("token_file", format!("{} is empty", file.display()));
                    None
                }
                Err(e) => {
                    problems.push("token_file", format!("{}: {e}", file.display()));
                    None
                }
            });
        Some(HeartbeatCheck { ttl, token })
    }
}

/// The probe of one pushing endpoint: it reads the board.
struct HeartbeatProbe {
    board: Heartbeats,
    ttl: Duration,
}

impl HeartbeatProbe {
    fn judge(&self, dial: &Dial) -> Result<(), Failure> {
        let detail = match self.board.age(dial.addr.ip()) {
            Some(age) if age <= self.ttl => return Ok(()),
            Some(age) => format!(
                "last heartbeat {} ago (ttl {})",
                humantime::format_duration(Duration::from_millis(age.as_millis() as u64)),
                humantime::format_duration(self.ttl)
            ),
            None => "no heartbeat received".to_owned(),
        };
        Err(Failure::Answer {
            label: "heartbeat_missed",
            detail,
        })
    }
}

impl ProbeKind for HeartbeatProbe {
    fn attempt<'a>(
        &'a self,
        dial: &'a Dial,
        _progress: &'a Progress,
        _kept: &'a mut Option<KeptConnection>,
    ) -> Attempt<'a> {
        Box::pin(std::future::ready(self.judge(dial)))
    }
}

impl Prepare for HeartbeatCheck {
    fn prepare(
        &self,
        _target: &Target,
        ctx: &mut ProbeContext,
    ) -> Result<PreparedProbe, ProbeError> {
        Ok(PreparedProbe::new(HeartbeatProbe {
            board: ctx.heartbeats.clone(),
            ttl: self.ttl,
        }))
    }
}
