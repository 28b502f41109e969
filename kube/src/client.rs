//! A Kubernetes API client for every part that talks to the API server (the ConfigMap
//! sink, the leader election Lease, the cluster id), connected the same way everywhere.

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

/// Why no client could be made; the message names the file or source that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The kubeconfig file (or `$KUBECONFIG`/`~/.kube/config` with a context) is unusable.
    #[error("kubeconfig{}: {message}", .file.as_deref().map(|f| format!(" {f}")).unwrap_or_default())]
    Kubeconfig {
        /// The file named in the config, if one was.
        file: Option<String>,
        /// What was wrong with it.
        message: String,
    },
    /// Neither in-cluster credentials nor a kubeconfig were found.
    #[error("no Kubernetes credentials: {0}")]
    NoCredentials(String),
    /// The client could not be built from the credentials found.
    #[error("Kubernetes client: {0}")]
    Client(String),
}

/// Connects: the given kubeconfig file (and context), else the in-cluster service account,
/// else `$KUBECONFIG` / `~/.kube/config`. Nothing is sent yet: a wrong kubeconfig fails
/// here, an unreachable API at the first request. Every request is cut at `timeout`.
pub async fn connect(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
    timeout: Duration,
) -> Result<KubeClient, ConnectError> {
    connect_with(kubeconfig, context, timeout, timeout).await
}

/// How long a watch may stay silent: longer than the 290 s kube-runtime asks the server
/// to keep a watch open, so a quiet watch ends by the server's timeout (and resumes from
/// its resourceVersion) rather than by ours.
const WATCH_READ_TIMEOUT: Duration = Duration::from_secs(300);

/// [`connect`] for a client that watches: connecting and sending are cut at `timeout`,
/// reading only after [`WATCH_READ_TIMEOUT`] (its other requests set deadlines of their own).
pub async fn connect_for_watches(
    kubeconfig: Option<&Path>,
    timeout: Duration,
) -> Result<KubeClient, ConnectError> {
    connect_with(kubeconfig, None, timeout, WATCH_READ_TIMEOUT).await
}

async fn connect_with(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
    timeout: Duration,
    read_timeout: Duration,
) -> Result<KubeClient, ConnectError> {
    let options = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..KubeConfigOptions::default()
    };
    let mut config = match kubeconfig {
        Some(path) => {
            let bad = |e: &dyn std::fmt::Display| ConnectError::Kubeconfig {
                file: Some(path.display().to_string()),
                message: e.to_string(),
            };
            let file = Kubeconfig::read_from(path).map_err(|e| bad(&e))?;
            Config::from_custom_kubeconfig(file, &options)
                .await
                .map_err(|e| bad(&e))?
        }
        None if context.is_some() => {
            Config::from_kubeconfig(&options)
                .await
                .map_err(|e| ConnectError::Kubeconfig {
                    file: None,
                    message: e.to_string(),
                })?
        }
        None => Config::infer()
            .await
            .map_err(|e| ConnectError::NoCredentials(e.to_string()))?,
    };
    config.connect_timeout = Some(timeout);
    config.read_timeout = Some(read_timeout);
    config.write_timeout = Some(timeout);
    let server = config.cluster_url.to_string();
    let default_namespace = config.default_namespace.clone();
    let client = Client::try_from(config).map_err(|e| ConnectError::Client(e.to_string()))?;
    Ok(KubeClient {
        client,
        server,
        default_namespace,
    })
}

/// The sinks' preflight: a `kubeconfig` they name must be readable (a missing one would
/// otherwise surface only at the first write).
pub(crate) fn preflight_kubeconfig(
    kubeconfig: Option<&Path>,
    p: &mut ho_engine::sink::kind::Problems<'_>,
) {
    if let Some(path) = kubeconfig {
        if let Err(e) = Kubeconfig::read_from(path) {
            p.at("kubeconfig", format!("{}: {e}", path.display()));
        }
    }
}
