//! `kind = "coredns_configmap"`: settings, checks and capabilities.

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

/// One key per tenant (`<tenant>.hosts`) in a Kubernetes ConfigMap that CoreDNS's `hosts`
/// plugin reads (mounted as files).
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CorednsConfigMapConfig {
    /// Namespace of the ConfigMap (CoreDNS's, usually `kube-system`, or your own).
    pub namespace: String,
    /// Name of the ConfigMap. Keys other than the tenants' `<tenant>.hosts` are left alone.
    pub name: String,
    /// Kubeconfig file, for running outside the cluster. Unset: the in-cluster service
    /// account, else `$KUBECONFIG` / `~/.kube/config`.
    #[serde(default)]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use instead of the file's current one.
    #[serde(default)]
    pub context: Option<String>,
    /// Create the ConfigMap when it is missing. Off by default: a missing ConfigMap usually
    /// means a wrong name or namespace, and CoreDNS would not be reading a new one.
    #[serde(default)]
    pub create: bool,
    /// Deadline of one API request.
    #[serde(default = "default_timeout", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub timeout: Duration,
}

impl SinkSettings for CorednsConfigMapConfig {
    const KIND: &'static str = "coredns_configmap";

    fn check(&mut self, p: &mut Problems<'_>) {
        if let Err(e) = check_kube_name(&self.namespace, 63) {
            p.at("namespace", e);
        }
        if let Err(e) = check_kube_name(&self.name, 253) {
            p.at("name", e);
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

    fn build<'a>(&'a self, _: BuildContext<'a>) -> KindFuture<'a> {
        Box::pin(async move { Ok(Arc::new(super::CorednsConfigMapSink::new(self).await?) as _) })
    }

    fn preflight(&self, p: &mut Problems<'_>) {
        crate::client::preflight_kubeconfig(self.kubeconfig.as_deref(), p);
    }
}

impl SinkSpec for CorednsConfigMapConfig {
    fn kind(&self) -> &'static str {
        Self::KIND
    }

    /// A hosts file in a ConfigMap lists addresses; it cannot answer per client.
    fn supports(&self, policy: RoutingPolicy) -> Result<(), &'static str> {
        plain_lists_only(policy)
    }

    fn check_tenant(&self, _: &str, _: &TenantUse<'_>, _: &mut Vec<FieldError>) {}

    fn claim(&self) -> Option<Claim> {
        Some(Claim {
            key: format!("configmap:{}/{}", self.namespace, self.name),
            field: "name",
            clash: |other| {
                format!("same ConfigMap as sinks.{other}; two sinks would fight over it")
            },
        })
    }
}
