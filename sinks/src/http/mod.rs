//! The HTTP client the network sinks share, and the retry policy for HTTP answers:
//! connection errors, timeouts, 5xx and 429 are retried (429 and 503 not before their
//! `Retry-After`, which also holds every other request of the sink to that provider);
//! other 4xx are reported and not hammered.

mod shared;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use ho_config::TlsCheck;
use ho_engine::sink::SinkError;
use ho_engine::tls_client::TlsError;
use http_body_util::{BodyExt, Full};
use hyper::header::RETRY_AFTER;
use hyper::{Request, StatusCode};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use tokio::time::Instant;

use crate::retry_after::{self, Holds};

/// Most response bytes read (error texts and zone listings are small; a huge answer is cut).
const MAX_RESPONSE: usize = 16 * 1024 * 1024;

/// Most idle keep-alive connections kept to one provider by all the sinks sharing a pool. A
/// sink writes its tenants in parallel (one write per tenant at a time), so a burst of
/// publishes opens about as many connections as there are tenants; each kept idle holds
/// about 27 KiB (hyper's read and write buffers and its dispatch channel). Past this many,
/// a connection is closed when its exchange ends, so what is kept between publishes does
/// not grow with tenants or sinks.
/// The cap bounds only what is kept: a write never waits for a connection, it opens one.
pub const MAX_IDLE_PER_HOST: usize = 4;

/// How long an idle connection is kept: past the gap between a tenant's publishes under
/// churn, well under a receiver's usual keep-alive (nginx 75 s), so the sink rarely picks
/// a connection the other end is closing.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// A pooled HTTP/1.1 client with rustls for `https://` URLs; its pool and TLS configuration
/// are shared with every sink trusting the same way (`shared`).
#[derive(Clone)]
pub struct HttpClient {
    client: Arc<shared::Pooled>,
    timeout: Duration,
    /// Providers that asked to be left alone (`Retry-After` on a 429 or 503) until when.
    holds: Holds,
}

/// A complete response.
pub struct Answer {
    /// Status code.
    pub status: StatusCode,
    /// How long `Retry-After` asked to wait (either form), if sent and readable.
    pub retry_after: Option<Duration>,
    /// `Content-Type`, if sent.
    pub content_type: Option<String>,
    /// Body (up to 16 MiB).
    pub body: Bytes,
}

/// An HTTP/1.1 connector for `http://` and `https://` URLs with rustls (ring), trusting
/// `trust`: the one TLS set-up of every outgoing HTTP client (sinks, OTLP export).
pub fn connector(trust: &TlsCheck) -> Result<HttpsConnector<HttpConnector>, TlsError> {
    let mut tls = ho_engine::tls_client::client_config(trust)?;
    // hyper-rustls sets ALPN from the enabled HTTP versions itself.
    tls.alpn_protocols.clear();
    Ok(hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .build())
}

impl HttpClient {
    /// A client trusting `trust`, with `timeout` over each whole exchange.
    pub fn new(trust: &TlsCheck, timeout: Duration) -> Result<HttpClient, TlsError> {
        Ok(HttpClient {
            client: shared::client(trust)?,
            timeout,
            holds: Holds::default(),
        })
    }

    /// Sends `request`, not before a hold its provider asked for has passed; `what` names
    /// the exchange in errors (e.g. `PATCH zone example.org.`).
    pub async fn send(
        &self,
        request: Request<Full<Bytes>>,
        what: &str,
    ) -> Result<Answer, SinkError> {
        let provider = request
            .uri()
            .authority()
            .map_or_else(String::new, |a| a.as_str().to_ascii_lowercase());
        self.holds.wait(&provider).await;
        let answer = self.exchange(request, what).await?;
        if let (true, Some(wait)) = (asks_to_wait(answer.status), answer.retry_after) {
            self.holds.hold(&provider, Instant::now() + wait);
        }
        Ok(answer)
    }

    /// One exchange within the timeout.
    async fn exchange(
        &self,
        request: Request<Full<Bytes>>,
        what: &str,
    ) -> Result<Answer, SinkError> {
        let exchange = async {
            let response = self.client.request(request).await.map_err(|e| {
                let mut text = e.to_string();
                let mut source = std::error::Error::source(&e);
                while let Some(inner) = source {
                    text = format!("{text}: {inner}");
                    source = inner.source();
                }
                SinkError::retriable(format!("{what}: {text}"))
            })?;
            let status = response.status();
            let retry_after = response
                .headers()
                .get(RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| retry_after::parse(v, SystemTime::now()));
            let content_type = response
                .headers()
                .get(hyper::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let body = http_body_util::Limited::new(response.into_body(), MAX_RESPONSE)
                .collect()
                .await
                .map_err(|e| SinkError::retriable(format!("{what}: reading the answer: {e}")))?
                .to_bytes();
            Ok(Answer {
                status,
                retry_after,
                content_type,
                body,
            })
        };
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(SinkError::retriable(format!(
                "{what}: no answer within {}",
                humantime::format_duration(self.timeout)
            ))),
        }
    }
}

/// A JSON request to `url` carrying `Authorization: Bearer <token>`: the shape of every
/// cloud DNS API the sinks speak (Cloudflare, Cloud DNS, Azure Resource Manager).
pub fn bearer_json(
    method: hyper::Method,
    url: &str,
    token: &str,
    body: Bytes,
    what: &str,
) -> Result<Request<Full<Bytes>>, SinkError> {
    use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE};
    let mut request = Request::new(Full::new(body));
    *request.method_mut() = method;
    *request.uri_mut() = url
        .parse()
        .map_err(|e| SinkError::permanent(format!("{what}: {e}")))?;
    let headers = request.headers_mut();
    headers.insert(
        AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {token}")).unwrap_or(HeaderValue::from_static("")),
    );
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(request)
}

/// Whether `status` is one whose `Retry-After` says when to ask again (RFC 9110: 429 and
/// 503; on a 3xx it is a redirect's pause, which the sinks do not follow).
fn asks_to_wait(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE
}

/// Turns a non-success answer into an error with the retry policy applied; `detail` is the
/// back end's own error text when it has one.
pub fn error_for(answer: &Answer, what: &str, detail: &str) -> SinkError {
    let status = answer.status;
    let detail = if detail.is_empty() {
        String::from_utf8_lossy(&answer.body[..answer.body.len().min(300)])
            .trim()
            .to_owned()
    } else {
        detail.to_owned()
    };
    let message = format!(
        "{what}: HTTP {}{}",
        status.as_u16(),
        if detail.is_empty() {
            String::new()
        } else {
            format!(": {detail}")
        }
    );
    if status == StatusCode::TOO_MANY_REQUESTS {
        SinkError::throttled(message, answer.retry_after)
    } else if status == StatusCode::SERVICE_UNAVAILABLE {
        SinkError {
            retry_after: answer.retry_after,
            ..SinkError::retriable(message)
        }
    } else if status.is_server_error() || status == StatusCode::REQUEST_TIMEOUT {
        SinkError::retriable(message)
    } else {
        SinkError::permanent(message)
    }
}
