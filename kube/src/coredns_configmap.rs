//! `kind = "coredns_configmap"`: one key per tenant, its `hosts_key` (`<tenant>.hosts`), in a Kubernetes
//! ConfigMap that CoreDNS mounts and reads with its `hosts` plugin (see `deploy/coredns`).
//!
//! Each write reads the ConfigMap and, only if the tenant's key differs, sends a JSON merge
//! patch of that one key carrying the `resourceVersion` it read. The API server refuses the
//! patch with 409 if anyone changed the ConfigMap in between, so a concurrent edit of another
//! key is never overwritten; the sink then reads again and retries (a few times, then the
//! sink actor's backoff takes over). Other keys are never touched. The content is the
//! `hosts_file` sink's, rendered by the same code.

pub mod config;

use std::collections::BTreeMap;
use std::sync::Arc;

use self::config::CorednsConfigMapConfig;
use ho_engine::sink::{Applied, Sink, SinkError, SinkFuture};
use ho_engine::snapshot::TenantSnapshot;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::Api;

use crate::client::{self, KubeClient};
use ho_engine::sink::hosts_format::render;
use ho_engine::sink::SetupError;

/// Field manager recorded in the ConfigMap's `managedFields` for our keys.
const FIELD_MANAGER: &str = "health-orchestrator";

/// Kubernetes refuses objects above 1 MiB (etcd's request limit); checked before writing so
/// the error says what to do instead of a bare 413/422.
const MAX_CONFIGMAP_BYTES: usize = 1024 * 1024;

/// Read-then-patch rounds tried in one write when the ConfigMap keeps changing underneath.
const CONFLICT_ROUNDS: usize = 3;

/// Writes tenants' hosts content into one ConfigMap.
pub struct CorednsConfigMapSink {
    inner: Arc<Inner>,
}

struct Inner {
    api: Api<ConfigMap>,
    namespace: String,
    name: String,
    create: bool,
    server: String,
}

impl CorednsConfigMapSink {
    /// Connects the client: the given kubeconfig (and context), else the in-cluster service
    /// account, else `$KUBECONFIG` / `~/.kube/config`. Nothing is sent yet; a wrong
    /// kubeconfig fails here, an unreachable API at the first write.
    pub async fn new(config: &CorednsConfigMapConfig) -> Result<CorednsConfigMapSink, SetupError> {
        let KubeClient { client, server, .. } = client::connect(
            config.kubeconfig.as_deref(),
            config.context.as_deref(),
            config.timeout,
        )
        .await
        .map_err(SetupError::client)?;
        Ok(CorednsConfigMapSink {
            inner: Arc::new(Inner {
                api: Api::namespaced(client, &config.namespace),
                namespace: config.namespace.clone(),
                name: config.name.clone(),
                create: config.create,
                server,
            }),
        })
    }
}

impl Sink for CorednsConfigMapSink {
    fn kind(&self) -> &'static str {
        "coredns_configmap"
    }

    fn apply(&self, snapshot: Arc<TenantSnapshot>) -> SinkFuture {
        let inner = self.inner.clone();
        Box::pin(async move {
            let key = snapshot.hosts_key.clone();
            let content = render(&snapshot);
            for _ in 0..CONFLICT_ROUNDS {
                match inner.write_once(&key, &content).await? {
                    Round::Done(applied) => return Ok(applied),
                    Round::Conflict => continue,
                }
            }
            Err(SinkError::retriable(format!(
                "ConfigMap {} changed under every one of {CONFLICT_ROUNDS} writes in a row (409 Conflict); retrying",
                inner.object()
            )))
        })
    }
}

/// How one read-then-write round ended.
enum Round {
    Done(Applied),
    /// Someone changed the ConfigMap between our read and our write.
    Conflict,
}

impl Inner {
    fn object(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    async fn write_once(&self, key: &str, content: &str) -> Result<Round, SinkError> {
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        let Some(current) = self
            .api
            .get_opt(&self.name)
            .await
            .map_err(|e| self.error("get", e))?
        else {
            return self.create(key, content).await;
        };
        let data = current.data.as_ref();
        if data.and_then(|d| d.get(key)).map(String::as_str) == Some(content) {
            return Ok(Round::Done(Applied::Unchanged));
        }
        let old_entry = data
            .and_then(|d| d.get(key))
            .map_or(0, |v| key.len() + v.len());
        let size_after = size_of(&current) - old_entry + key.len() + content.len();
        if size_after > MAX_CONFIGMAP_BYTES {
            return Err(SinkError::permanent(format!(
                "ConfigMap {} would grow to {size_after} bytes with key {key}, above Kubernetes' 1 MiB limit; split the tenants over several ConfigMap sinks",
                self.object()
            )));
        }
        let patch = serde_json::json!({
            "metadata": { "resourceVersion": current.metadata.resource_version },
            "data": { key: content },
        });
        match self
            .api
            .patch(&self.name, &params, &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(Round::Done(Applied::Changed)),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(Round::Conflict),
            Err(e) => Err(self.error("patch", e)),
        }
    }

    async fn create(&self, key: &str, content: &str) -> Result<Round, SinkError> {
        if !self.create {
            return Err(SinkError::permanent(format!(
                "ConfigMap {} does not exist; create it (deploy/kubernetes has one) or set create = true",
                self.object()
            )));
        }
        let configmap = ConfigMap {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/managed-by".to_string(),
                    FIELD_MANAGER.to_string(),
                )])),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([(key.to_string(), content.to_string())])),
            ..ConfigMap::default()
        };
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        match self.api.create(&params, &configmap).await {
            Ok(_) => Ok(Round::Done(Applied::Changed)),
            // Created by someone else since we looked: patch it in the next round.
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(Round::Conflict),
            Err(e) => Err(self.error("create", e)),
        }
    }

    /// Turns a client error into one that names what to fix.
    fn error(&self, verb: &str, e: kube::Error) -> SinkError {
        crate::api_error::Target {
            kind: "ConfigMap",
            resource: "configmaps",
            namespace: &self.namespace,
            name: &self.name,
            server: &self.server,
            missing: "create it (deploy/kubernetes has one) or set create = true",
            by_name: true,
        }
        .error(verb, e)
    }
}

/// Bytes the ConfigMap's data takes (keys and values), the part that grows with tenants.
fn size_of(configmap: &ConfigMap) -> usize {
    let text: usize = configmap
        .data
        .iter()
        .flatten()
        .map(|(k, v)| k.len() + v.len())
        .sum();
    let binary: usize = configmap
        .binary_data
        .iter()
        .flatten()
        .map(|(k, v)| k.len() + v.0.len())
        .sum();
    text + binary
}
