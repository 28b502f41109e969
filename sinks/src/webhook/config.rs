//! `kind = "webhook"`: settings, checks and capabilities.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ho_config::names::{check_header_name, check_header_value, check_url};
use ho_config::{FieldError, RoutingPolicy, SinkSpec, TenantUse};
use schemars::JsonSchema;
use serde::Deserialize;

use ho_engine::sink::kind::{
    check_timeout, default_timeout, BuildContext, KindFuture, Problems, SinkSettings,
};

/// A signed JSON POST of every snapshot to any HTTP receiver.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// Receiver URL (`http://` or `https://`).
    pub url: String,
    /// File holding the HMAC secret.
    #[serde(default)]
    pub secret_file: Option<PathBuf>,
    /// Environment variable holding the HMAC secret.
    #[serde(default)]
    pub secret_env: Option<String>,
    /// Extra request headers (e.g. a bearer token the receiver wants).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Accept any TLS certificate. Opt-in.
    #[serde(default)]
    pub insecure: bool,
    /// Trust these CAs instead of the system roots.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Deadline of one delivery.
    #[serde(default = "default_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub timeout: Duration,
}

impl SinkSettings for WebhookConfig {
    const KIND: &'static str = "webhook";

    fn check(&mut self, p: &mut Problems<'_>) {
        if let Err(e) = check_url(&self.url) {
            p.at("url", e);
        }
        ho_engine::sink::kind::check_secret_source(
            self.secret_file.is_some(),
            self.secret_env.as_deref(),
            ("secret_file", "secret_env"),
            p,
        );
        for (h, v) in &self.headers {
            if let Err(e) = check_header_name(h).and_then(|_| check_header_value(v)) {
                p.at(&format!("headers.{h}"), e);
            }
        }
        if self.insecure && self.ca_file.is_some() {
            p.at(
                "insecure",
                "insecure = true ignores ca_file; set one or the other",
            );
        }
        check_timeout(self.timeout, p);
    }

    fn build<'a>(&'a self, _: BuildContext<'a>) -> KindFuture<'a> {
        Box::pin(async move { Ok(Arc::new(super::WebhookSink::new(self)?) as _) })
    }

    fn preflight(&self, p: &mut Problems<'_>) {
        ho_engine::sink::kind::preflight_secret(
            self.secret_file.as_deref(),
            self.secret_env.as_deref(),
            ("secret_file", "secret_env"),
            p,
        );
        if let Some(ca_file) = &self.ca_file {
            let trust = ho_config::TlsCheck::verify_with(Some(ca_file.clone()));
            if let Err(e) = ho_engine::tls_client::client_config(&trust) {
                p.at("ca_file", e.to_string());
            }
        }
    }
}

impl SinkSpec for WebhookConfig {
    fn kind(&self) -> &'static str {
        Self::KIND
    }

    /// The receiver gets every address with its weight and labels: any policy.
    fn supports(&self, _: RoutingPolicy) -> Result<(), &'static str> {
        Ok(())
    }

    fn check_tenant(&self, _: &str, _: &TenantUse<'_>, _: &mut Vec<FieldError>) {}

    fn unverified_tls(&self) -> bool {
        self.insecure
    }
}
