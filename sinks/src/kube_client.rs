//! A Kubernetes API client for the parts that talk to the API server (the ConfigMap sink,
//! the leader election Lease), connected the same way everywhere.

use std::path::Path;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// A connected client and what it connected to.
pub struct KubeClient {
    /// The client.
    pub client: Client,
    /// The API server's URL, for error messages.
    pub server: String,
    /// The namespace of the kubeconfig context, or the pod's own in the cluster.
    pub default_namespace: String,
}

/// Connects: the given kubeconfig file (and context), else the in-cluster service account,
/// else `$KUBECONFIG` / `~/.kube/config`. Nothing is sent yet: a wrong kubeconfig fails
/// here, an unreachable API at the first request. Every request is cut at `timeout`.
pub async fn connect(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
    timeout: Duration,
) -> Result<KubeClient, String> {
    let options = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..KubeConfigOptions::default()
    };
    let mut config = match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path)
                .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?;
            Config::from_custom_kubeconfig(file, &options)
                .await
                .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?
        }
        None if context.is_some() => Config::from_kubeconfig(&options)
            .await
            .map_err(|e| format!("kubeconfig: {e}"))?,
        None => Config::infer()
            .await
            .map_err(|e| format!("no Kubernetes credentials: {e}"))?,
    };
    config.connect_timeout = Some(timeout);
    config.read_timeout = Some(timeout);
    config.write_timeout = Some(timeout);
    let server = config.cluster_url.to_string();
    let default_namespace = config.default_namespace.clone();
    let client = Client::try_from(config).map_err(|e| format!("Kubernetes client: {e}"))?;
    Ok(KubeClient {
        client,
        server,
        default_namespace,
    })
}
