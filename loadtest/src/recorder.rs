//! The recording sink: a webhook receiver that notes when each address left or entered the
//! published set. The engine runs as its own process and delivers here, so detection is
//! measured end to end (probe -> hysteresis -> snapshot -> sink write). It compares the
//! full record sets of consecutive deliveries rather than trusting `changes`, so what it
//! measures is what a DNS back end would serve.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Response, StatusCode};
use serde::Deserialize;
use tokio::time::Instant;

/// An address entering or leaving the published set.
#[derive(Debug, Clone)]
pub struct Seen {
    /// When the delivery arrived.
    pub at: Instant,
    /// The same moment on the wall clock, to compare with the engine's log.
    pub wall: SystemTime,
    /// The tenant whose set changed.
    pub tenant: Arc<str>,
    /// The snapshot that changed it (the engine numbers each tenant's snapshots; every
    /// sink of the tenant writes the same numbers).
    pub seq: u64,
    /// The address.
    pub address: IpAddr,
    /// Entered (true) or left (false).
    pub published: bool,
}

#[derive(Deserialize)]
struct Payload {
    tenant: String,
    seq: u64,
    records: BTreeMap<String, Vec<IpAddr>>,
}

#[derive(Default)]
struct State {
    /// The latest record set of each tenant.
    current: HashMap<String, HashSet<IpAddr>>,
    seen: Vec<Seen>,
    /// When a delivery carried no address at all (a name answering nothing).
    empty: Vec<Instant>,
}

/// Shared view of what arrived.
#[derive(Clone, Default)]
pub struct Recorder {
    state: Arc<Mutex<State>>,
}

impl Recorder {
    /// Serves on `127.0.0.1:0`; returns the address.
    pub async fn start(&self) -> std::io::Result<SocketAddr> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let me = self.clone();
        ho_testkit::serve_http(
            listener,
            move |req: hyper::Request<hyper::body::Incoming>| {
                let me = me.clone();
                async move {
                    let body = req
                        .into_body()
                        .collect()
                        .await
                        .map(|b| b.to_bytes())
                        .unwrap_or_default();
                    me.record(&body);
                    Response::builder()
                        .status(StatusCode::NO_CONTENT)
                        .body(Full::<Bytes>::default())
                        .expect("static response")
                }
            },
        );
        Ok(addr)
    }

    fn record(&self, body: &[u8]) {
        let (at, wall) = (Instant::now(), SystemTime::now());
        let Ok(payload) = serde_json::from_slice::<Payload>(body) else {
            return;
        };
        let payload_tenant = payload.tenant;
        let tenant: Arc<str> = payload_tenant.as_str().into();
        let next: HashSet<IpAddr> = payload
            .records
            .into_values()
            .next()
            .unwrap_or_default()
            .into_iter()
            .collect();
        let mut state = self.state.lock().expect("not poisoned");
        if next.is_empty() {
            state.empty.push(at);
        }
        let current = state.current.remove(&payload_tenant).unwrap_or_default();
        let left: Vec<Seen> = current
            .difference(&next)
            .map(|&address| Seen {
                at,
                wall,
                tenant: tenant.clone(),
                seq: payload.seq,
                address,
                published: false,
            })
            .collect();
        let entered: Vec<Seen> = next
            .difference(&current)
            .map(|&address| Seen {
                at,
                wall,
                tenant: tenant.clone(),
                seq: payload.seq,
                address,
                published: true,
            })
            .collect();
        state.seen.extend(left.into_iter().chain(entered));
        state.current.insert(payload_tenant, next);
    }

    /// Addresses published now, over every tenant.
    pub fn published(&self) -> usize {
        let state = self.state.lock().expect("not poisoned");
        state.current.values().map(HashSet::len).sum()
    }

    /// Deliveries that published no address, at or after `since`.
    pub fn empty_since(&self, since: Instant) -> usize {
        let state = self.state.lock().expect("not poisoned");
        state.empty.iter().filter(|&&at| at >= since).count()
    }

    /// Every entry and exit seen so far, in arrival order.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().expect("not poisoned").seen.clone()
    }
}
