//! The `tcp` kind: healthy when the target accepts a TCP connection within the deadline.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;

use ho_config::{ResolvedCheck, Target};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::connect::{self, SocketSetup};
use super::registry::{CheckSettings, Prepare, Problems};
use super::{
    Attempt, Dial, KeptConnection, PreparedProbe, ProbeContext, ProbeError, ProbeKind, Progress,
};

/// `kind = "tcp"`: a connect, nothing more; the kind has no keys of its own.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TcpSettings {}

impl ResolvedCheck for TcpSettings {
    fn kind(&self) -> &'static str {
        Self::KIND
    }

    fn url(&self, target: SocketAddr) -> String {
        format!("tcp://{target}")
    }
}

impl CheckSettings for TcpSettings {
    const KIND: &'static str = "tcp";
    const DEFAULT_PORT: Option<u16> = Some(80);
    const URL_PORT: Option<u16> = None;
    type Resolved = TcpSettings;

    fn resolve(self, _problems: &mut Problems<'_>) -> Option<TcpSettings> {
        Some(self)
    }
}

/// A TCP connect check; it has nothing to prepare.
struct TcpConnect;

impl ProbeKind for TcpConnect {
    fn attempt<'a>(
        &'a self,
        dial: &'a Dial,
        progress: &'a Progress,
        _kept: &'a mut Option<KeptConnection>,
    ) -> Attempt<'a> {
        Box::pin(async move {
            let stream = connect::connect(dial.addr, dial.source, SocketSetup::default()).await?;
            progress.connected.store(true, Ordering::Relaxed);
            connect::handshake_error(&stream)
        })
    }
}

impl Prepare for TcpSettings {
    fn prepare(
        &self,
        _target: &Target,
        _ctx: &mut ProbeContext,
    ) -> Result<PreparedProbe, ProbeError> {
        Ok(PreparedProbe::new(TcpConnect))
    }
}
