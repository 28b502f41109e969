//! Endpoints given by host name (a cloud load balancer's): each name is looked up before a
//! plan using it runs, then again whenever its TTL runs out; every address it resolves to
//! is an endpoint of its own (`Plan::with_resolved`), probed and published as any other.
//!
//! A plan does not run until every name has resolved once, so a gateway is never left out
//! of DNS because its name was not looked up yet: a name that does not resolve fails the
//! start (or the reload, which then changes nothing) with the resolver's answer. After
//! that, a lookup that fails keeps the last addresses, still probed: their verdicts decide,
//! so a resolver outage withdraws nothing that is healthy, and a deleted load balancer's
//! addresses leave as their probes fail. A new set of addresses replaces the old at once
//! (addresses the name no longer has stop being probed and published).
//!
//! The lookups themselves are a [`DnsClient`]'s (`ho-dns`); the resolvers asked are
//! `[resolver] servers`, else [`resolv_conf`]'s.

pub mod resolv_conf;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ho_config::{Plan, ResolverConfig};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::dns_client::{DnsClient, Found, LookupError};
use crate::metrics::{Metrics, ResultLabel};

/// An endpoint's host name does not resolve, or the system's resolvers cannot be read: a
/// plan is not run without every endpoint's addresses, or its gateways would leave DNS.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostsError {
    /// The system's resolvers cannot be read.
    #[error(transparent)]
    Resolvers(LookupError),
    /// An endpoint's host name does not resolve.
    #[error("endpoint \"{endpoint}\": host name {host} does not resolve: {source} (a plan runs only once every endpoint's name resolves, so no gateway leaves DNS for want of a lookup)")]
    Unresolved {
        /// The endpoint naming the host.
        endpoint: String,
        /// The host name.
        host: String,
        /// Why it has no addresses.
        #[source]
        source: LookupError,
    },
}

/// Looks every endpoint's host name up once, as a start does (the same resolver, the same
/// errors): what `check-config` asks, so it judges a config as `run` does.
pub async fn check(plan: &Plan, dns: Arc<dyn DnsClient>) -> Result<(), HostsError> {
    let (hosts, _) = Hosts::new(Arc::new(Metrics::new()), dns);
    hosts.prepare(plan).await.map(|_| ())
}

/// One host name of the endpoints, as last looked up.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HostStatus {
    /// The name.
    pub host: String,
    /// Its addresses in use (the last ones that resolved).
    pub addresses: Vec<String>,
    /// While lookups fail: the last one's error (the addresses above stay in use).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Every host name's addresses as last resolved.
pub type Resolved = BTreeMap<String, Vec<IpAddr>>;

/// How often the refresher looks at what is due, at most.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// One name's state.
struct Entry {
    addresses: Vec<IpAddr>,
    /// When it is looked up next.
    due: Instant,
    /// The last lookup's error, while lookups fail.
    failing: Option<String>,
}

impl Entry {
    /// What a refresh of `name` found, taken in: new addresses replace the old, a failed
    /// lookup keeps them (and says so once); the next lookup is due by the TTL or, while
    /// failing, `min_refresh`. The result's metric label.
    fn take(
        &mut self,
        name: &str,
        result: Result<Found, LookupError>,
        settings: &ResolverConfig,
        now: Instant,
    ) -> &'static str {
        match result {
            Ok(found) => {
                if let Some(e) = self.failing.take() {
                    info!(host = %name, was = %e, "host name resolves again");
                }
                self.due = now + refresh_after(settings, found.ttl);
                if found.addresses == self.addresses {
                    "unchanged"
                } else {
                    info!(host = %name, was = ?self.addresses, now = ?found.addresses, "host name resolves to other addresses: they replace the old ones");
                    self.addresses = found.addresses;
                    "changed"
                }
            }
            Err(e) => {
                if self.failing.is_none() {
                    warn!(host = %name, error = %e, addresses = ?self.addresses, "host name lookup failed; its last addresses stay, probed as before");
                }
                self.failing = Some(e.to_string());
                self.due = now + settings.min_refresh;
                "failed"
            }
        }
    }
}

struct State {
    settings: ResolverConfig,
    servers: Vec<SocketAddr>,
    entries: BTreeMap<String, Entry>,
}

/// The host names of the running plan and their addresses; clones share them. The
/// refresher ([`Hosts::follow`]) holds them weakly: it stops once the engine drops its
/// clone, and the addresses' channel closes with it.
#[derive(Clone)]
pub(crate) struct Hosts(Arc<Shared>);

struct Shared {
    state: Mutex<State>,
    resolved: watch::Sender<Resolved>,
    metrics: Arc<Metrics>,
    /// What asks the resolvers.
    dns: Arc<dyn DnsClient>,
}

impl Hosts {
    /// No names yet; the receiver sees every change of addresses.
    pub(crate) fn new(
        metrics: Arc<Metrics>,
        dns: Arc<dyn DnsClient>,
    ) -> (Hosts, watch::Receiver<Resolved>) {
        let (tx, rx) = watch::channel(Resolved::new());
        let hosts = Hosts(Arc::new(Shared {
            state: Mutex::new(State {
                settings: ResolverConfig::default(),
                servers: Vec::new(),
                entries: BTreeMap::new(),
            }),
            resolved: tx,
            metrics,
            dns,
        }));
        (hosts, rx)
    }

    /// Makes the names of `plan` the ones followed: forgets the others and looks up the
    /// new ones; an error names the endpoint whose name does not resolve.
    pub(crate) async fn prepare(&self, plan: &Plan) -> Result<Resolved, HostsError> {
        let names = plan.host_names();
        let servers = match (&plan.resolver.servers, names.is_empty()) {
            (_, true) => Vec::new(),
            (given, false) if !given.is_empty() => given.clone(),
            _ => resolv_conf::system_servers().map_err(HostsError::Resolvers)?,
        };
        let new: Vec<String> = {
            let state = self.0.state.lock().expect("not poisoned");
            names
                .iter()
                .filter(|n| !state.entries.contains_key(**n))
                .map(|n| (*n).to_owned())
                .collect()
        };
        let added = self.look_up_new(plan, new, &servers).await?;
        let mut state = self.0.state.lock().expect("not poisoned");
        state.settings = plan.resolver.clone();
        state.servers = servers;
        state
            .entries
            .retain(|name, _| names.contains(name.as_str()));
        let now = Instant::now();
        for (name, found) in added {
            self.0
                .metrics
                .host_lookups
                .get_or_create(&ResultLabel { result: "changed" })
                .inc();
            info!(host = %name, addresses = ?found.addresses, ttl = ?found.ttl, "host name resolved");
            let due = now + refresh_after(&state.settings, found.ttl);
            state.entries.insert(
                name,
                Entry {
                    addresses: found.addresses,
                    due,
                    failing: None,
                },
            );
        }
        let resolved = resolved_of(&state);
        self.0
            .resolved
            .send_if_modified(|r| replace_if_changed(r, &resolved));
        Ok(resolved)
    }

    /// The addresses of each of `new` (names not followed yet); an error names the first
    /// endpoint whose name does not resolve.
    async fn look_up_new(
        &self,
        plan: &Plan,
        new: Vec<String>,
        servers: &[SocketAddr],
    ) -> Result<Vec<(String, Found)>, HostsError> {
        let timeout = plan.resolver.timeout;
        let found = futures_util::future::join_all(
            new.iter()
                .map(|name| self.0.dns.lookup(name, servers, timeout)),
        )
        .await;
        let mut added = Vec::new();
        for (name, result) in new.into_iter().zip(found) {
            match result {
                Ok(found) => added.push((name, found)),
                Err(source) => {
                    self.0
                        .metrics
                        .host_lookups
                        .get_or_create(&ResultLabel { result: "failed" })
                        .inc();
                    let endpoint = plan
                        .hosts
                        .iter()
                        .find(|h| h.host == name)
                        .map_or("?", |h| h.name.as_str());
                    return Err(HostsError::Unresolved {
                        endpoint: endpoint.to_owned(),
                        host: name,
                        source,
                    });
                }
            }
        }
        Ok(added)
    }

    /// Looks names up again as they fall due, until the engine drops its clone.
    pub(crate) fn follow(&self) {
        let weak = Arc::downgrade(&self.0);
        actix::spawn(async move {
            loop {
                let wait = match weak.upgrade() {
                    Some(shared) => LOOK_EVERY.min(Hosts(shared).until_next()),
                    None => return,
                };
                tokio::time::sleep(wait).await;
                let Some(shared) = weak.upgrade() else {
                    return;
                };
                Hosts(shared).refresh_due().await;
            }
        });
    }

    /// Each name as `/status` shows it.
    pub(crate) fn status(&self) -> Vec<HostStatus> {
        let state = self.0.state.lock().expect("not poisoned");
        state
            .entries
            .iter()
            .map(|(host, e)| HostStatus {
                host: host.clone(),
                addresses: e.addresses.iter().map(ToString::to_string).collect(),
                error: e.failing.clone(),
            })
            .collect()
    }

    fn until_next(&self) -> Duration {
        let state = self.0.state.lock().expect("not poisoned");
        let next = state.entries.values().map(|e| e.due).min();
        next.map_or(LOOK_EVERY, |due| {
            due.saturating_duration_since(Instant::now())
        })
    }

    /// Looks up every name that is due; announces new addresses.
    async fn refresh_due(&self) {
        let (due, servers, timeout) = {
            let state = self.0.state.lock().expect("not poisoned");
            let now = Instant::now();
            let due: Vec<String> = state
                .entries
                .iter()
                .filter(|(_, e)| e.due <= now)
                .map(|(n, _)| n.clone())
                .collect();
            (due, state.servers.clone(), state.settings.timeout)
        };
        if due.is_empty() {
            return;
        }
        let found = futures_util::future::join_all(
            due.iter()
                .map(|name| self.0.dns.lookup(name, &servers, timeout)),
        )
        .await;
        let mut state = self.0.state.lock().expect("not poisoned");
        let settings = state.settings.clone();
        let now = Instant::now();
        for (name, result) in due.into_iter().zip(found) {
            // Forgotten by a reload meanwhile.
            let Some(entry) = state.entries.get_mut(&name) else {
                continue;
            };
            let result_label = entry.take(&name, result, &settings, now);
            self.0
                .metrics
                .host_lookups
                .get_or_create(&ResultLabel {
                    result: result_label,
                })
                .inc();
        }
        let resolved = resolved_of(&state);
        self.0
            .resolved
            .send_if_modified(|r| replace_if_changed(r, &resolved));
    }
}

/// When a name answered with `ttl` is looked up again.
fn refresh_after(settings: &ResolverConfig, ttl: Duration) -> Duration {
    ttl.clamp(settings.min_refresh, settings.max_refresh)
}

fn resolved_of(state: &State) -> Resolved {
    state
        .entries
        .iter()
        .map(|(name, e)| (name.clone(), e.addresses.clone()))
        .collect()
}

fn replace_if_changed(current: &mut Resolved, new: &Resolved) -> bool {
    if current == new {
        return false;
    }
    current.clone_from(new);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_looked_up_again_at_its_ttl_within_the_bounds() {
        let settings = ResolverConfig::default();
        let at = |s| refresh_after(&settings, Duration::from_secs(s));
        assert_eq!(at(60), Duration::from_secs(60), "an ELB's TTL");
        assert_eq!(at(0), settings.min_refresh);
        assert_eq!(at(86_400), settings.max_refresh);
    }
}
