//! Which cluster (vantage point) this instance is: `[cluster] id`, else derived so that every
//! replica in one cluster gets the same id and the id survives restarts and redeploys:
//! in Kubernetes a hash of the `kube-system` namespace's UID (Kuadrant's rule: that
//! namespace is practically never deleted), elsewhere a hash of `/etc/machine-id`, and as
//! a last resort of the host name.

use std::time::Duration;

use ho_config::ClusterConfig;
use ho_engine::status::ClusterStatus;
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use tracing::warn;

/// Characters of a derived id.
const ID_LEN: usize = 8;

/// The id and its source; never fails (each source falls back to the next, with a
/// warning saying why).
pub async fn resolve(config: &ClusterConfig) -> ClusterStatus {
    if let Some(id) = &config.id {
        return ClusterStatus {
            id: id.clone(),
            source: "config",
        };
    }
    let in_kubernetes = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
    if config.kubeconfig.is_some() || in_kubernetes {
        match kube_system_uid(config).await {
            Ok(uid) => {
                return ClusterStatus {
                    id: short_hash(&uid),
                    source: "kube-system",
                }
            }
            Err(e) => {
                warn!(error = %e, "cluster id: cannot read the kube-system namespace (set [cluster] id, or allow get on namespaces/kube-system); using the machine id")
            }
        }
    }
    match std::fs::read_to_string("/etc/machine-id") {
        Ok(id) if !id.trim().is_empty() => ClusterStatus {
            id: short_hash(id.trim()),
            source: "machine-id",
        },
        _ => ClusterStatus {
            id: short_hash(&host_name()),
            source: "hostname",
        },
    }
}

async fn kube_system_uid(config: &ClusterConfig) -> Result<String, String> {
    let client = crate::client::connect(config.kubeconfig.as_deref(), None, Duration::from_secs(5))
        .await
        .map_err(|e| e.to_string())?;
    let ns: Namespace = Api::all(client.client)
        .get("kube-system")
        .await
        .map_err(|e| format!("GET namespaces/kube-system: {e}"))?;
    ns.metadata
        .uid
        .ok_or_else(|| "the kube-system namespace has no uid".to_owned())
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default()
}

/// The first [`ID_LEN`] base-36 digits of SHA-256(`input`): short enough for DNS labels
/// and TXT records, 41 bits, so two clusters colliding is one in two trillion.
fn short_hash(input: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, input.as_bytes());
    let mut n = u64::from_be_bytes(digest.as_ref()[..8].try_into().expect("32 bytes"));
    let mut id = String::with_capacity(ID_LEN);
    for _ in 0..ID_LEN {
        let d = (n % 36) as u32;
        id.push(char::from_digit(d, 36).expect("below 36"));
        n /= 36;
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_ids_are_stable_short_and_label_safe() {
        let a = short_hash("5f1a1d2e-0000-4000-8000-000000000001");
        assert_eq!(a, short_hash("5f1a1d2e-0000-4000-8000-000000000001"));
        assert_ne!(a, short_hash("5f1a1d2e-0000-4000-8000-000000000002"));
        assert_eq!(a.len(), 8);
        assert!(a
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()));
    }
}
