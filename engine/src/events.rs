//! What happens, as it happens: verdict changes, publishes and sink writes, broadcast to
//! whoever listens (`GET /events`, Server-Sent Events; the status page). Nobody listening
//! costs one failed send per event; a listener that falls behind loses the oldest events
//! and is told how many.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::SystemTime;

use serde::Serialize;
use tokio::sync::broadcast;

use crate::status::Timestamp;

/// Events kept for a listener that falls behind before it is told it missed some.
const BACKLOG: usize = 1024;

/// One thing that happened; one JSON object per event on `/events`.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A target's verdict changed (after hysteresis).
    Transition {
        /// When (RFC 3339).
        at: Timestamp,
        /// Endpoints probed through the target.
        endpoints: Vec<String>,
        /// Its address.
        address: IpAddr,
        /// Old state (`unknown`, `up`, `down`).
        from: &'static str,
        /// New state.
        to: &'static str,
        /// The probe result that decided it.
        reason: String,
    },
    /// A tenant's record set changed and goes to its sinks.
    Publish {
        /// When (RFC 3339).
        at: Timestamp,
        /// Tenant name.
        tenant: String,
        /// Snapshot sequence number.
        seq: u64,
        /// Why these addresses (`healthy`, `fail_open_...`, `none_healthy`).
        mode: &'static str,
        /// The published addresses.
        addresses: Vec<IpAddr>,
    },
    /// A sink wrote (or failed to write) a tenant.
    SinkWrite {
        /// When (RFC 3339).
        at: Timestamp,
        /// Sink name.
        sink: String,
        /// Tenant name.
        tenant: String,
        /// Snapshot sequence number written.
        seq: u64,
        /// `changed`, `unchanged` or `error`.
        result: &'static str,
        /// The error, when `result` is `error`.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
}

/// Now, for [`Event`] timestamps.
pub fn now() -> Timestamp {
    Timestamp(SystemTime::now())
}

/// The broadcast channel events go out on; cheap to clone.
#[derive(Clone)]
pub struct Events(broadcast::Sender<Arc<Event>>);

impl Default for Events {
    fn default() -> Self {
        Events(broadcast::channel(BACKLOG).0)
    }
}

impl Events {
    /// Sends the event `make` builds to every listener; with none listening (the usual
    /// case) it is not built, so a publish of 10,000 addresses costs no copy of them.
    pub fn emit(&self, make: impl FnOnce() -> Event) {
        if self.0.receiver_count() > 0 {
            let _ = self.0.send(Arc::new(make()));
        }
    }

    /// A new listener, receiving events from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.0.subscribe()
    }
}
