//! Kubernetes as the service meets it, behind one facade: which cluster this is, the
//! operator state replicas share, the Lease election of the writer, the ring's Leases and
//! the DNSFailover controller. The binary connects before its engine starts
//! ([`Cluster::connect`]: the cluster id names the engine's reports from the first), shares
//! the operator state once the engine runs, joins once its API serves ([`Cluster::join`]),
//! and leaves in the order that keeps writes single ([`Joined::stop`], then
//! [`Leaving::release`] after the engine's last writes).

use std::path::PathBuf;
use std::time::Duration;

use ho_config::model::KubernetesConfig;
use ho_config::validate::Kinds;
use ho_config::{Config, LeaderElectionConfig, Plan, RingConfig};
use ho_engine::ring::RingLink;
use ho_engine::status::ClusterStatus;
use ho_engine::Engine;
use tokio::sync::watch;
use tokio::task::{spawn_local, JoinHandle};
use tracing::info;

use crate::client::{connect_for_watches, ConnectError};
use crate::lease::{ElectionError, Elector};
use crate::ring_leases::RingLeases;
use crate::shared_files::SharedFiles;
use crate::tenants::controller::Controller;
use crate::tenants::kuadrant::Kuadrant;

/// How long a request to the API server may take (connect, send; watches read longer).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// This cluster and the settings of every part that talks to its API server.
pub struct Cluster {
    status: ClusterStatus,
    kubernetes: KubernetesConfig,
    election: LeaderElectionConfig,
    ring: RingConfig,
    state_dir: Option<PathBuf>,
}

/// Why a part that talks to the API server cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// No client for the operator-state ConfigMap.
    #[error("[kubernetes] operator_state")]
    OperatorState(#[source] ConnectError),
    /// No client for the DNSFailover watches.
    #[error("[kubernetes]")]
    Tenants(#[source] ConnectError),
    /// The leader election cannot start.
    #[error(transparent)]
    Election(#[from] ElectionError),
    /// No client for the ring's Leases.
    #[error(transparent)]
    Ring(ConnectError),
}

/// What the binary hands over for tenants as resources (`[kubernetes] tenants`): the
/// config files' config they are laid on, the sink kinds they validate against, and
/// Kuadrant's translation, used when its resources are watched (`[kubernetes] kuadrant`).
pub struct Tenants {
    /// The config files' config.
    pub base: Config,
    /// The sink kinds, so resources validate as `check-config` does.
    pub catalog: Kinds<'static>,
    /// The translation of Kuadrant's resources.
    pub kuadrant: Kuadrant,
}

/// The parts joined: the election and the ring's Leases run until [`Joined::stop`].
pub struct Joined {
    stop: watch::Sender<bool>,
    elector: Option<JoinHandle<Elector>>,
    ring_leases: Option<JoinHandle<()>>,
}

/// Stopped, still holding the Lease until [`Leaving::release`].
pub struct Leaving {
    elector: Option<Elector>,
}

impl Cluster {
    /// Which cluster this is (`[cluster] id`, else derived; never fails), with the settings
    /// of `plan` the other parts connect with later.
    pub async fn connect(plan: &Plan) -> Cluster {
        let status = crate::cluster_id::resolve(&plan.cluster).await;
        info!(cluster = %status.id, source = status.source, "cluster id");
        Cluster {
            status,
            kubernetes: plan.kubernetes.clone(),
            election: plan.leader_election.clone(),
            ring: plan.ring.clone(),
            state_dir: plan.state_dir.clone(),
        }
    }

    /// The cluster id and where it came from.
    pub fn status(&self) -> ClusterStatus {
        self.status.clone()
    }

    /// Whether DNSFailover resources are tenants (`[kubernetes] tenants`).
    pub fn follows_tenants(&self) -> bool {
        self.kubernetes.tenants
    }

    /// `[kubernetes] operator_state`: drains and forced health, and the state files under
    /// `state_dir` that `files` names (an update reaches one replica, a reader asks any),
    /// shared with the other replicas through a ConfigMap.
    pub async fn share_operator_state(
        &self,
        engine: &Engine,
        files: SharedFiles,
    ) -> Result<(), ClusterError> {
        let Some(name) = &self.kubernetes.operator_state else {
            return Ok(());
        };
        let kube = connect_for_watches(self.kubernetes.kubeconfig.as_deref(), REQUEST_TIMEOUT)
            .await
            .map_err(ClusterError::OperatorState)?;
        if let Some(dir) = self.state_dir.clone() {
            let namespace = &kube.default_namespace;
            crate::shared_files::share(kube.client.clone(), namespace, name, dir, files);
        }
        crate::operator_state::share(engine, kube.client, &kube.default_namespace, name).await;
        Ok(())
    }

    /// Starts the leader election (`[leader_election]`), this replica's ring Lease (when
    /// the engine probes in a ring) and, given `tenants`, the DNSFailover controller the
    /// engine follows from then on.
    pub async fn join(
        &self,
        engine: &mut Engine,
        tenants: Option<Tenants>,
    ) -> Result<Joined, ClusterError> {
        let (stop, stopped) = watch::channel(false);
        let elector = match self.election.enabled {
            true => {
                let elector = Elector::connect(&self.election, engine.leadership().clone()).await?;
                Some(spawn_local(elector.run(stopped)))
            }
            false => None,
        };
        let ring_leases = match engine.ring() {
            Some(link) => Some(self.ring_lease(link, stop.subscribe()).await?),
            None => None,
        };
        if let Some(tenants) = tenants {
            let controller = self.controller(engine, tenants).await?;
            engine.follow_tenants(Box::new(controller)).await;
        }
        Ok(Joined {
            stop,
            elector,
            ring_leases,
        })
    }

    /// This replica's Lease in the ring, renewed and the ring followed until `stop`.
    async fn ring_lease(
        &self,
        link: RingLink,
        stop: watch::Receiver<bool>,
    ) -> Result<JoinHandle<()>, ClusterError> {
        let peer = advertised(&self.ring);
        let leases = RingLeases::connect(&self.ring, link.identity, peer)
            .await
            .map_err(ClusterError::Ring)?;
        Ok(spawn_local(leases.run(stop, link.listings)))
    }

    /// Connects and starts watching DNSFailover resources on top of `tenants.base`.
    async fn controller(
        &self,
        engine: &Engine,
        tenants: Tenants,
    ) -> Result<Controller, ClusterError> {
        let kube = connect_for_watches(self.kubernetes.kubeconfig.as_deref(), REQUEST_TIMEOUT)
            .await
            .map_err(ClusterError::Tenants)?;
        info!(server = %kube.server, "watching DNSFailover resources");
        let leadership = engine.leadership().clone();
        let kuadrant = self.kubernetes.kuadrant.then_some(tenants.kuadrant);
        let controller = Controller::start(
            kube.client,
            tenants.base,
            tenants.catalog,
            leadership,
            kuadrant,
        );
        Ok(controller.await)
    }
}

impl Joined {
    /// Stops renewing: the elector closes the fence (no new write starts) and keeps the
    /// Lease; this replica's ring Lease is deleted, so the others take its targets at their
    /// next listing.
    pub async fn stop(self) -> Result<Leaving, tokio::task::JoinError> {
        let _ = self.stop.send(true);
        let elector = match self.elector {
            Some(task) => Some(task.await?),
            None => None,
        };
        if let Some(leases) = self.ring_leases {
            let _ = leases.await;
        }
        Ok(Leaving { elector })
    }
}

impl Leaving {
    /// Hands the Lease over (after the writes in flight have finished), so a standby's first
    /// write never overlaps ours.
    pub async fn release(self) {
        if let Some(elector) = self.elector {
            elector.release().await;
        }
    }
}

/// Where the other ring members reach this replica's verdict stream: `advertise`, else
/// `$POD_IP` with `listen`'s port (the Deployment sets it from the downward API), else
/// `listen` itself.
fn advertised(ring: &RingConfig) -> String {
    if let Some(address) = &ring.advertise {
        return address.clone();
    }
    let pod_ip = std::env::var("POD_IP").ok();
    match pod_ip.and_then(|ip| ip.parse::<std::net::IpAddr>().ok()) {
        Some(ip) => std::net::SocketAddr::new(ip, ring.listen.port()).to_string(),
        None => ring.listen.to_string(),
    }
}
