//! The steps of starting an engine, each named for what it sets up: the writer fence, the
//! sinks and their report stores, the probe bound, the prober threads, the drains kept
//! across restarts, and the coordinator of report rounds.

use super::*;

/// The actors that decide, started: the tracker and the coordinator of report rounds (they
/// address each other), where the addresses other clusters contribute arrive, and the probe
/// bound the probers share.
pub(super) struct Deciders {
    pub(super) tracker: Addr<HealthTracker>,
    pub(super) coordinator: Addr<Coordinator>,
    pub(super) discovered: watch::Receiver<Vec<Discovered>>,
    pub(super) limits: Arc<ProbeLimits>,
}

/// What a start reads and resolves before any actor runs.
pub(super) struct Prepared {
    /// The drain store and what operators set before a restart.
    pub(super) kept: (DrainStore, crate::drain::OperatorState),
    /// The plan as configured.
    pub(super) configured: Arc<Plan>,
    /// The plan to run: the configured one with its host names' addresses.
    pub(super) plan: Arc<Plan>,
    pub(super) hosts: Hosts,
    /// The host names' addresses as last resolved.
    pub(super) resolved: watch::Receiver<crate::hosts::Resolved>,
    pub(super) heartbeats: Heartbeats,
    pub(super) feeds: Feeds,
    /// One per target of `plan`, in the same order.
    pub(super) probes: Vec<Probe>,
}

impl Prepared {
    /// Reads what operators set before a restart first: a file that cannot be used stops
    /// the start with its error, before any actor runs. Then the host names are looked up
    /// and every target's probe built.
    pub(super) async fn of(
        plan: Plan,
        metrics: &Arc<Metrics>,
        dns: Arc<dyn DnsClient>,
    ) -> Result<Prepared, EngineError> {
        let kept = load_drains(&plan)?;
        let (hosts, resolved) = Hosts::new(metrics.clone(), dns);
        let configured = Arc::new(plan);
        let plan = configured.compose(&hosts.prepare(&configured).await?, &[]);
        let heartbeats = Heartbeats::default();
        heartbeats.learn(&plan);
        let feeds = Feeds::default();
        let probes = make_probes(&plan.targets, &heartbeats, &feeds)?;
        heartbeats.keep_in(plan.state_dir.as_deref());
        Ok(Prepared {
            kept,
            configured,
            plan,
            hosts,
            resolved,
            heartbeats,
            feeds,
            probes,
        })
    }
}

/// What the tracker starts with besides its plan, sinks and metrics.
pub(super) struct TrackerStart {
    /// The drain store and what operators set before a restart.
    pub(super) kept: (DrainStore, crate::drain::OperatorState),
    /// `[ring]`: where its own verdict changes go, and the ownership.
    pub(super) ring: Option<Sharing>,
}

/// The deciding side of a start, running before any probe: leadership, the sinks' actors,
/// the answer canary and ledger, the ring's parts, and the tracker with its coordinator.
pub(super) struct Deciding {
    pub(super) leadership: Leadership,
    pub(super) events: Events,
    /// Sink actors and report stores by sink name.
    pub(super) sinks: BTreeMap<String, Addr<SinkActor>>,
    pub(super) stores: BTreeMap<String, Arc<dyn ReportStore>>,
    /// The sinks themselves, told of each plan applied.
    pub(super) handles: BTreeMap<String, Arc<dyn Sink>>,
    /// The sinks' listings, which the canary reads.
    pub(super) listings: Listings,
    /// Where the canary and the ledger follow plans.
    pub(super) plans: watch::Sender<Arc<Plan>>,
    pub(super) answers: Answers,
    /// `[ring]`: what runs the ring once the tracker does.
    pub(super) ring: Option<RingParts>,
    pub(super) deciders: Deciders,
}

impl Deciding {
    /// Starts the sinks of `plan` (built by `parts`), the answer canary and the ledger,
    /// then the tracker with what operators `kept` and, under `[ring]`, its share.
    pub(super) async fn start(
        plan: &Arc<Plan>,
        parts: &Parts,
        metrics: &Arc<Metrics>,
        kept: (DrainStore, crate::drain::OperatorState),
    ) -> Result<Deciding, EngineError> {
        parts.sinks.register_metrics(metrics);
        let leadership = leadership_of(plan, metrics);
        let events = Events::default();
        let listings = Listings::default();
        let (sinks, stores, handles) = start_sinks(
            plan,
            &*parts.sinks,
            metrics,
            (&leadership, &events),
            &listings,
        )
        .await?;
        let (plans, answers) = start_answers(
            plan,
            &events,
            metrics,
            &leadership,
            &kept.1,
            &listings,
            parts.dns.clone(),
        );
        let (ring, shares) = prepare_ring(plan).await?.unzip();
        let start = TrackerStart { kept, ring: shares };
        let deciders = start_deciders(plan, &sinks, &stores, metrics, &leadership, &events, start)?;
        Ok(Deciding {
            leadership,
            events,
            sinks,
            stores,
            handles,
            listings,
            plans,
            answers,
            ring,
            deciders,
        })
    }
}

/// Starts the tracker of `plan` (its targets numbered in order, publishing to `sinks`, with
/// what `start` gives it) and the coordinator of its report rounds over `stores`.
pub(super) fn start_deciders(
    plan: &Arc<Plan>,
    sinks: &BTreeMap<String, Addr<SinkActor>>,
    stores: &BTreeMap<String, Arc<dyn ReportStore>>,
    metrics: &Arc<Metrics>,
    leadership: &Leadership,
    events: &Events,
    start: TrackerStart,
) -> Result<Deciders, EngineError> {
    let limits = probe_limits(plan, metrics);
    let (drains, operator) = start.kept;
    let ids: Vec<TargetId> = (0..plan.targets.len() as TargetId).collect();
    // The tracker and the coordinator address each other (the address exists first).
    let coordinator_context = Context::<Coordinator>::new();
    let coordinator = coordinator_context.address();
    let tracker = HealthTracker::new(
        plan.clone(),
        ids,
        sinks.clone(),
        Surroundings {
            metrics: metrics.clone(),
            limits: limits.clone(),
            drains,
            operator,
            events: events.clone(),
            coordinator: coordinator.clone().recipient(),
            ring: start.ring,
        },
    )
    .start();
    let discovered = run_coordinator(
        coordinator_context,
        plan,
        stores,
        &tracker,
        leadership,
        metrics,
    );
    Ok(Deciders {
        tracker,
        coordinator,
        discovered,
        limits,
    })
}

/// Runs the coordinator of report rounds in `context` (whose address the tracker already
/// has), handing tallies to `tracker`; returns where the addresses other clusters
/// contribute arrive.
pub(super) fn run_coordinator(
    context: Context<Coordinator>,
    plan: &Arc<Plan>,
    stores: &BTreeMap<String, Arc<dyn ReportStore>>,
    tracker: &Addr<HealthTracker>,
    leadership: &Leadership,
    metrics: &Arc<Metrics>,
) -> watch::Receiver<Vec<Discovered>> {
    let (found, discovered) = watch::channel(Vec::new());
    context.run(Coordinator::new(
        plan.clone(),
        stores.clone(),
        tracker.clone(),
        leadership.clone(),
        metrics.clone(),
        found,
    ));
    discovered
}

/// The writer fence: an election when `[leader_election]` is on, else always open.
pub(super) fn leadership_of(plan: &Plan, metrics: &Arc<Metrics>) -> Leadership {
    if plan.leader_election.enabled {
        Leadership::elected(
            identity(plan.leader_election.identity.as_ref()),
            metrics.clone(),
        )
    } else {
        Leadership::single(metrics.clone())
    }
}

/// The drain store of `plan`'s `state_dir` and what operators set before a restart (drains,
/// forced health), which stays.
pub(super) fn load_drains(
    plan: &Plan,
) -> Result<(DrainStore, crate::drain::OperatorState), EngineError> {
    let drains = DrainStore::new(plan.state_dir.as_deref());
    let state = drains.load().map_err(EngineError::Drains)?;
    if !state.drained.is_empty() || !state.forced.is_empty() {
        info!(
            drained = ?state.drained,
            forced = ?state.forced,
            "what an operator set before the restart stays"
        );
    }
    Ok((drains, state))
}

/// Builds and starts the actor of every sink of `plan` (writing under `leadership`,
/// announcing on `events`), with their listings in `listings`; also returns the report
/// stores of the sinks that hold them (`[multi_cluster]`) and the sinks themselves.
pub(super) async fn start_sinks(
    plan: &Plan,
    factory: &dyn SinkFactory,
    metrics: &Arc<Metrics>,
    (leadership, events): (&Leadership, &Events),
    listings: &Listings,
) -> Result<SinkActors, EngineError> {
    let mut actors = BTreeMap::new();
    let mut stores = BTreeMap::new();
    let mut handles = BTreeMap::new();
    for (name, config) in &plan.sinks {
        let sink = factory.build(name, plan, metrics).await?;
        handles.insert(name.clone(), sink.clone());
        if let Some(store) = sink.reports() {
            stores.insert(name.clone(), store);
        }
        listings.set(name, &*sink);
        actors.insert(
            name.clone(),
            start_sink(name, config, sink, metrics, leadership, events),
        );
    }
    Ok((actors, stores, handles))
}

/// The running sink actors, the report stores among them and the sinks, by sink name.
pub(super) type SinkActors = (
    BTreeMap<String, Addr<SinkActor>>,
    BTreeMap<String, Arc<dyn ReportStore>>,
    BTreeMap<String, Arc<dyn Sink>>,
);

/// The bound on probes in flight: `limits.max_concurrent_probes`, or what the open-file
/// limit allows next to the connections `plan`'s targets keep.
pub(super) fn probe_limits(plan: &Plan, metrics: &Arc<Metrics>) -> Arc<ProbeLimits> {
    let kept = plan.targets.iter().filter(|t| t.keeps_connection()).count();
    let concurrency = ProbeLimits::concurrency(plan.limits.max_concurrent_probes, kept);
    info!(
        concurrency,
        "probes in flight at once at most (limits.max_concurrent_probes; 0 = from the open-file limit)"
    );
    Arc::new(ProbeLimits::new(concurrency, metrics.clone()))
}

/// Starts the actor of sink `name`; a shared back end under leader election is written
/// only while `leadership` allows.
pub(super) fn start_sink(
    name: &str,
    config: &PlannedSink,
    sink: Arc<dyn Sink>,
    metrics: &Arc<Metrics>,
    leadership: &Leadership,
    events: &Events,
) -> Addr<SinkActor> {
    let gate = (leadership.is_elected() && config.spec.shared()).then(|| leadership.clone());
    SinkActor::new(
        name.to_owned(),
        sink,
        config.delivery(),
        metrics.clone(),
        gate,
        events.clone(),
    )
    .start()
}

/// A replica's name in its Leases: `configured`, else `$HOSTNAME` (the pod name in
/// Kubernetes), else the kernel's host name.
pub(super) fn identity(configured: Option<&String>) -> String {
    configured
        .cloned()
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()))
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .unwrap_or_else(|| format!("pid-{}", std::process::id()))
}

/// Probes per second one prober thread is given before a second one is started.
///
/// Starts the answer canary and the availability ledger on `plan`, before anything
/// publishes, so they see every decision; the sender they follow plans on. They run on a
/// thread of their own (`ho-answers`): a thousand questions a second, or a wave of
/// transitions re-judging names, never takes time from the tracker's decisions. The thread
/// ends when the sender is dropped (the engine stopped).
pub(super) fn start_answers(
    plan: &Arc<Plan>,
    events: &Events,
    metrics: &Arc<Metrics>,
    leadership: &Leadership,
    kept: &crate::drain::OperatorState,
    listings: &Listings,
    dns: Arc<dyn DnsClient>,
) -> (watch::Sender<Arc<Plan>>, Answers) {
    let (plans, following) = watch::channel(plan.clone());
    let listings = listings.clone();
    let (events, metrics, leadership) = (events.clone(), metrics.clone(), leadership.clone());
    let held = kept.held();
    let (started, answers) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("ho-answers".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a current-thread runtime builds");
            runtime.block_on(async move {
                let (observed, observations) = tokio::sync::mpsc::unbounded_channel();
                let mut until = following.clone();
                let canaries = crate::canary::start(
                    &events,
                    metrics.clone(),
                    (observed, listings),
                    dns,
                    following.clone(),
                );
                let ledger =
                    Ledger::start(&events, observations, following, held, leadership, metrics);
                let _ = started.send(Answers { ledger, canaries });
                while until.changed().await.is_ok() {}
            });
        })
        .expect("a thread starts");
    let answers = answers
        .recv()
        .expect("the answers thread reports its start");
    (plans, answers)
}

/// `[ring]`, prepared before the probers start (their gates read the ownership): this
/// replica's identity, the secret, the bound stream listener, and the channel of its own
/// verdicts (the tracker's end, the ring's end).
pub(super) async fn prepare_ring(plan: &Plan) -> Result<Option<(RingParts, Sharing)>, EngineError> {
    let config = &plan.ring;
    if !config.enabled {
        return Ok(None);
    }
    let secret = crate::secret::Secret::load(config.secret_file.as_deref(), None)
        .map_err(|e| EngineError::Ring(RingError::Secret(e)))?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| EngineError::Ring(RingError::Listen(config.listen, e.to_string())))?;
    let identity = identity(config.identity.as_ref());
    let me = crate::ring::rendezvous::member_hash(&identity);
    let assignment =
        crate::ring::handover::Assignment::new(me, config.replication, config.lease_duration);
    let (shares, taken) = tokio::sync::mpsc::unbounded_channel();
    info!(%identity, ring = %config.name, replication = config.replication, listen = %config.listen, "ring: this replica probes its share of the targets and takes the other members' verdicts");
    let ownership = Arc::new(crate::ring::ownership::Ownership::new(assignment));
    let parts = RingParts {
        ring: config.name.clone(),
        identity,
        secret,
        lease_duration: config.lease_duration,
        renew_period: config.renew_period,
        ownership: ownership.clone(),
        shares: taken,
        listener,
    };
    Ok(Some((parts, Sharing { shares, ownership })))
}
