//! The answer canary: asks the DNS server in front of each sink (the embedded server, an
//! RFC 2136 primary, or the `canary.address` a sink names: PowerDNS's port, a secondary,
//! the CoreDNS reading a hosts file) for every name the sink publishes, the way a resolver
//! would, and compares what it is handed with what was decided. What a sink reports
//! writing is not what resolvers get: a provider that took a change and serves the old
//! answer, a zone edited by hand, a secondary that missed a NOTIFY all look written.
//!
//! A sink is asked at `canary.address` when set, else where its kind answers: the embedded
//! server's listener and an RFC 2136 primary are known from the config; PowerDNS says
//! through its API ([`crate::sink::listing::DnsPort`]), asked when the task starts and again,
//! backing off, until it answers, the sink listed under `canaries_off` with why meanwhile.
//!
//! Each sink has its own task, paced to its `max_queries_per_second`; a decision makes its
//! tenant's names due at once and then re-asked quickly (20 ms, doubling) until they match,
//! so the time from a decision to the served answer is measured to tens of milliseconds.
//! It only ever asks the addresses in the config or those the sinks' APIs report.
//!
//! A kind with no DNS port to ask (a cloud provider's hosted zone) is read through its own
//! listing instead ([`crate::sink::listing`]): one listing per period answers every name,
//! re-read at most once a second while a decision waits to be seen. It sees what the
//! provider's API holds (a hand edit, a write that never landed), not its name servers'
//! propagation.
//!
//! An `answer = "cname"` tenant's name is served as decided when it answers a CNAME to a
//! host the tenant publishes now, or (the apex, or a provider flattening a CNAME there)
//! addresses of the decision; a CNAME to any other host is stale. What a resolver is handed
//! through a CNAME is the addresses the host had when last published: the ledger's input.

mod read;
mod watch;

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use ho_config::{Answer, Plan};
use tokio::sync::{mpsc, watch as tokio_watch};
use tokio::task::AbortHandle;

use crate::dns_client::DnsClient;
use crate::events::{Event, Events};
use crate::metrics::Metrics;
use crate::sink::listing::Listings;
use crate::status::{CanaryOff, CanaryStatus};

pub use read::Source;
use watch::{SinkCanary, Vantage, Watched};

/// What a tenant decided last.
#[derive(Debug, Clone)]
pub struct Intended {
    /// Snapshot sequence number.
    pub seq: u64,
    /// The addresses, sorted.
    pub addresses: Arc<[IpAddr]>,
    /// `answer = "cname"`: the host names a CNAME may point at now (lower case, no
    /// trailing dot); empty otherwise.
    pub hosts: Arc<[String]>,
    /// When it was decided (unix milliseconds).
    pub at: u64,
}

/// The canary saw `sink` answer `addresses` for `name` at `at` (unix milliseconds).
#[derive(Debug, Clone)]
pub struct Observation {
    /// The sink.
    pub sink: String,
    /// The name's tenant.
    pub tenant: String,
    /// The name as published (a wildcard as written).
    pub name: String,
    /// The location it was asked from (a `geo` name asked as a client there), if any.
    pub geo: Option<String>,
    /// What was answered, sorted.
    pub addresses: Arc<[IpAddr]>,
    /// When.
    pub at: u64,
}

/// What every sink's canary task shares.
#[derive(Clone)]
pub(crate) struct Shared {
    /// Each tenant's latest decision.
    pub intended: Arc<Mutex<HashMap<String, Intended>>>,
    /// Every host name ever published (`answer = "cname"`) with the addresses it had when
    /// last published: what a CNAME served to it hands a resolver, the host down or not.
    pub hosts: Arc<Mutex<HashMap<String, Arc<[IpAddr]>>>>,
    /// Bumped at each decision: the tasks look for tenants whose decision is new.
    pub decided: tokio_watch::Receiver<u64>,
    /// Each sink's canary as `/status` shows it.
    pub status: Arc<Mutex<BTreeMap<String, CanaryStatus>>>,
    /// The sinks whose DNS port is not known yet, each with why (`/status`'s
    /// `canaries_off`).
    pub unfound: Arc<Mutex<BTreeMap<String, String>>>,
    /// Where events go.
    pub events: Events,
    /// Counters and gauges.
    pub metrics: Arc<Metrics>,
    /// Where observations go (the ledger).
    pub observations: mpsc::UnboundedSender<Observation>,
    /// The sinks' listings, for canaries that read one.
    pub listings: Listings,
    /// What asks the DNS servers.
    pub dns: Arc<dyn DnsClient>,
}

/// Every sink's canary as `/status` shows it, and the sinks without one and why; cheap
/// to clone.
#[derive(Clone, Default)]
pub struct Board {
    /// The running canaries, by sink.
    status: Arc<Mutex<BTreeMap<String, CanaryStatus>>>,
    /// The sinks the plan gives no canary.
    off: Arc<Mutex<Vec<CanaryOff>>>,
    /// The sinks whose canary waits for their DNS port, each with why.
    unfound: Arc<Mutex<BTreeMap<String, String>>>,
}

impl Board {
    /// Every sink's canary, by sink name.
    pub fn status(&self) -> Vec<CanaryStatus> {
        let status = self.status.lock().expect("never poisoned");
        status.values().cloned().collect()
    }

    /// The sinks no canary asks, each with why: those the plan gives none, and those
    /// whose DNS port is not known yet.
    pub fn off(&self) -> Vec<CanaryOff> {
        let mut off = self.off.lock().expect("never poisoned").clone();
        let unfound = self.unfound.lock().expect("never poisoned");
        off.extend(unfound.iter().map(|(sink, reason)| CanaryOff {
            sink: sink.clone(),
            reason: reason.clone(),
        }));
        off.sort_by(|a, b| a.sink.cmp(&b.sink));
        off
    }
}

/// Why no canary asks `planned` (a sink `canaried` leaves out).
fn off_reason(planned: &ho_config::PlannedSink) -> String {
    match &planned.table.canary {
        Some(c) if !c.enabled => "turned off (canary.enabled = false)".into(),
        Some(_) | None if planned.canary.is_some() => "no tenant publishes to it".into(),
        _ if planned.spec.canary_reads_listing() => "this kind has no DNS port of its own: give canary.address (the DNS server that answers what it writes), or canary = { every = \"30s\" } to read its listing".into(),
        _ => "this kind has no DNS port of its own: give canary.address, the DNS server that answers what it writes".into(),
    }
}

/// The sinks `plan` gives no canary, each with why.
fn off_list(plan: &Plan) -> Vec<CanaryOff> {
    let asked = canaried(plan);
    (plan.sinks.iter())
        .filter(|(sink, _)| !asked.contains_key(*sink))
        .map(|(sink, planned)| CanaryOff {
            sink: sink.clone(),
            reason: off_reason(planned),
        })
        .collect()
}

/// Starts the canaries of `plans`' sinks and follows plan changes, restarting only the
/// sinks whose canary or names changed; everything stops when the plans' sender is
/// dropped (the engine stopped). Observations go to `observations` (the ledger); sinks
/// read through their listing find it in `listings`; DNS servers are asked through `dns`.
pub fn start(
    events: &Events,
    metrics: Arc<Metrics>,
    (observations, listings): (mpsc::UnboundedSender<Observation>, Listings),
    dns: Arc<dyn DnsClient>,
    mut plans: tokio_watch::Receiver<Arc<Plan>>,
) -> Board {
    let intended: Arc<Mutex<HashMap<String, Intended>>> = Arc::default();
    let hosts: Arc<Mutex<HashMap<String, Arc<[IpAddr]>>>> = Arc::default();
    let (bump, decided) = tokio_watch::channel(0u64);
    let mut follow = events.follow();
    let (record, known) = (intended.clone(), hosts.clone());
    let decisions = tokio::spawn(async move {
        while let Some(event) = follow.recv().await {
            if let Event::Publish { .. } = &*event {
                learn(&event, &record, &known);
                bump.send_modify(|n| *n += 1);
            }
        }
    });
    let board = Board::default();
    // Known before the first `/status`: the tasks below start when this thread next waits.
    *board.off.lock().expect("never poisoned") = off_list(&plans.borrow());
    let off = board.off.clone();
    let shared = Shared {
        intended,
        hosts,
        decided,
        status: board.status.clone(),
        unfound: board.unfound.clone(),
        events: events.clone(),
        metrics,
        observations,
        listings,
        dns,
    };
    tokio::spawn(async move {
        let mut tasks: HashMap<String, (SinkCanary, AbortHandle)> = HashMap::new();
        loop {
            let plan = plans.borrow_and_update().clone();
            retask(&mut tasks, &plan, &shared);
            *off.lock().expect("never poisoned") = off_list(&plan);
            if plans.changed().await.is_err() {
                break;
            }
        }
        for (_, task) in tasks.values() {
            task.abort();
        }
        decisions.abort();
    });
    board
}

/// What a publish `event` intends: the tenant's sorted addresses, or the host names it
/// points to (with each host's addresses as published, to judge a served CNAME by).
fn learn(
    event: &Event,
    intended: &Mutex<HashMap<String, Intended>>,
    hosts: &Mutex<HashMap<String, Arc<[IpAddr]>>>,
) {
    let Event::Publish {
        at,
        tenant,
        seq,
        addresses,
        hosts: published,
        ..
    } = event
    else {
        return;
    };
    let mut sorted = addresses.clone();
    sorted.sort();
    let mut known = hosts.lock().expect("never poisoned");
    for h in published {
        let mut addresses = h.addresses.clone();
        addresses.sort();
        known.insert(h.host.to_ascii_lowercase(), addresses.into());
    }
    drop(known);
    let decision = Intended {
        seq: *seq,
        addresses: sorted.into(),
        hosts: published
            .iter()
            .map(|h| h.host.to_ascii_lowercase())
            .collect(),
        at: crate::clock::unix_millis(at.0),
    };
    intended
        .lock()
        .expect("never poisoned")
        .insert(tenant.clone(), decision);
}

/// Starts, restarts or stops each sink's task for `plan`.
fn retask(tasks: &mut HashMap<String, (SinkCanary, AbortHandle)>, plan: &Plan, shared: &Shared) {
    let wanted = canaried(plan);
    tasks.retain(|sink, (config, task)| {
        let keep = wanted.get(sink) == Some(config);
        if !keep {
            task.abort();
            config.forget(shared);
        }
        keep
    });
    shared
        .status
        .lock()
        .expect("never poisoned")
        .retain(|sink, _| wanted.contains_key(sink));
    shared
        .unfound
        .lock()
        .expect("never poisoned")
        .retain(|sink, _| tasks.contains_key(sink));
    for (sink, config) in wanted {
        if tasks.contains_key(&sink) {
            continue;
        }
        let task = tokio::spawn(config.clone().run(shared.clone())).abort_handle();
        tasks.insert(sink, (config, task));
    }
}

/// The sinks `plan` asks a canary of, each with the names it asks.
pub fn canaried(plan: &Plan) -> BTreeMap<String, SinkCanary> {
    let mut out = BTreeMap::new();
    for (sink, planned) in &plan.sinks {
        let Some(canary) = &planned.canary else {
            continue;
        };
        // Validation leaves a canary without an address only on kinds that find their
        // port or have a listing.
        let source = match canary.address {
            Some(address) => Source::Dns(address),
            None if planned.spec.finds_dns_port() => Source::Found,
            None => Source::Listing,
        };
        let client_subnets = match source {
            Source::Dns(_) | Source::Found => canary.client_subnets.clone(),
            // A listing holds every location's records; it is asked from nowhere.
            Source::Listing => BTreeMap::new(),
        };
        let watched: Vec<Watched> = plan
            .tenants
            .iter()
            .filter(|t| t.sinks.contains(sink))
            .flat_map(|t| watched_names(plan, t, &client_subnets))
            .collect();
        if watched.is_empty() {
            continue;
        }
        out.insert(
            sink.clone(),
            SinkCanary {
                sink: sink.clone(),
                source,
                every: canary.every,
                grace: canary.grace,
                rate: canary.max_queries_per_second,
                watched,
            },
        );
    }
    out
}

/// The questions tenant `t`'s names get: each name as asked from the canary, and a `geo`
/// name also from each location of `client_subnets` the tenant has endpoints in.
fn watched_names(
    plan: &Plan,
    t: &ho_config::plan::Tenant,
    client_subnets: &BTreeMap<String, String>,
) -> Vec<Watched> {
    let v6 = t
        .endpoints
        .iter()
        .any(|&e| plan.endpoints[e].address.is_ipv6());
    let exact = matches!(
        t.policy,
        ho_config::RoutingPolicy::All | ho_config::RoutingPolicy::Failover
    );
    let cname = t.answer == Answer::Cname;
    let mut vantages = vec![None];
    if t.policy == ho_config::RoutingPolicy::Geo && !cname {
        for (geo, client) in client_subnets {
            let Ok(client) = client.parse::<ipnet::IpNet>() else {
                continue;
            };
            let local: Arc<[IpAddr]> = (t.endpoints.iter())
                .map(|&e| &plan.endpoints[e])
                .filter(|e| {
                    e.labels()
                        .get("geo")
                        .is_some_and(|g| g.eq_ignore_ascii_case(geo))
                })
                .map(|e| e.address)
                .collect();
            if !local.is_empty() {
                vantages.push(Some(Vantage {
                    geo: geo.clone(),
                    client,
                    local,
                }));
            }
        }
    }
    t.domains
        .iter()
        .flat_map(|name| {
            vantages.iter().map(move |vantage| Watched {
                tenant: t.name.clone(),
                name: name.clone(),
                v6,
                exact,
                cname,
                vantage: vantage.clone(),
            })
        })
        .collect()
}
