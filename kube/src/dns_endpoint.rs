//! `kind = "dns_endpoint"`: each tenant as an external-dns `DNSEndpoint`
//! (`externaldns.k8s.io/v1alpha1`, the CRD from external-dns's repository) named
//! `ho-<tenant>` in one namespace, so an external-dns deployed with `--source=crd` carries it
//! to whichever provider it runs (the way k8gb reaches every provider). Each name of the
//! tenant is an `A` and an `AAAA` endpoint with the tenant's TTL.
//!
//! Objects are ours only with the label `app.kubernetes.io/managed-by: health-orchestrator`
//! and the annotation `healthorchestrator.io/owner` naming this `owner_id`; an object of the
//! same name without them is left alone and reported, as the ConfigMap sink leaves other
//! keys alone. Each write reads the object and, only when its endpoints differ, sends a
//! JSON merge patch of `spec.endpoints` carrying the `resourceVersion` it read (409 when
//! someone changed it meanwhile: read again at the retry). A tenant with nothing to publish
//! has its object deleted (external-dns then deletes the records it made from it).
//! external-dns reports what it has applied in the object's `status.observedGeneration`.

pub mod config;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use ho_engine::sink::{Applied, Sink, SinkError, SinkFuture};
use ho_engine::snapshot::TenantSnapshot;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ObjectMeta, Patch, PatchParams,
    PostParams, Preconditions,
};
use kube::Api;
use serde_json::{json, Value};

use self::config::DnsEndpointConfig;
use crate::api_error::Target;
use crate::client::{self, KubeClient};
use ho_engine::sink::SetupError;

/// Field manager of our writes, and the `managed-by` label's value.
const FIELD_MANAGER: &str = "health-orchestrator";
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
const OWNER: &str = "healthorchestrator.io/owner";
const TENANT: &str = "healthorchestrator.io/tenant";

/// Writes tenants as DNSEndpoint objects in one namespace.
pub struct DnsEndpointSink {
    inner: Arc<Inner>,
}

struct Inner {
    api: Api<DynamicObject>,
    resource: ApiResource,
    namespace: String,
    server: String,
    owner_id: String,
}

impl DnsEndpointSink {
    /// Connects the client as the ConfigMap sink does; nothing is sent yet.
    pub async fn new(
        config: &DnsEndpointConfig,
        owner_id: &str,
    ) -> Result<DnsEndpointSink, SetupError> {
        let KubeClient { client, server, .. } = client::connect(
            config.kubeconfig.as_deref(),
            config.context.as_deref(),
            config.timeout,
        )
        .await
        .map_err(SetupError::client)?;
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("externaldns.k8s.io", "v1alpha1", "DNSEndpoint"),
            "dnsendpoints",
        );
        Ok(DnsEndpointSink {
            inner: Arc::new(Inner {
                api: Api::namespaced_with(client, &config.namespace, &resource),
                resource,
                namespace: config.namespace.clone(),
                server,
                owner_id: owner_id.to_owned(),
            }),
        })
    }
}

impl Sink for DnsEndpointSink {
    fn kind(&self) -> &'static str {
        "dns_endpoint"
    }

    fn apply(&self, snapshot: Arc<TenantSnapshot>) -> SinkFuture {
        let inner = self.inner.clone();
        Box::pin(async move { inner.write(&snapshot).await })
    }
}

/// The object name of `tenant`: `ho-` and the tenant in DNS-1123 form.
pub fn object_name(tenant: &str) -> String {
    let name: String = tenant
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("ho-{}", name.trim_end_matches(['-', '.']))
}

/// The endpoints `snapshot` publishes, as external-dns's `endpoint.Endpoint` JSON: per
/// name an `A` and an `AAAA` endpoint when it has addresses of that family.
fn endpoints(snapshot: &TenantSnapshot) -> Vec<Value> {
    let ttl = snapshot.ttl.as_secs();
    let mut out = Vec::new();
    for name in &snapshot.domains {
        for (record_type, v6) in [("A", false), ("AAAA", true)] {
            let mut targets: Vec<IpAddr> = snapshot
                .addresses
                .iter()
                .map(|a| a.address)
                .filter(|a| a.is_ipv6() == v6)
                .collect();
            targets.sort();
            if !targets.is_empty() {
                let targets: Vec<String> = targets.iter().map(IpAddr::to_string).collect();
                out.push(json!({"dnsName": name, "recordType": record_type,
                                "targets": targets, "recordTTL": ttl}));
            }
        }
    }
    out
}

impl Inner {
    fn target<'a>(&'a self, name: &'a str) -> Target<'a> {
        Target {
            kind: "DNSEndpoint",
            resource: "dnsendpoints.externaldns.k8s.io",
            namespace: &self.namespace,
            name,
            server: &self.server,
            missing: "install external-dns's DNSEndpoint CRD (its Helm chart's crd.create, or config/crd/standard/dnsendpoints.externaldns.k8s.io.yaml of its repository)",
            by_name: false,
        }
    }

    /// Whether `object` is ours: our label and our owner.
    fn ours(&self, object: &DynamicObject) -> bool {
        let meta = &object.metadata;
        meta.labels
            .as_ref()
            .and_then(|l| l.get(MANAGED_BY))
            .map(String::as_str)
            == Some(FIELD_MANAGER)
            && meta.annotations.as_ref().and_then(|a| a.get(OWNER)) == Some(&self.owner_id)
    }

    async fn write(&self, snapshot: &TenantSnapshot) -> Result<Applied, SinkError> {
        let name = object_name(&snapshot.tenant);
        let target = self.target(&name);
        let wanted = Value::Array(endpoints(snapshot));
        let current = self
            .api
            .get_opt(&name)
            .await
            .map_err(|e| target.error("get", e))?;
        let Some(current) = current else {
            if wanted.as_array().is_some_and(Vec::is_empty) {
                return Ok(Applied::Unchanged);
            }
            return self.create(&name, &snapshot.tenant, wanted).await;
        };
        if !self.ours(&current) {
            return Err(SinkError::permanent(format!(
                "DNSEndpoint {}/{name} exists without this orchestrator's label {MANAGED_BY}={FIELD_MANAGER} and owner annotation {OWNER}={}: left alone; delete or rename it",
                self.namespace, self.owner_id
            )));
        }
        let tenant_of = current
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(TENANT));
        if tenant_of.is_some_and(|t| *t != snapshot.tenant) {
            return Err(SinkError::permanent(format!(
                "DNSEndpoint {}/{name} holds tenant {:?}, and tenant {:?} maps to the same name: rename one of them",
                self.namespace,
                tenant_of.cloned().unwrap_or_default(),
                snapshot.tenant
            )));
        }
        let version = current.metadata.resource_version.clone();
        if wanted.as_array().is_some_and(Vec::is_empty) {
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    resource_version: version,
                    uid: None,
                }),
                ..DeleteParams::default()
            };
            return match self.api.delete(&name, &params).await {
                Ok(_) => Ok(Applied::Changed),
                Err(e) => Err(target.error("delete", e)),
            };
        }
        if current.data.pointer("/spec/endpoints") == Some(&wanted) {
            return Ok(Applied::Unchanged);
        }
        let patch = json!({
            "metadata": { "resourceVersion": version },
            "spec": { "endpoints": wanted },
        });
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        self.api
            .patch(&name, &params, &Patch::Merge(&patch))
            .await
            .map(|_| Applied::Changed)
            .map_err(|e| target.error("patch", e))
    }

    async fn create(&self, name: &str, tenant: &str, wanted: Value) -> Result<Applied, SinkError> {
        let mut object = DynamicObject::new(name, &self.resource).within(&self.namespace);
        object.metadata = ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(self.namespace.clone()),
            labels: Some(BTreeMap::from([(MANAGED_BY.into(), FIELD_MANAGER.into())])),
            annotations: Some(BTreeMap::from([
                (OWNER.into(), self.owner_id.clone()),
                (TENANT.into(), tenant.to_owned()),
            ])),
            ..ObjectMeta::default()
        };
        object.data = json!({ "spec": { "endpoints": wanted } });
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        self.api
            .create(&params, &object)
            .await
            .map(|_| Applied::Changed)
            .map_err(|e| self.target(name).error("create", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_names_become_dns_1123_object_names() {
        assert_eq!(object_name("shop"), "ho-shop");
        assert_eq!(object_name("Api_EU.example.com"), "ho-api-eu.example.com");
        assert_eq!(object_name("t-"), "ho-t");
    }
}
