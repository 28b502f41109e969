//! The `tcp` kind: healthy when the target accepts a TCP connection within the deadline.

use std::sync::atomic::Ordering;

use super::connect::{self, SocketSetup};
use super::{Attempt, Dial, KeptConnection, ProbeKind, Progress};

/// A TCP connect check; it has nothing to prepare.
pub(super) struct TcpConnect;

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
