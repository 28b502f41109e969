//! What happens, as it happens: verdict changes, publishes, sink writes and the prober's
//! self-check, broadcast to whoever listens (`GET /events`, Server-Sent Events; the status
//! page), the last 500 kept (at most 50,000 addresses in all) for listeners that ask for
//! what happened before they came (`?since=`). A listener that falls behind loses the
//! oldest events and is told how many.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde::Serialize;
use tokio::sync::{broadcast, mpsc};

use crate::clock::Timestamp;

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
        /// What is probed: the check whose verdict changed.
        target: String,
        /// Endpoints judged by the target (for an endpoint of several checks, one of
        /// them changed: its own verdict is in `/status`).
        endpoints: Vec<String>,
        /// Its address.
        address: IpAddr,
        /// Old state (`unknown`, `up`, `down`).
        from: &'static str,
        /// New state.
        to: &'static str,
        /// Going down: when the first failure that counted toward it arrived (the moment
        /// the address began to fail its clients).
        #[serde(skip_serializing_if = "Option::is_none")]
        failing_since: Option<Timestamp>,
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
        /// `answer = "cname"`: the published host names with their addresses, in the order a
        /// sink holding one CNAME per name takes the first of (empty otherwise).
        #[serde(skip_serializing_if = "Vec::is_empty")]
        hosts: Vec<crate::snapshot::HostAddresses>,
        /// `[multi_cluster]`: the addresses the clusters' vote judged down (whether or not
        /// fail-open publishes them), the verdict every cluster's ledger charges.
        #[serde(skip_serializing_if = "Option::is_none")]
        voted_down: Option<Vec<IpAddr>>,
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
    /// An operator acted through the API (drain, force, release, the brake's release).
    Operator {
        /// When (RFC 3339).
        at: Timestamp,
        /// `drain`, `undrain`, `force-up`, `force-down`, `release` or `brake-release`.
        action: &'static str,
        /// The endpoints it changed (none for the brake).
        endpoints: Vec<String>,
        /// Who: the client's address.
        client: String,
    },
    /// The answer canary found a name served otherwise than decided past the sink's
    /// grace (`stale`), or served as decided again.
    Canary {
        /// When (RFC 3339).
        at: Timestamp,
        /// The sink whose DNS server answered.
        sink: String,
        /// Tenant name.
        tenant: String,
        /// The name asked.
        name: String,
        /// The location it was asked from as a client there (a `geo` name), if any.
        #[serde(skip_serializing_if = "Option::is_none")]
        geo: Option<String>,
        /// Served otherwise than decided (`false`: as decided again).
        stale: bool,
        /// What the server answered.
        served: Vec<IpAddr>,
        /// The CNAME the server answered, when it answered one.
        #[serde(skip_serializing_if = "Option::is_none")]
        served_host: Option<String>,
        /// The error code the server answered instead of records (`SERVFAIL`, `REFUSED`):
        /// it served nothing.
        #[serde(skip_serializing_if = "Option::is_none")]
        served_rcode: Option<String>,
        /// The delegation the server referred the question to instead of answering
        /// (`below a delegation at NAME (NS ...)`).
        #[serde(skip_serializing_if = "Option::is_none")]
        served_referral: Option<String>,
        /// What was decided.
        intended: Vec<IpAddr>,
    },
    /// What operators hold by hand changed (here or adopted from another replica).
    Held {
        /// When (RFC 3339).
        at: Timestamp,
        /// Every endpoint drained or forced now.
        endpoints: Vec<String>,
    },
    /// This prober judged itself impaired (a wave of its targets started failing at once:
    /// every withdrawal and vote held), or no longer does.
    Impaired {
        /// When (RFC 3339).
        at: Timestamp,
        /// Impaired from now on (`false`: resumed).
        impaired: bool,
        /// Targets failing when it was judged.
        failing: usize,
        /// Targets in all.
        targets: usize,
    },
    /// An optional part (the availability ledger) cannot do its work as configured, or can
    /// again; probing and publishing go on either way.
    Degraded {
        /// When (RFC 3339).
        at: Timestamp,
        /// Which part (`ledger`).
        part: &'static str,
        /// Degraded from now on (`false`: recovered).
        degraded: bool,
        /// Why (empty when recovered).
        #[serde(skip_serializing_if = "String::is_empty")]
        reason: String,
    },
}

/// Now, for [`Event`] timestamps.
pub fn now() -> Timestamp {
    Timestamp(SystemTime::now())
}

impl Event {
    /// When it happened.
    pub fn at(&self) -> Timestamp {
        match self {
            Event::Transition { at, .. }
            | Event::Publish { at, .. }
            | Event::SinkWrite { at, .. }
            | Event::Impaired { at, .. }
            | Event::Operator { at, .. }
            | Event::Held { at, .. }
            | Event::Canary { at, .. }
            | Event::Degraded { at, .. } => *at,
        }
    }

    /// What it costs to keep: its addresses (a publish may carry thousands), at least 1.
    fn weight(&self) -> usize {
        match self {
            Event::Publish {
                addresses, hosts, ..
            } => (addresses.len() + hosts.len()).max(1),
            _ => 1,
        }
    }
}

/// Most events kept for late listeners (the page's timeline on load).
const RECENT_EVENTS: usize = 500;

/// Most addresses those events may hold together: a few publishes of a 10,000-address
/// tenant, not 500 of them.
const RECENT_ADDRESSES: usize = 50_000;

/// The recent events, oldest first, within both bounds.
#[derive(Default)]
struct Recent {
    events: VecDeque<Arc<Event>>,
    weight: usize,
    /// Listeners that must see every event (the availability ledger, the answer canary):
    /// unbounded, so a burst of thousands of transitions is never dropped for them.
    followers: Vec<mpsc::UnboundedSender<Arc<Event>>>,
}

impl Recent {
    fn push(&mut self, event: Arc<Event>) {
        self.weight += event.weight();
        self.events.push_back(event);
        while self.events.len() > RECENT_EVENTS || self.weight > RECENT_ADDRESSES {
            match self.events.pop_front() {
                Some(old) => self.weight -= old.weight(),
                None => break,
            }
        }
    }
}

/// The broadcast channel events go out on, and the recent ones kept for listeners that
/// arrive later; cheap to clone.
#[derive(Clone)]
pub struct Events {
    live: broadcast::Sender<Arc<Event>>,
    recent: Arc<Mutex<Recent>>,
}

impl Default for Events {
    fn default() -> Self {
        Events {
            live: broadcast::channel(BACKLOG).0,
            recent: Arc::default(),
        }
    }
}

impl Events {
    /// Keeps the event `make` builds among the recent ones and sends it to every listener.
    pub fn emit(&self, make: impl FnOnce() -> Event) {
        let event = Arc::new(make());
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        recent.push(event.clone());
        recent.followers.retain(|f| f.send(event.clone()).is_ok());
        // Under the lock: a listener joining now gets it either kept or live, never both.
        let _ = self.live.send(event);
    }

    /// A listener that is handed every event from now on, none dropped however far it
    /// falls behind (for the engine's own consumers, which keep up; `/events` clients use
    /// [`Events::subscribe`]).
    pub fn follow(&self) -> mpsc::UnboundedReceiver<Arc<Event>> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        recent.followers.push(tx);
        rx
    }

    /// A new listener: the kept events after `since` (none without it), then every event
    /// from now on, with none missed or repeated between the two.
    pub fn subscribe(
        &self,
        since: Option<Timestamp>,
    ) -> (Vec<Arc<Event>>, broadcast::Receiver<Arc<Event>>) {
        let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        let kept = match since {
            Some(since) => recent
                .events
                .iter()
                .filter(|e| e.at() > since)
                .cloned()
                .collect(),
            None => Vec::new(),
        };
        (kept, self.live.subscribe())
    }
}
