//! The engine facade: builds the probes and (through the [`Parts`] it is handed) the sinks, starts
//! the sink actors, the tracker and one prober record per target spread over the prober
//! threads' wheels; applies config reloads as a diff. Its actors stay private.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use actix::prelude::*;
use ho_config::{Config, Discovered, Plan, PlannedSink, Target};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, error, info};

use crate::api::{ApiState, ApiTokens};
use crate::delivery::{GetSinkStatus, Quiesce, SinkActor};
use crate::dns_client::DnsClient;
use crate::drain::DrainStore;
use crate::events::Events;
use crate::hosts::Hosts;
use crate::leadership::Leadership;
use crate::ledger::{Answers, Ledger};
use crate::metrics::Metrics;
use crate::multi_cluster::coordinator::{Coordinator, Retarget, SetCluster};
use crate::observation::TargetId;
use crate::probe::heartbeat::Heartbeats;
use crate::probe::Feeds;
use crate::probe::{Probe, ProbeContext, ProbeError, TlsCache};
use crate::probe_limits::ProbeLimits;
use crate::prober::{Prober, ProberHandle};
use crate::ring::run::{RingHandle, RingParts};
use crate::schedule::{self, Schedule};
use crate::sink::listing::Listings;
use crate::sink::reports::ReportStore;
use crate::sink::{Sink, SinkBuildError, SinkFactory};
use crate::status::ClusterStatus;
use crate::status::{Overview, SinkStatus, Status};
use crate::token_bucket::TokenBucket;
use crate::tracker::{
    GetEndpoints, GetSummaries, HealthTracker, IsReady, Reload, Sharing, Surroundings,
};

mod applier;
mod probers;
mod start;
mod tenant_source;

use applier::Applier;
use start::*;
use tenant_source::Following;
pub use tenant_source::{EngineReader, Merge, ReloadError, SourceFuture, TenantSource};

/// Why the engine cannot start or take a new plan.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// A target's probe cannot be prepared (its TLS settings, a kind this host cannot run).
    #[error("{target}: {source}")]
    Probe {
        /// The target key.
        target: String,
        /// Why.
        source: ProbeError,
    },
    /// A sink cannot be built.
    #[error(transparent)]
    SinkBuild(#[from] SinkBuildError),
    /// The operator drains kept in `state_dir` cannot be read.
    #[error("state_dir: {0}")]
    Drains(crate::state_file::StateFileError),
    /// An endpoint's host name does not resolve: a plan is not run without every
    /// endpoint's addresses, or its gateways would leave DNS.
    #[error(transparent)]
    Host(#[from] crate::hosts::HostsError),
    /// `[ring]` cannot start.
    #[error("ring: {0}")]
    Ring(RingError),
}

/// Why `[ring]` cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RingError {
    /// `ring.secret_file` cannot be read.
    #[error("secret_file: {0}")]
    Secret(crate::secret::SecretError),
    /// `ring.listen` cannot be bound.
    #[error("listen {0}: {1}")]
    Listen(std::net::SocketAddr, String),
}

/// Applies what an operator set on another replica (see [`Engine::share_operator_state`]).
#[derive(Clone)]
pub struct Adopter(Addr<HealthTracker>);

impl Adopter {
    /// Applies `state` here, as if set through this replica's API, without handing it on.
    pub fn adopt(&self, state: crate::drain::OperatorState) {
        self.0.do_send(crate::tracker::Adopt(state));
    }
}

/// What a reload changed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReloadSummary {
    /// Probe targets kept with their verdict and schedule.
    pub targets_kept: usize,
    /// Probe targets started (their endpoints begin `unknown`).
    pub targets_added: usize,
    /// Probe targets no longer probed.
    pub targets_removed: usize,
    /// Sinks started or rebuilt because their config changed.
    pub sinks_rebuilt: Vec<String>,
    /// Sinks stopped.
    pub sinks_removed: Vec<String>,
}

/// A running engine: the facade every caller uses (the binary, the demo, the tests). Its
/// actors are private, so callers depend on these methods only. It follows what other
/// clusters contribute by itself. Dropping it stops the probers, the tracker and the sink
/// actors (writes in flight are abandoned; every sink write is atomic on its back end).
pub struct Engine {
    tracker: Addr<HealthTracker>,
    metrics: Arc<Metrics>,
    api_sinks: Arc<RwLock<Vec<Addr<SinkActor>>>>,
    /// What a tenant source reads (and `/status`'s overview).
    reader: EngineReader,
    /// The tenant source followed beside the config files ([`Engine::follow_tenants`]).
    tenants: Option<Following>,
    /// Whether shared sinks may write now (leader election); set at start.
    leadership: Leadership,
    /// Transitions, publishes and sink writes as they happen (`/events`).
    events: Events,
    /// This instance's cluster id, shown in `/status` (set by the binary).
    cluster: Option<ClusterStatus>,
    /// Runs the report rounds of voting tenants (`[multi_cluster]`).
    coordinator: Addr<Coordinator>,
    /// The plan running now (the applier replaces it).
    plan: Arc<RwLock<Arc<Plan>>>,
    /// Probers, sink actors and the plan, changed by reloads and rediscoveries in turn.
    applier: Arc<tokio::sync::Mutex<Applier>>,
    /// Heartbeats pushed to the API, read by checks of kind `heartbeat`.
    heartbeats: Heartbeats,
    /// The endpoints' host names, for `/status`.
    hosts: Hosts,
    /// What resolvers are handed: the canary's findings and the availability ledger.
    answers: Answers,
    /// `[ring]`: where the Leases' listings go, and the ring for `/status`.
    ring: Option<RingHandle>,
}

/// What the crates above the engine hand it (`ho_kinds::parts` makes it): how to build the
/// sinks of every kind, and how to ask DNS servers (`ho-dns`).
#[derive(Clone)]
pub struct Parts {
    /// Builds the sinks, at start and on every reload.
    pub sinks: Arc<dyn SinkFactory>,
    /// Looks endpoints' host names up and asks the canaries' questions.
    pub dns: Arc<dyn DnsClient>,
}

impl Engine {
    /// Starts everything for `plan`, building its sinks with `parts`. Must run inside an
    /// actix system; the tracker and the sink actors live on the current arbiter, probers
    /// on their own arbiters.
    pub async fn start(plan: Plan, parts: Parts) -> Result<Engine, EngineError> {
        Engine::start_with(plan, parts, Arc::new(Metrics::new())).await
    }

    /// Whether the state files a start reads (what operators set: `drains.json`) can be
    /// used: what `check-config` asks so it judges a config as `run` does.
    pub fn check_kept_state(plan: &Plan) -> Result<(), EngineError> {
        load_drains(plan).map(|_| ())
    }

    /// [`Engine::start`] with metrics made beforehand (the telemetry exporter counts its
    /// dropped spans in them).
    pub async fn start_with(
        plan: Plan,
        parts: Parts,
        metrics: Arc<Metrics>,
    ) -> Result<Engine, EngineError> {
        let prepared = Prepared::of(plan, &metrics, parts.dns.clone()).await?;
        let plan = prepared.plan.clone();
        let started = Deciding::start(&plan, &parts, &metrics, prepared.kept).await?;
        let (deciders, leadership, events) = (started.deciders, started.leadership, started.events);
        let (ring, sink_actors) = (started.ring, started.sinks);
        let ownership = ring.as_ref().map(|r| r.ownership.clone());
        let probers = probers::ProberPool::new(&plan, &deciders, ownership, &metrics);
        let api_sinks = Arc::new(RwLock::new(sink_actors.values().cloned().collect()));
        let shared_plan = Arc::new(RwLock::new(plan.clone()));
        let (hosts, heartbeats) = (prepared.hosts, prepared.heartbeats);
        let mut applier = Applier {
            tracker: deciders.tracker.clone(),
            sinks: sink_actors,
            api_sinks: api_sinks.clone(),
            metrics: metrics.clone(),
            factory: parts.sinks,
            plan: shared_plan.clone(),
            probers,
            leadership: leadership.clone(),
            events: events.clone(),
            coordinator: deciders.coordinator.clone(),
            stores: started.stores,
            handles: started.handles,
            source_arrived: false,
            listings: started.listings,
            configured: prepared.configured,
            discovered: deciders.discovered,
            hosts: hosts.clone(),
            plans: started.plans,
            resolved: prepared.resolved,
            heartbeats: heartbeats.clone(),
            feeds: prepared.feeds,
        };
        let preparing = probe_context(plan.targets.iter(), &applier.heartbeats, &applier.feeds);
        applier.probers.start(&plan, prepared.probes, preparing);
        let tracker = deciders.tracker;
        let ring = ring
            .map(|parts| crate::ring::run::start(parts, tracker.clone(), &events, metrics.clone()));
        let applier = applier.follow();
        Ok(Engine {
            reader: EngineReader::of(&tracker, &api_sinks),
            tenants: None,
            tracker,
            metrics,
            api_sinks,
            leadership,
            events,
            cluster: None,
            coordinator: deciders.coordinator,
            plan: shared_plan,
            applier,
            heartbeats,
            hosts,
            answers: started.answers,
            ring,
        })
    }

    /// `[ring]`: this replica's identity and where the binary hands each listing of the
    /// ring's Leases; `None` without a ring.
    pub fn ring(&self) -> Option<crate::ring::RingLink> {
        self.ring.as_ref().map(|r| crate::ring::RingLink {
            identity: r.status.lock().expect("not poisoned").identity.clone(),
            listings: r.sightings.clone(),
        })
    }

    /// Applies `plan` as a diff: unchanged targets keep their prober, verdict and
    /// schedule; removed targets stop being probed at once; added ones start `unknown`;
    /// sinks that are new or configured differently are built with the engine's factory
    /// and replace or join the running ones, removed sinks stop. Tenants keep what they
    /// published and are re-decided. Nothing changes unless every new sink builds and every
    /// new target's TLS settings load. The API address and telemetry settings are not
    /// changed by a reload.
    pub async fn reload(&mut self, plan: Plan) -> Result<ReloadSummary, EngineError> {
        self.applier.lock().await.reload(plan).await
    }

    /// Follows `source`'s tenants beside the config files from now on: applies its first
    /// merge, then each change (see [`TenantSource`]); its reports run once a second.
    pub async fn follow_tenants(&mut self, source: Box<dyn TenantSource>) {
        let reader = self.reader.clone();
        self.tenants =
            Some(Following::start(source, &self.applier, reader, self.metrics.clone()).await);
    }

    /// A reload of the config files: `plan` is `config` validated. With a followed tenant
    /// source its tenants are merged onto `config` and the merge is applied; without one,
    /// `plan` is (as [`Engine::reload`]). Either way nothing changes unless all of it is
    /// valid.
    pub async fn reload_config(
        &mut self,
        plan: Plan,
        config: Config,
    ) -> Result<ReloadSummary, ReloadError> {
        match &self.tenants {
            Some(source) => source.reload(config, &self.applier, &self.reader).await,
            None => Ok(self.reload(plan).await?),
        }
    }

    /// Stops probing at once, lets sink writes in flight finish (none start) until
    /// `deadline`, then stops everything. Published records stay as they are. Returns how
    /// many writes were still in flight at the deadline.
    pub async fn shutdown(mut self, deadline: Duration) -> usize {
        self.tenants = None;
        let applier = self.applier.lock().await;
        applier.probers.stop();
        self.tracker.do_send(Stop);
        let until = Instant::now() + deadline;
        loop {
            let mut in_flight = 0;
            for sink in applier.sinks.values() {
                in_flight += sink.send(Quiesce).await.unwrap_or(0);
            }
            if in_flight == 0 || Instant::now() >= until {
                return in_flight;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The plan running now.
    pub fn plan(&self) -> Arc<Plan> {
        self.plan.read().expect("not poisoned").clone()
    }

    /// The metrics registry (also served on `/metrics`).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The whole `/status` document; `None` once the engine has stopped.
    pub async fn status(&self) -> Option<Status> {
        crate::api::status(&self.api_state(ApiTokens::default())).await
    }

    /// Every tenant's summary and every sink's rows: the part of `/status` a reader needs
    /// for every tenant each second, without the per-endpoint detail; `None` once the
    /// engine has stopped.
    pub async fn overview(&self) -> Option<Overview> {
        self.reader.overview().await
    }

    /// Shares what operators set with the other replicas: every later action is handed to
    /// the returned receiver (its first value: the state now), and what another replica
    /// set is applied through the returned [`Adopter`].
    pub async fn share_operator_state(
        &self,
    ) -> Option<(
        tokio::sync::watch::Receiver<crate::drain::OperatorState>,
        Adopter,
    )> {
        let (tx, rx) = tokio::sync::watch::channel(crate::drain::OperatorState::default());
        let now = self
            .tracker
            .send(crate::tracker::Share(tx.clone()))
            .await
            .ok()?;
        tx.send_replace(now);
        Some((rx, Adopter(self.tracker.clone())))
    }

    /// The endpoints named in `names` as `/status` shows them (those of them that run);
    /// `None` once the engine has stopped.
    pub async fn endpoints(
        &self,
        names: std::collections::HashSet<String>,
    ) -> Option<Vec<crate::status::EndpointStatus>> {
        self.reader.endpoints(names).await
    }

    /// One sink's part of `/status`; `None` if no such sink runs.
    pub async fn sink_status(&self, name: &str) -> Option<SinkStatus> {
        let sink = self.applier.lock().await.sinks.get(name)?.clone();
        sink.send(GetSinkStatus).await.ok()
    }

    /// Whether `/readyz` passes: every target has a verdict, or the start-up grace passed.
    pub async fn ready(&self) -> bool {
        self.tracker.send(IsReady).await.unwrap_or(false)
    }

    /// What [`crate::api::serve`] needs, asking `tokens`.
    pub fn api_state(&self, tokens: ApiTokens) -> ApiState {
        let rate = self.plan().api_max_requests_per_second;
        ApiState {
            tracker: self.tracker.clone(),
            sinks: self.api_sinks.clone(),
            metrics: self.metrics.clone(),
            token: tokens.read,
            rate: Arc::new(std::sync::Mutex::new(TokenBucket::new(
                rate,
                (rate * 2.0).ceil() as u32,
                Instant::now(),
            ))),
            leadership: self.leadership.clone(),
            admin_token: tokens.admin,
            heartbeat_token: tokens.heartbeat,
            heartbeats: self.heartbeats.clone(),
            events: self.events.clone(),
            cluster: self.cluster.clone(),
            hosts: self.hosts.clone(),
            answers: self.answers.clone(),
            ring: self.ring.clone(),
            event_listeners: Arc::new(tokio::sync::Semaphore::new(crate::api::MAX_EVENT_LISTENERS)),
        }
    }

    /// Records this instance's cluster id for `/status` (API states made afterwards show
    /// it).
    pub fn set_cluster(&mut self, cluster: ClusterStatus) {
        self.coordinator.do_send(SetCluster(cluster.id.clone()));
        self.cluster = Some(cluster);
    }

    /// The writer fence of shared sinks: the binary's Lease elector moves it.
    pub fn leadership(&self) -> &Leadership {
        &self.leadership
    }
}

fn make_probes<'a>(
    targets: impl IntoIterator<Item = &'a Target>,
    heartbeats: &Heartbeats,
    feeds: &Feeds,
) -> Result<Vec<Probe>, EngineError> {
    let targets: Vec<&Target> = targets.into_iter().collect();
    let mut ctx = probe_context(targets.iter().copied(), heartbeats, feeds);
    let probes = targets
        .iter()
        .map(|t| {
            Probe::new(t, &mut ctx).map_err(|source| EngineError::Probe {
                target: t.key(),
                source,
            })
        })
        .collect::<Result<Vec<Probe>, EngineError>>()?;
    debug!(
        targets = probes.len(),
        prepared = ctx.prepared.len(),
        "probes prepared: one attempt per distinct check"
    );
    Ok(probes)
}

/// What preparing `targets`' probes shares: TLS settings sized for those over TLS, the
/// heartbeats and the feeds.
fn probe_context<'a>(
    targets: impl Iterator<Item = &'a Target>,
    heartbeats: &Heartbeats,
    feeds: &Feeds,
) -> ProbeContext {
    let over_tls = targets
        .filter(|t| t.check.settings.get().speaks_tls())
        .count();
    ProbeContext {
        tls: TlsCache::for_targets(over_tls),
        heartbeats: heartbeats.clone(),
        feeds: feeds.clone(),
        ..ProbeContext::default()
    }
}

/// Stops an actor of the engine (the tracker, a sink actor): when the engine is dropped,
/// so an old engine never keeps writing next to a new one, and when a reload removes it.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Stop;

impl Handler<Stop> for HealthTracker {
    type Result = ();

    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

impl Handler<Stop> for SinkActor {
    type Result = ();

    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}
