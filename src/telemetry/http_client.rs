//! The HTTP client of the http/protobuf exporter: hyper with rustls (ring) and the system's
//! root certificates, the same TLS stack as the probes and sinks, instead of pulling in
//! reqwest.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};

/// Sends OTLP requests over HTTP or HTTPS.
#[derive(Debug, Clone)]
pub struct RustlsClient {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    timeout: Duration,
}

impl RustlsClient {
    /// A client whose requests (connect to last body byte) end after `timeout`.
    pub fn new(timeout: Duration) -> anyhow::Result<RustlsClient> {
        let trust = ho_config::TlsCheck::verify_with(None);
        let connector = ho_sinks::http::connector(&trust)?;
        Ok(RustlsClient {
            client: Client::builder(TokioExecutor::new()).build(connector),
            timeout,
        })
    }
}

#[async_trait::async_trait]
impl HttpClient for RustlsClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let request = request.map(Full::new);
        let exchange = async {
            let response = self.client.request(request).await?;
            let (parts, body) = response.into_parts();
            let body = body.collect().await?.to_bytes();
            Ok::<_, HttpError>(Response::from_parts(parts, body))
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| HttpError::from(format!("no answer within {:?}", self.timeout)))?
    }
}
