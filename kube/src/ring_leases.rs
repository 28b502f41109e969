//! `[ring]` membership on Kubernetes Leases: each replica holds a Lease of its own,
//! `<ring>-<identity>`, labelled `healthorchestrator.io/ring=<ring>` and annotated with the
//! address of its verdict stream; it renews it every `renew_period` and lists the ring's
//! Leases right after, handing each listing to the engine
//! ([`ho_engine::ring::members::Members`] judges who is live from the resourceVersions, on
//! this process's clock). No gossip and no consensus of our own: the API server is the
//! only shared state. At shutdown the replica deletes its Lease, so the others move its
//! targets at their next listing instead of after `lease_duration`.

use std::collections::BTreeMap;

use ho_config::RingConfig;
use ho_engine::ring::members::Sighting;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::chrono::Utc;
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::Api;
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

/// The label every Lease of a ring carries, valued with the ring's name.
pub const RING_LABEL: &str = "healthorchestrator.io/ring";
/// The annotation holding a member's verdict-stream address.
pub const PEER_ANNOTATION: &str = "healthorchestrator.io/peer";

/// One replica's Lease in the ring, and the listing of everyone's.
pub struct RingLeases {
    api: Api<Lease>,
    ring: String,
    /// This replica's Lease name.
    name: String,
    identity: String,
    peer: String,
    config: RingConfig,
}

impl RingLeases {
    /// Connects to the API server (kubeconfig or in-cluster); sends nothing yet.
    pub async fn connect(
        config: &RingConfig,
        identity: String,
        peer: String,
    ) -> Result<RingLeases, crate::client::ConnectError> {
        let timeout = config.renew_period;
        let kube = crate::client::connect(config.kubeconfig.as_deref(), None, timeout).await?;
        let namespace = config.namespace.clone().unwrap_or(kube.default_namespace);
        let name = format!("{}-{identity}", config.name);
        info!(lease = %format!("{namespace}/{name}"), %peer, "ring: this replica's Lease; the ring is every Lease labelled {RING_LABEL}={}", config.name);
        Ok(RingLeases {
            api: Api::namespaced(kube.client, &namespace),
            ring: config.name.clone(),
            name,
            identity,
            peer,
            config: config.clone(),
        })
    }

    /// Renews and lists every `renew_period` until `stop` turns true, then deletes this
    /// replica's Lease.
    pub async fn run(self, mut stop: watch::Receiver<bool>, listings: mpsc::Sender<Vec<Sighting>>) {
        let mut failing = false;
        loop {
            let round = async {
                self.renew().await?;
                self.list().await
            };
            match tokio::time::timeout(self.config.renew_period, round).await {
                Ok(Ok(sightings)) => {
                    failing = false;
                    if listings.send(sightings).await.is_err() {
                        return;
                    }
                }
                Ok(Err(e)) if !failing => {
                    warn!(lease = %self.name, "ring: the API server did not answer (ownership stays as last listed): {e}");
                    failing = true;
                }
                Err(_) if !failing => {
                    warn!(lease = %self.name, "ring: no answer within renew_period (ownership stays as last listed)");
                    failing = true;
                }
                _ => {}
            }
            tokio::select! {
                _ = tokio::time::sleep(self.config.renew_period) => {}
                _ = stop.wait_for(|stopped| *stopped) => break,
            }
        }
        match self.api.delete(&self.name, &DeleteParams::default()).await {
            Ok(_) => {
                info!(lease = %self.name, "ring: left (Lease deleted; the others take its targets now)")
            }
            Err(e) => {
                warn!(lease = %self.name, "ring: could not delete the Lease (the others take its targets after lease_duration): {e}")
            }
        }
    }

    /// Creates or renews this replica's Lease.
    async fn renew(&self) -> Result<(), kube::Error> {
        let now = MicroTime(Utc::now());
        let spec = LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.config.lease_duration.as_secs().max(1) as i32),
            renew_time: Some(now.clone()),
            ..LeaseSpec::default()
        };
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            let fresh = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    labels: Some(BTreeMap::from([(RING_LABEL.to_owned(), self.ring.clone())])),
                    annotations: Some(BTreeMap::from([(
                        PEER_ANNOTATION.to_owned(),
                        self.peer.clone(),
                    )])),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    acquire_time: Some(now),
                    ..spec
                }),
            };
            return self
                .api
                .create(&PostParams::default(), &fresh)
                .await
                .map(|_| ());
        };
        let acquired = lease.spec.as_ref().and_then(|s| s.acquire_time.clone());
        lease.spec = Some(LeaseSpec {
            acquire_time: acquired,
            ..spec
        });
        lease
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(PEER_ANNOTATION.to_owned(), self.peer.clone());
        lease
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(RING_LABEL.to_owned(), self.ring.clone());
        self.api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
            .map(|_| ())
    }

    /// The ring's Leases.
    async fn list(&self) -> Result<Vec<Sighting>, kube::Error> {
        let selector = format!("{RING_LABEL}={}", self.ring);
        let leases = self
            .api
            .list(&ListParams::default().labels(&selector))
            .await?;
        let now = Utc::now();
        Ok(leases
            .items
            .into_iter()
            .filter_map(|lease| {
                let spec = lease.spec.unwrap_or_default();
                let identity = spec.holder_identity.filter(|h| !h.is_empty())?;
                Some(Sighting {
                    identity,
                    peer: lease
                        .metadata
                        .annotations
                        .and_then(|mut a| a.remove(PEER_ANNOTATION)),
                    version: lease.metadata.resource_version.unwrap_or_default(),
                    renewed_ago: spec.renew_time.and_then(|t| (now - t.0).to_std().ok()),
                })
            })
            .collect())
    }
}
