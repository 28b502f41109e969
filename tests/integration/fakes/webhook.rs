//! A webhook receiver that checks every signature independently of the sink's code and
//! records what it accepted.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode};
use serde_json::Value;

use crate::harness::serve_http;

/// The shared secret the receiver verifies with (`secret_env`/`secret_file` in tests).
pub const SECRET: &str = "webhook-secret";

/// One delivery as the receiver saw it.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub body: Value,
    pub idempotency_key: String,
    /// The `X-Tenant-Token` header.
    pub token: String,
    pub accepted: bool,
    /// When it arrived.
    pub at: tokio::time::Instant,
}

/// A receiver that verifies `X-Health-Orchestrator-Signature` independently (ring's
/// `hmac::verify` over `"<timestamp>.<body>"`), records deliveries and can answer 503.
#[derive(Clone, Default)]
pub struct Receiver {
    deliveries: Arc<Mutex<Vec<Delivery>>>,
    pub failing: Arc<Mutex<bool>>,
    /// Set: every request is held until the test lets it go.
    pub held: Option<Arc<Held>>,
}

/// Requests held open by the receiver, counted: how many writes the sender has in flight.
pub struct Held {
    /// Requests received and not answered yet.
    pub now: AtomicUsize,
    /// The most seen at once.
    pub most: AtomicUsize,
    /// One permit answers one held request.
    pub release: tokio::sync::Semaphore,
}

impl Default for Held {
    fn default() -> Held {
        Held {
            now: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
            release: tokio::sync::Semaphore::new(0),
        }
    }
}

impl Held {
    async fn hold(&self) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        self.release.acquire().await.unwrap().forget();
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Receiver {
    /// A receiver that holds every request until `held` lets it go.
    pub fn holding(held: Arc<Held>) -> Receiver {
        Receiver {
            held: Some(held),
            ..Receiver::default()
        }
    }

    pub async fn start(self) -> std::net::SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        serve_http(listener, move |req| {
            let me = self.clone();
            async move { me.handle(req).await }
        });
        addr
    }

    async fn handle(&self, req: Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
        let header = |name: &str| {
            req.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned()
        };
        let (timestamp, signature, key, token) = (
            header("x-health-orchestrator-timestamp"),
            header("x-health-orchestrator-signature"),
            header("idempotency-key"),
            header("x-tenant-token"),
        );
        let body = req.into_body().collect().await.unwrap().to_bytes();
        let hex = signature.strip_prefix("sha256=").unwrap_or("");
        let tag: Vec<u8> = (0..hex.len() / 2)
            .filter_map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
            .collect();
        let key_ring = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, SECRET.as_bytes());
        let signed = [timestamp.as_bytes(), b".", &body].concat();
        let verified = ring::hmac::verify(&key_ring, &signed, &tag).is_ok();
        if !verified {
            return Response::builder()
                .status(StatusCode::UNAUTHORIZED)
                .body(Full::default())
                .unwrap();
        }
        if let Some(held) = &self.held {
            held.hold().await;
        }
        let accepted = !*self.failing.lock().unwrap();
        self.deliveries.lock().unwrap().push(Delivery {
            body: serde_json::from_slice(&body).unwrap(),
            idempotency_key: key,
            token,
            accepted,
            at: tokio::time::Instant::now(),
        });
        let status = if accepted {
            StatusCode::NO_CONTENT
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        };
        Response::builder()
            .status(status)
            .body(Full::default())
            .unwrap()
    }

    /// Forgets every delivery, as a receiver that lost its state would.
    pub fn forget(&self) {
        self.deliveries.lock().unwrap().clear();
    }

    /// Deliveries answered 503 while `failing` was set.
    pub fn rejected(&self) -> usize {
        self.deliveries
            .lock()
            .unwrap()
            .iter()
            .filter(|d| !d.accepted)
            .count()
    }

    /// Deliveries accepted (signature good, not failing), oldest first.
    pub fn accepted(&self) -> Vec<Delivery> {
        self.deliveries
            .lock()
            .unwrap()
            .iter()
            .filter(|d| d.accepted)
            .cloned()
            .collect()
    }
}

pub fn addresses_of(d: &Delivery, domain: &str) -> Vec<String> {
    let mut list: Vec<String> = d.body["records"][domain]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    list.sort();
    list
}

/// Waits until the latest accepted delivery satisfies `ready`; `what` names it.
pub async fn wait_for_delivery(
    rx: &Receiver,
    what: &str,
    ready: impl Fn(&Delivery) -> bool,
) -> Delivery {
    let start = tokio::time::Instant::now();
    loop {
        if let Some(d) = rx.accepted().into_iter().last().filter(|d| ready(d)) {
            return d;
        }
        assert!(
            start.elapsed() < crate::harness::LIMIT,
            "no delivery with {what}; got {:#?}",
            rx.accepted()
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}
