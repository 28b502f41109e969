//! `kind = "dns_endpoint"`: settings, checks and capabilities.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ho_config::names::check_kube_name;
use ho_config::{Claim, FieldError, RoutingPolicy, SinkSpec, TenantUse};
use schemars::JsonSchema;
use serde::Deserialize;

use ho_engine::sink::kind::{
    check_timeout, default_timeout, plain_lists_only, BuildContext, KindFuture, Problems,
    SinkSettings,
};

/// One external-dns `DNSEndpoint` per tenant, for an external-dns deployed with
/// `--source=crd` to carry to whichever provider it runs.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DnsEndpointConfig {
    /// Namespace of the DNSEndpoint objects (external-dns must watch it:
    /// `--namespace`, or all namespaces).
    pub namespace: String,
    /// Kubeconfig file, for running outside the cluster. Unset: the in-cluster service
    /// account, else `$KUBECONFIG` / `~/.kube/config`.
    #[serde(default)]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use instead of the file's current one.
    #[serde(default)]
    pub context: Option<String>,
    /// Deadline of one API request.
    #[serde(default = "default_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub timeout: Duration,
}

impl SinkSettings for DnsEndpointConfig {
    const KIND: &'static str = "dns_endpoint";

    fn check(&mut self, p: &mut Problems<'_>) {
        if let Err(e) = check_kube_name(&self.namespace, 63) {
            p.at("namespace", e);
        }
        if self
            .kubeconfig
            .as_ref()
            .is_some_and(|f| f.as_os_str().is_empty())
        {
            p.at("kubeconfig", "must not be empty when set");
        }
        if self.context.as_ref().is_some_and(String::is_empty) {
            p.at("context", "must not be empty when set");
        }
        check_timeout(self.timeout, p);
    }

    fn build<'a>(&'a self, ctx: BuildContext<'a>) -> KindFuture<'a> {
        Box::pin(async move {
            Ok(Arc::new(super::DnsEndpointSink::new(self, ctx.owner_id).await?) as _)
        })
    }

    fn preflight(&self, p: &mut Problems<'_>) {
        crate::client::preflight_kubeconfig(self.kubeconfig.as_deref(), p);
    }
}

impl SinkSpec for DnsEndpointConfig {
    fn kind(&self) -> &'static str {
        Self::KIND
    }

    /// A DNSEndpoint lists each name's addresses; weights and locations would be
    /// `providerSpecific` properties of the provider external-dns runs.
    fn supports(&self, policy: RoutingPolicy) -> Result<(), &'static str> {
        plain_lists_only(policy)
    }

    fn check_tenant(&self, _: &str, _: &TenantUse<'_>, _: &mut Vec<FieldError>) {}

    fn claim(&self) -> Option<Claim> {
        Some(Claim {
            key: format!("dnsendpoints:{}", self.namespace),
            field: "namespace",
            clash: |other| {
                format!("same namespace of DNSEndpoints as sinks.{other}; two sinks would fight over their objects")
            },
        })
    }
}
