//! Leader election through a Kubernetes Lease (coordination.k8s.io/v1): client-go's
//! algorithm over kube's `Api<Lease>`, every write carrying the resourceVersion it read as
//! a precondition (the API server answers 409 to a stale one).
//!
//! Why not a crate: kube-lease-manager, the maintained one, needs kube 4 (this build uses
//! kube 2), writes with server-side apply, and judges expiry from the Lease's `renewTime`
//! with an allowance for clock skew. Here expiry is judged as client-go judges it: a
//! standby takes over only after the Lease's *resourceVersion* has stayed the same for
//! `lease_duration` on its own monotonic clock, so no wall clock is ever compared with
//! another machine's. The writer side is `ho_engine::leadership`: the leader writes only
//! until `renew_deadline` after its last successful renewal was *sent*, which ends before
//! any standby's `lease_duration` can.

use std::time::Duration;

use ho_config::LeaderElectionConfig;
use ho_engine::leadership::Leadership;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::chrono::Utc;
use kube::api::{ObjectMeta, PostParams};
use kube::Api;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{info, warn};

/// Why the election cannot start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ElectionError {
    /// No client for the API server.
    #[error("leader_election: {0}")]
    Connect(#[from] crate::client::ConnectError),
    /// The fence was made without an election (`Leadership::single`).
    #[error("leader election without an identity")]
    NoIdentity,
}

/// Runs the election for one replica.
pub struct Elector {
    api: Api<Lease>,
    /// `namespace/name`, for logs.
    lease: String,
    name: String,
    identity: String,
    config: LeaderElectionConfig,
    leadership: Leadership,
    /// The Lease's resourceVersion as last read, and when (this process's clock) it was
    /// first seen: a standby measures `lease_duration` from there.
    observed: Option<(String, Instant)>,
    /// Holder as last read.
    holder: Option<String>,
}

/// What one attempt found.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// The Lease is ours (created, renewed or taken over).
    Holding,
    /// Someone else holds it (or won a race for it).
    Standby,
}

impl Elector {
    /// Connects to the API server (kubeconfig or in-cluster); sends nothing yet.
    pub async fn connect(
        config: &LeaderElectionConfig,
        leadership: Leadership,
    ) -> Result<Elector, ElectionError> {
        // One request must leave room for the next attempt within renew_deadline.
        let timeout = config.retry_period.max(Duration::from_millis(500));
        let kube = crate::client::connect(config.kubeconfig.as_deref(), None, timeout).await?;
        let namespace = config.namespace.clone().unwrap_or(kube.default_namespace);
        let identity = leadership
            .identity()
            .ok_or(ElectionError::NoIdentity)?
            .to_owned();
        info!(lease = %format!("{namespace}/{}", config.name), %identity, server = %kube.server, "leader election: every replica probes, the Lease holder writes shared back ends");
        Ok(Elector {
            api: Api::namespaced(kube.client, &namespace),
            lease: format!("{namespace}/{}", config.name),
            name: config.name.clone(),
            identity,
            config: config.clone(),
            leadership,
            observed: None,
            holder: None,
        })
    }

    /// Acquires and renews until `stop` turns true, then closes the fence (no new write
    /// starts) and returns, still holding the Lease: [`Elector::release`] hands it over
    /// once the writes in flight have finished.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) -> Elector {
        loop {
            let sent = Instant::now();
            let attempt = tokio::time::timeout(self.config.renew_deadline, self.attempt(sent));
            match attempt.await {
                Ok(Ok(Outcome::Holding)) => {}
                Ok(Ok(Outcome::Standby)) => self.leadership.standby(self.holder.clone()),
                Ok(Err(e)) => {
                    warn!(lease = %self.lease, "leader election: the API server did not answer: {e}");
                    self.leadership.check_lapse();
                }
                Err(_) => {
                    warn!(lease = %self.lease, "leader election: no answer within renew_deadline");
                    self.leadership.check_lapse();
                }
            }
            tokio::select! {
                _ = tokio::time::sleep_until(self.next_attempt()) => {}
                _ = stop.wait_for(|stopped| *stopped) => break,
            }
        }
        self.leadership.standby(self.holder.clone());
        self
    }

    /// When to try next: every `retry_period` (with client-go's jitter of up to 20 %), and
    /// at the very moment the Lease a standby watches expires, if that is sooner.
    fn next_attempt(&self) -> Instant {
        let jitter = self.config.retry_period.mul_f64(0.2 * fastrand::f64());
        let regular = Instant::now() + self.config.retry_period + jitter;
        match (&self.observed, self.leadership.may_write()) {
            (Some((_, since)), false) => regular.min(*since + self.config.lease_duration),
            _ => regular,
        }
    }

    /// One round of client-go's `tryAcquireOrRenew`; `sent` is when it started.
    async fn attempt(&mut self, sent: Instant) -> Result<Outcome, kube::Error> {
        let Some(lease) = self.api.get_opt(&self.name).await? else {
            let fresh = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(self.spec(None, 0)),
            };
            return match self.api.create(&PostParams::default(), &fresh).await {
                Ok(created) => Ok(self.holding(&created, sent, None)),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(Outcome::Standby),
                Err(e) => Err(e),
            };
        };
        let version = lease.metadata.resource_version.clone().unwrap_or_default();
        if self.observed.as_ref().is_none_or(|(v, _)| *v != version) {
            self.observed = Some((version, Instant::now()));
        }
        let spec = lease.spec.clone().unwrap_or_default();
        self.holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let mine = self.holder.as_deref() == Some(self.identity.as_str());
        let unchanged_for = self
            .observed
            .as_ref()
            .map_or(Duration::ZERO, |(_, t)| t.elapsed());
        if !mine && self.holder.is_some() && unchanged_for < self.config.lease_duration {
            return Ok(Outcome::Standby);
        }
        let previous = self.holder.clone();
        let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(!mine);
        let mut next = lease;
        let mut new_spec = self.spec(mine.then_some(spec.acquire_time).flatten(), transitions);
        new_spec.preferred_holder = spec.preferred_holder;
        new_spec.strategy = spec.strategy;
        next.spec = Some(new_spec);
        match self
            .api
            .replace(&self.name, &PostParams::default(), &next)
            .await
        {
            Ok(updated) => Ok(self.holding(&updated, sent, previous.filter(|_| !mine))),
            // Someone renewed or took it between our read and our write: theirs.
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(Outcome::Standby),
            Err(e) => Err(e),
        }
    }

    /// The spec this replica writes: itself as holder, renewed now.
    fn spec(&self, acquired: Option<MicroTime>, transitions: i32) -> LeaseSpec {
        let now = MicroTime(Utc::now());
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.config.lease_duration.as_secs().max(1) as i32),
            acquire_time: Some(acquired.unwrap_or_else(|| now.clone())),
            renew_time: Some(now),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    /// Records a successful create or replace.
    fn holding(&mut self, lease: &Lease, sent: Instant, took_from: Option<String>) -> Outcome {
        if let Some(version) = &lease.metadata.resource_version {
            self.observed = Some((version.clone(), Instant::now()));
        }
        if let Some(from) = took_from {
            info!(lease = %self.lease, previous = %from, "took over the lease: it had not changed for lease_duration");
        }
        self.holder = Some(self.identity.clone());
        self.leadership.renewed(sent, self.config.renew_deadline);
        Outcome::Holding
    }

    /// Hands the Lease over at shutdown (holder cleared, so a standby takes it at its next
    /// attempt instead of waiting `lease_duration`). Only when still the holder, and with
    /// the resourceVersion read as precondition.
    pub async fn release(self) {
        let result = async {
            let Some(mut lease) = self.api.get_opt(&self.name).await? else {
                return Ok(false);
            };
            let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
            if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
                return Ok(false);
            }
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.renew_time = Some(MicroTime(Utc::now()));
            self.api
                .replace(&self.name, &PostParams::default(), &lease)
                .await
                .map(|_| true)
        };
        match result.await {
            Ok(true) => {
                info!(lease = %self.lease, "released the lease for a standby to take at once")
            }
            Ok(false) => {}
            Err(e) => {
                warn!(lease = %self.lease, "could not release the lease (a standby takes over after lease_duration): {e}")
            }
        }
    }
}
