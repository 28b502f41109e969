//! `[kubernetes]`: tenants as namespaced resources, and which namespace may claim what.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `[kubernetes]`: watch `DNSFailover` resources (`healthorchestrator.io/v1alpha1`) and publish each as a
/// tenant on top of the `[[tenants]]` of the files. Only namespaces listed in `allow` can
/// claim anything: a resource elsewhere is refused with a status condition and never
/// reaches DNS.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KubernetesConfig {
    /// Off: resources are not watched (the files alone say what is published).
    #[serde(default)]
    pub tenants: bool,
    /// Also publish Kuadrant's `DNSRecord`s (with the namespace's `DNSHealthCheckProbe`s and
    /// `DNSPolicy`), translated as `import --from kuadrant` does, under the same allowances;
    /// their `Ready` condition says what became of them. Off by default: Kuadrant's own
    /// operator may own these resources.
    #[serde(default)]
    pub kuadrant: bool,
    /// With `kuadrant`: make the default DNSPolicy (round robin, `GATEWAY-dns`) for every
    /// Gateway of an allowed namespace that no DNSPolicy targets, as Kuadrant's design has
    /// its controller do when it discovers a Gateway; the team may then edit or replace
    /// it. A Gateway annotated `healthorchestrator.io/default-dns-policy: "false"` gets
    /// none. Off by default.
    #[serde(default)]
    pub kuadrant_default_policy: bool,
    /// A ConfigMap (in the namespace of `kubeconfig`'s context, or the pod's own) where
    /// what operators set (drains, forced health, held fail-backs) is kept for every
    /// replica: an action sent to any replica through the Service is applied by all of
    /// them within a second. Unset: each replica keeps its own in `state_dir`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_state: Option<String>,
    /// A kubeconfig file. Unset: the in-cluster service account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<PathBuf>,
    /// What each namespace may claim. A namespace may appear once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<NamespaceAllowance>,
}

/// `[[kubernetes.allow]]`: one team's namespace and what its resources may claim.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NamespaceAllowance {
    /// The namespace.
    pub namespace: String,
    /// Domain suffixes its resources may publish: `team-a.io` allows `team-a.io` itself and
    /// every name under it (`api.team-a.io`), never `evilteam-a.io`.
    pub domains: Vec<String>,
    /// Names of `[sinks.*]` its resources may publish to.
    pub sinks: Vec<String>,
    /// Whether its resources may select Nodes as gateways (Nodes are shared by every
    /// team, so this is granted explicitly).
    #[serde(default)]
    pub nodes: bool,
    /// With `kuadrant`: the Secrets of the namespace its health checks may name as
    /// `additionalHeadersRef`, the only ones read (the same list grants `get` on them by
    /// name in `deploy/kubernetes/kuadrant/probe-header-secrets.yaml`); a probe or policy
    /// naming another is refused alone. Unset: any Secret a health check names is read,
    /// as far as RBAC allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header_secrets: Option<Vec<String>>,
}
