//! The tables of several instances: which cluster this is and how clusters vote
//! (`[cluster]`, `[multi_cluster]`), and how replicas in one cluster divide the work: one
//! writer (`[leader_election]`) and shared probing (`[ring]`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `[cluster]`: which cluster (vantage point) this instance is. Without `id`: in
/// Kubernetes, a hash of the `kube-system` namespace's UID (stable for the cluster's life,
/// the same in every replica); elsewhere, a hash of `/etc/machine-id`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// 1-16 characters of `a-z`, `0-9` and `-`, e.g. `eu1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Kubeconfig to read the `kube-system` namespace with; default: the in-cluster
    /// service account when running in Kubernetes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<PathBuf>,
}

/// `[multi_cluster]`: several orchestrators, one per cluster, publish the same names into
/// one shared zone. Each writes only its own report record per tenant (the addresses it
/// owns, the addresses it sees down); every cluster computes the published set from the
/// live reports with the same rule, so they agree without talking to each other, and an
/// address leaves DNS only when `failure_threshold` of the live clusters see it down.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MultiClusterConfig {
    /// Off: this instance's own verdicts decide (one vantage point).
    #[serde(default)]
    pub enabled: bool,
    /// Share of live clusters that must report an address down before it is withdrawn
    /// (`down / live >= threshold`; Kuadrant's `MultiClusterFailureThreshold`, 0.66: two of
    /// three).
    #[serde(default = "default_failure_threshold")]
    pub failure_threshold: f64,
    /// How often this cluster refreshes its report and reads the others'. Each round costs
    /// zone API calls (see docs/several-clusters.md for the budget of Route53's 5 requests a second).
    #[serde(default = "default_report_interval", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub report_interval: Duration,
    /// A report older than this no longer counts as a live voter: its cluster's addresses
    /// stay as last known and its down votes stop counting.
    #[serde(default = "default_report_ttl", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub report_ttl: Duration,
}

impl Default for MultiClusterConfig {
    fn default() -> Self {
        MultiClusterConfig {
            enabled: false,
            failure_threshold: default_failure_threshold(),
            report_interval: default_report_interval(),
            report_ttl: default_report_ttl(),
        }
    }
}

fn default_failure_threshold() -> f64 {
    0.66
}

fn default_report_interval() -> Duration {
    Duration::from_secs(2)
}

fn default_report_ttl() -> Duration {
    Duration::from_secs(15)
}

/// `[leader_election]`: run several replicas; every one probes and keeps its state warm,
/// only the holder of the Lease `namespace/name` (coordination.k8s.io/v1) writes to back
/// ends the replicas share. Durations keep client-go's names and meaning.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaderElectionConfig {
    /// Off: this process always writes (one replica).
    #[serde(default)]
    pub enabled: bool,
    /// The Lease's namespace. Unset: the pod's own namespace (from its service account).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The Lease's name.
    #[serde(default = "default_lease_name")]
    pub name: String,
    /// How long standbys wait, after the Lease last changed, before taking it over.
    #[serde(default = "default_lease_duration", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub lease_duration: Duration,
    /// How long the leader keeps writing after its last successful renewal started;
    /// shorter than `lease_duration`, so it stops before anyone may take over.
    #[serde(default = "default_renew_deadline", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub renew_deadline: Duration,
    /// Time between attempts to acquire or renew.
    #[serde(default = "default_retry_period", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub retry_period: Duration,
    /// This replica's name in the Lease. Unset: `$HOSTNAME` (the pod name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// A kubeconfig file. Unset: the in-cluster service account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<PathBuf>,
}

impl Default for LeaderElectionConfig {
    fn default() -> Self {
        LeaderElectionConfig {
            enabled: false,
            namespace: None,
            name: default_lease_name(),
            lease_duration: default_lease_duration(),
            renew_deadline: default_renew_deadline(),
            retry_period: default_retry_period(),
            identity: None,
            kubeconfig: None,
        }
    }
}

/// `[ring]`: replicas share the probing instead of each probing everything. Each replica
/// holds a Lease of its own (`<name>-<identity>`, labelled `healthorchestrator.io/ring=<name>`)
/// and renews it; a replica is a member while its Lease keeps changing. Every target is
/// probed by `replication` members chosen by rendezvous hashing, and the owners stream their
/// verdicts to every other member over `listen`, authenticated with `secret_file`, so every
/// replica knows every verdict (to answer from its own `dns_server`, and to write shared back
/// ends when it is the writer of `[leader_election]`, which stays as it is).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RingConfig {
    /// Off: this replica probes every target.
    #[serde(default)]
    pub enabled: bool,
    /// The ring's name: the Leases' label value and name prefix (e.g. the Deployment's).
    #[serde(default = "default_lease_name")]
    pub name: String,
    /// The Leases' namespace. Unset: the pod's own namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// This replica's name in the ring. Unset: `$HOSTNAME` (the pod name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// How many members probe each target (at most the number of members).
    #[serde(default = "default_replication")]
    pub replication: usize,
    /// A member whose Lease has not changed for this long is gone; a replica keeps probing
    /// a target it lost for this long after it saw the new ring (make-before-break).
    #[serde(default = "default_lease_duration", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub lease_duration: Duration,
    /// How often a replica renews its Lease (the ring's Leases are watched).
    #[serde(default = "default_renew_period", with = "humantime_serde")]
    #[schemars(with = "String")]
    pub renew_period: Duration,
    /// Where this replica takes the other members' verdict streams.
    #[serde(default = "default_ring_listen")]
    pub listen: SocketAddr,
    /// Where the other members reach `listen` (`host:port`). Unset: `$POD_IP` with
    /// `listen`'s port, else `listen`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advertise: Option<String>,
    /// A file holding the secret every member shares: a member proves it knows it before
    /// its verdicts are taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_file: Option<PathBuf>,
    /// A kubeconfig file. Unset: the in-cluster service account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<PathBuf>,
}

fn default_replication() -> usize {
    2
}

fn default_renew_period() -> Duration {
    Duration::from_secs(5)
}

fn default_ring_listen() -> SocketAddr {
    SocketAddr::from(([0, 0, 0, 0], 7947))
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            enabled: false,
            name: default_lease_name(),
            namespace: None,
            identity: None,
            replication: default_replication(),
            lease_duration: default_lease_duration(),
            renew_period: default_renew_period(),
            listen: default_ring_listen(),
            advertise: None,
            secret_file: None,
            kubeconfig: None,
        }
    }
}

fn default_lease_name() -> String {
    "health-orchestrator".into()
}

fn default_lease_duration() -> Duration {
    Duration::from_secs(15)
}

fn default_renew_deadline() -> Duration {
    Duration::from_secs(10)
}

fn default_retry_period() -> Duration {
    Duration::from_secs(2)
}
