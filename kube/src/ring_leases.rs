//! `[ring]` membership on Kubernetes Leases: each replica holds a Lease of its own,
//! `<ring>-<identity>`, labelled `healthorchestrator.io/ring=<ring>` and annotated with the
//! address of its verdict stream, and renews it every `renew_period`. It watches the ring's
//! Leases (one list, then every change as it happens; listed again when the watch ends) and
//! hands the whole ring to the engine at each change
//! ([`ho_engine::ring::members::Members`] judges who is live from the resourceVersions, on
//! this process's clock). A watch, not a listing each renew period: a renewal is seen when
//! it is made, so a replica that stops renewing lapses `lease_duration` after its last
//! renewal, not up to a renew period later. No gossip and no consensus of our own: the API
//! server is the only shared state. At shutdown the replica deletes its Lease, so the
//! others move its targets at once instead of after `lease_duration`.

use std::collections::BTreeMap;

use futures_util::StreamExt;
use ho_config::RingConfig;
use ho_engine::ring::members::Sighting;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::chrono::Utc;
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use kube::runtime::{watcher, WatchStreamExt};
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
        // One client for the renewals (each bounded by renew_period in `run`) and the watch,
        // which stays silent for as long as no Lease changes.
        let kube =
            crate::client::connect_for_watches(config.kubeconfig.as_deref(), timeout).await?;
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

    /// Renews every `renew_period` and follows the ring's Leases until `stop` turns true,
    /// then deletes this replica's Lease.
    pub async fn run(self, mut stop: watch::Receiver<bool>, listings: mpsc::Sender<Vec<Sighting>>) {
        let follow = tokio::spawn(follow(
            self.api.clone(),
            format!("{RING_LABEL}={}", self.ring),
            listings,
        ));
        let mut failing = false;
        loop {
            match tokio::time::timeout(self.config.renew_period, self.renew()).await {
                Ok(Ok(())) => failing = false,
                Ok(Err(e)) if !failing => {
                    warn!(lease = %self.name, "ring: the API server did not take the renewal (ownership stays as last seen): {e}");
                    failing = true;
                }
                Err(_) if !failing => {
                    warn!(lease = %self.name, "ring: no answer within renew_period (ownership stays as last seen)");
                    failing = true;
                }
                _ => {}
            }
            tokio::select! {
                _ = tokio::time::sleep(self.config.renew_period) => {}
                _ = stop.wait_for(|stopped| *stopped) => break,
            }
        }
        follow.abort();
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
}

/// Watches the Leases labelled `selector` and sends the whole ring after each change (after
/// the first full list, and after each re-list once it is complete).
async fn follow(api: Api<Lease>, selector: String, listings: mpsc::Sender<Vec<Sighting>>) {
    let config = watcher::Config::default().labels(&selector);
    let mut events = watcher::watcher(api, config).default_backoff().boxed();
    let mut leases: BTreeMap<String, Lease> = BTreeMap::new();
    // Filled while a (re-)list is under way; the ring is sent once it is whole.
    let mut listing: Option<BTreeMap<String, Lease>> = None;
    let mut failing = false;
    while let Some(event) = events.next().await {
        let name = |l: &Lease| l.metadata.name.clone().unwrap_or_default();
        match event {
            Ok(watcher::Event::Init) => listing = Some(BTreeMap::new()),
            Ok(watcher::Event::InitApply(lease)) => {
                if let Some(listing) = &mut listing {
                    listing.insert(name(&lease), lease);
                }
            }
            Ok(watcher::Event::InitDone) => leases = listing.take().unwrap_or_default(),
            Ok(watcher::Event::Apply(lease)) => {
                leases.insert(name(&lease), lease);
            }
            Ok(watcher::Event::Delete(lease)) => {
                leases.remove(&name(&lease));
            }
            Err(e) => {
                if !failing {
                    warn!(ring = %selector, "ring: watching the Leases failed (ownership stays as last seen; retrying): {e}");
                }
                failing = true;
                continue;
            }
        }
        failing = false;
        if listing.is_none() && listings.send(sightings(&leases)).await.is_err() {
            return;
        }
    }
}

/// The ring as the engine reads it: each Lease's holder, peer and version.
fn sightings(leases: &BTreeMap<String, Lease>) -> Vec<Sighting> {
    let now = Utc::now();
    leases
        .values()
        .filter_map(|lease| {
            let spec = lease.spec.clone().unwrap_or_default();
            let identity = spec.holder_identity.filter(|h| !h.is_empty())?;
            Some(Sighting {
                identity,
                peer: lease
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(PEER_ANNOTATION).cloned()),
                version: lease.metadata.resource_version.clone().unwrap_or_default(),
                renewed_ago: spec.renew_time.and_then(|t| (now - t.0).to_std().ok()),
            })
        })
        .collect()
}
