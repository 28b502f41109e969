//! `kind = "webhook"`: every snapshot POSTed as signed JSON to any HTTP receiver.
//!
//! Body: `{"tenant", "seq", "generated_at", "ttl", "mode", "policy", "default_geo",
//! "records": {"domain": ["addr", ...]}, "endpoints": [{"address", "weight", "endpoint",
//! "priority", "labels", "host"}], "changes": [{"endpoint", "address", "from", "to", "reason"}],
//! "votes": {"live", "aged_out", "threshold", "addresses": [{"address", "owner",
//! "owner_live", "down_votes", "kept"}]}}` (`votes` only for `[multi_cluster]` tenants):
//! every routing policy passes through, for receivers that route themselves. `host` is the
//! host name an endpoint given by name resolved to the address from (absent otherwise).
//! Headers: `X-Health-Orchestrator-Timestamp: <unix seconds>`,
//! `X-Health-Orchestrator-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>`,
//! `Idempotency-Key: <tenant>-<seq>`. The timestamp is inside the signed text, so a receiver
//! that rejects old timestamps also rejects replays. Receivers should also drop a `seq`
//! lower than the highest they applied for the tenant.

pub mod config;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use ho_config::RoutingPolicy;
use ho_config::TlsCheck;

use self::config::WebhookConfig;
use ho_engine::multi_cluster::vote::Tally;
use ho_engine::sink::{Applied, Sink, SinkError, SinkFuture};
use ho_engine::snapshot::{PublishMode, PublishedAddress, TenantSnapshot, VerdictChange};
use http_body_util::Full;
use hyper::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request};
use serde::Serialize;

use crate::http::{error_for, HttpClient};
use ho_engine::secret::Secret;
use ho_engine::sink::SetupError;

/// Header carrying the signature.
pub const SIGNATURE_HEADER: &str = "x-health-orchestrator-signature";
/// Header carrying the signed timestamp.
pub const TIMESTAMP_HEADER: &str = "x-health-orchestrator-timestamp";

/// The JSON body.
#[derive(Serialize)]
struct Payload<'a> {
    tenant: &'a str,
    seq: u64,
    generated_at: String,
    ttl: u64,
    mode: PublishMode,
    policy: RoutingPolicy,
    #[serde(skip_serializing_if = "Option::is_none")]
    default_geo: Option<&'a str>,
    records: BTreeMap<&'a str, Vec<String>>,
    endpoints: &'a [PublishedAddress],
    changes: &'a [VerdictChange],
    #[serde(skip_serializing_if = "Option::is_none")]
    votes: Option<&'a Tally>,
}

/// POSTs snapshots to one URL.
pub struct WebhookSink {
    inner: Arc<Inner>,
}

struct Inner {
    client: HttpClient,
    url: String,
    secret: Secret,
    headers: Vec<(HeaderName, HeaderValue)>,
    delivered: std::sync::Mutex<BTreeMap<String, u64>>,
}

/// `sha256=<hex>` of HMAC-SHA256 over `"<timestamp>.<body>"`.
pub fn sign(secret: &[u8], timestamp: u64, body: &[u8]) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    let mut ctx = ring::hmac::Context::with_key(&key);
    ctx.update(timestamp.to_string().as_bytes());
    ctx.update(b".");
    ctx.update(body);
    let tag = ctx.sign();
    format!("sha256={}", ho_engine::secret::hex(tag.as_ref()))
}

impl WebhookSink {
    /// Builds the sink; fails if the secret or the TLS settings cannot be loaded.
    pub fn new(config: &WebhookConfig) -> Result<WebhookSink, SetupError> {
        let secret = Secret::load(config.secret_file.as_deref(), config.secret_env.as_deref())
            .map_err(SetupError::secret("secret"))?;
        let trust = TlsCheck {
            insecure: config.insecure,
            ca_file: config.ca_file.clone(),
            client_cert: None,
            client_key: None,
        };
        let headers = config
            .headers
            .iter()
            .map(|(k, v)| {
                let refused = |e: &dyn std::fmt::Display| SetupError::Setting {
                    field: format!("header {k}"),
                    reason: e.to_string(),
                };
                Ok((
                    HeaderName::from_bytes(k.as_bytes()).map_err(|e| refused(&e))?,
                    HeaderValue::from_str(v).map_err(|e| refused(&e))?,
                ))
            })
            .collect::<Result<_, SetupError>>()?;
        config
            .url
            .parse::<hyper::Uri>()
            .map_err(|e| SetupError::Setting {
                field: format!("url {}", config.url),
                reason: e.to_string(),
            })?;
        Ok(WebhookSink {
            inner: Arc::new(Inner {
                client: HttpClient::new(&trust, config.timeout)?,
                url: config.url.clone(),
                secret,
                headers,
                delivered: Default::default(),
            }),
        })
    }
}

impl Sink for WebhookSink {
    fn kind(&self) -> &'static str {
        "webhook"
    }

    fn apply(&self, snapshot: Arc<TenantSnapshot>) -> SinkFuture {
        let inner = self.inner.clone();
        Box::pin(async move { inner.deliver(&snapshot).await })
    }
}

impl Inner {
    async fn deliver(&self, snapshot: &TenantSnapshot) -> Result<Applied, SinkError> {
        let body = body_of(snapshot);
        let timestamp = ho_engine::clock::since_epoch(SystemTime::now()).as_secs();
        let mut request = Request::new(Full::new(body.clone()));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.url.parse().expect("checked when built");
        let headers = request.headers_mut();
        for (k, v) in &self.headers {
            headers.insert(k.clone(), v.clone());
        }
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(TIMESTAMP_HEADER, HeaderValue::from(timestamp));
        let signature = sign(self.secret.expose().as_bytes(), timestamp, &body);
        headers.insert(
            SIGNATURE_HEADER,
            HeaderValue::from_str(&signature).expect("hex"),
        );
        let key = format!("{}-{}", snapshot.tenant, snapshot.seq);
        headers.insert(
            "idempotency-key",
            HeaderValue::from_str(&key).expect("tenant names are header-safe"),
        );
        let what = format!("POST {} seq {}", self.url, snapshot.seq);
        let answer = self.client.send(request, &what).await?;
        if !answer.status.is_success() {
            return Err(error_for(&answer, &what, ""));
        }
        // Re-delivering a seq the receiver already acknowledged (periodic reconcile) is not
        // a change of the receiver's state.
        let mut delivered = self.delivered.lock().expect("not poisoned");
        let before = delivered.insert(snapshot.tenant.clone(), snapshot.seq);
        Ok(if before == Some(snapshot.seq) {
            Applied::Unchanged
        } else {
            Applied::Changed
        })
    }
}

/// The JSON body of one delivery: the snapshot in the webhook's documented shape.
fn body_of(snapshot: &TenantSnapshot) -> Bytes {
    let addresses: Vec<String> = snapshot
        .addresses
        .iter()
        .map(|a| a.address.to_string())
        .collect();
    let payload = Payload {
        tenant: &snapshot.tenant,
        seq: snapshot.seq,
        generated_at: humantime::format_rfc3339_millis(snapshot.decided_at).to_string(),
        ttl: snapshot.ttl.as_secs(),
        mode: snapshot.mode,
        policy: snapshot.policy,
        default_geo: snapshot.default_geo.as_deref(),
        records: snapshot
            .domains
            .iter()
            .map(|d| (d.as_str(), addresses.clone()))
            .collect(),
        endpoints: &snapshot.addresses,
        changes: &snapshot.changes,
        votes: snapshot.votes.as_deref(),
    };
    Bytes::from(serde_json::to_vec(&payload).expect("serializable"))
}

#[cfg(test)]
mod tests {
    use super::sign;

    #[test]
    fn signature_matches_a_known_hmac() {
        // HMAC-SHA256("key", "1700000000.{}") computed independently with Python's hmac module.
        assert_eq!(
            sign(b"key", 1_700_000_000, b"{}"),
            "sha256=9d713ed406bb7076d4123f0dc2c39d2df5c654ed4b0cd56b52c8b4c940bd63ae"
        );
    }
}
