//! What the engine hands to sinks: the full desired record set of one tenant.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

pub use ho_config::Answer;
use ho_config::RoutingPolicy;
use opentelemetry::trace::SpanContext;
use serde::Serialize;

use crate::hysteresis::Health;
use tokio::time::Instant;

#[cfg(test)]
mod change_tests;
mod reason;
pub use reason::Reason;
pub(crate) use reason::Reasons;

/// Why the published set is what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PublishMode {
    /// The healthy endpoints.
    Healthy,
    /// Every endpoint, because none is healthy (`on_all_unhealthy = "publish_all"`).
    FailOpenAllUnhealthy,
    /// Every endpoint, because fewer than `min_healthy` of them are healthy.
    FailOpenBelowMinHealthy,
    /// Nothing, because none is healthy and the tenant asked for `publish_none`.
    NoneHealthy,
}

impl PublishMode {
    /// The name used in JSON, logs and traces.
    pub fn as_str(self) -> &'static str {
        match self {
            PublishMode::Healthy => "healthy",
            PublishMode::FailOpenAllUnhealthy => "fail_open_all_unhealthy",
            PublishMode::FailOpenBelowMinHealthy => "fail_open_below_min_healthy",
            PublishMode::NoneHealthy => "none_healthy",
        }
    }
}

/// One published address and what a routing-aware sink needs to know about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PublishedAddress {
    /// The address.
    pub address: IpAddr,
    /// Its weight in this tenant (`weighted` policy: label rules, else the endpoint's).
    pub weight: u32,
    /// The endpoint it belongs to; shared, so a snapshot of 10,000 addresses costs 10,000
    /// reference counts rather than 10,000 copies of names and labels.
    #[serde(flatten)]
    pub endpoint: Arc<EndpointMeta>,
}

/// What sinks may need to know about an endpoint besides its address: 48 bytes, one for
/// each endpoint of the plan (strings boxed, not `String`s with room to grow; labels shared
/// by every endpoint that has the same).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EndpointMeta {
    /// Endpoint name.
    #[serde(rename = "endpoint")]
    pub name: Box<str>,
    /// Failover tier.
    pub priority: u32,
    /// Labels (`geo`, ...).
    pub labels: Arc<BTreeMap<String, String>>,
    /// The host name the address was resolved from (an endpoint given by a load balancer's
    /// name): what an `answer = "cname"` tenant publishes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<Box<str>>,
}

impl EndpointMeta {
    /// The metadata of a configured endpoint.
    pub fn of(ep: &ho_config::Endpoint) -> EndpointMeta {
        EndpointMeta::with_labels(ep, Arc::new(ep.labels().clone()))
    }

    /// The metadata of each of `endpoints`, in order, those with the same labels sharing
    /// one copy of them (a plan has few distinct label sets, often only the empty one).
    pub fn of_each(endpoints: &[ho_config::Endpoint]) -> Vec<Arc<EndpointMeta>> {
        let mut shared: HashMap<&BTreeMap<String, String>, Arc<BTreeMap<String, String>>> =
            HashMap::new();
        endpoints
            .iter()
            .map(|ep| {
                let labels = shared
                    .entry(ep.labels())
                    .or_insert_with(|| Arc::new(ep.labels().clone()));
                Arc::new(EndpointMeta::with_labels(ep, Arc::clone(labels)))
            })
            .collect()
    }

    fn with_labels(ep: &ho_config::Endpoint, labels: Arc<BTreeMap<String, String>>) -> Self {
        EndpointMeta {
            name: Box::from(&*ep.name),
            priority: ep.priority,
            labels,
            host: ep.host().map(Box::from),
        }
    }
}

/// The desired state of one tenant: every domain resolves to every address listed.
/// Sinks make their back end match it as a whole, so a lost or coalesced snapshot is
/// repaired by the next one.
#[derive(Debug, Clone)]
pub struct TenantSnapshot {
    /// Tenant name.
    pub tenant: String,
    /// Hosts file name and ConfigMap key of the tenant (`hosts_key`); not sent to webhooks.
    pub hosts_key: String,
    /// Increases with every change; derived from the wall clock (microseconds) so it keeps
    /// increasing across restarts and a receiver can drop stale snapshots.
    pub seq: u64,
    /// Domains, lower case, no trailing dot.
    pub domains: Vec<String>,
    /// Record TTL.
    pub ttl: Duration,
    /// Addresses, sorted, no duplicates.
    pub addresses: Vec<PublishedAddress>,
    /// Why these addresses.
    pub mode: PublishMode,
    /// The tenant's routing policy, for sinks that answer per client.
    pub policy: RoutingPolicy,
    /// Whether the names answer the addresses or a CNAME to one of [`Self::hosts`].
    pub answer: Answer,
    /// `geo` policy: the location answered to clients matching no endpoint's `geo`.
    pub default_geo: Option<String>,
    /// `geo` policy: every location of the tenant's endpoints, up or down, so a sink can
    /// answer clients of a location that is down with the nearest one that is up.
    pub geos: Vec<String>,
    /// `[multi_cluster]`: the vote behind this set (live clusters, each address's down
    /// votes), for receivers that want to know which vantage points saw what.
    pub votes: Option<Arc<crate::multi_cluster::vote::Tally>>,
    /// Verdict changes of the tenant's endpoints since the previous snapshot (at most
    /// [`MAX_CHANGES`], the latest kept), for receivers that want to know why.
    pub changes: Vec<VerdictChange>,
    /// When the engine decided this snapshot.
    pub decided_at: SystemTime,
    /// When the health transition that caused it was observed, to measure failover time
    /// up to each sink's write.
    pub cause_at: Instant,
    /// The publish span, parent of every sink's write of it (invalid with tracing off).
    pub trace: SpanContext,
}

impl TenantSnapshot {
    /// A snapshot made by hand, as the tracker makes one for a healthy tenant (seq 1, no
    /// changes, no default location): for sink tests and benchmarks, which need snapshots
    /// without running the engine.
    pub fn healthy(
        tenant: &str,
        domains: &[&str],
        policy: RoutingPolicy,
        addresses: Vec<PublishedAddress>,
    ) -> TenantSnapshot {
        TenantSnapshot {
            hosts_key: format!("{tenant}.hosts"),
            tenant: tenant.to_owned(),
            seq: 1,
            domains: domains.iter().map(|d| (*d).to_owned()).collect(),
            ttl: Duration::from_secs(30),
            addresses,
            mode: PublishMode::Healthy,
            changes: Vec::new(),
            policy,
            answer: Answer::Addresses,
            default_geo: None,
            geos: Vec::new(),
            votes: None,
            decided_at: SystemTime::now(),
            cause_at: Instant::now(),
            trace: SpanContext::NONE,
        }
    }
}

impl PublishedAddress {
    /// An address of endpoint `name` (priority 0) with `weight` and `labels`.
    pub fn of(
        name: &str,
        address: IpAddr,
        weight: u32,
        labels: BTreeMap<String, String>,
    ) -> PublishedAddress {
        PublishedAddress {
            address,
            weight,
            endpoint: Arc::new(EndpointMeta {
                name: name.into(),
                priority: 0,
                labels: Arc::new(labels),
                host: None,
            }),
        }
    }

    /// An address of load balancer `host` (endpoint `<host>@<address>`, tier `priority`)
    /// with `weight`: for `answer = "cname"` tests of the sinks.
    pub fn of_host(host: &str, address: IpAddr, priority: u32, weight: u32) -> PublishedAddress {
        PublishedAddress {
            address,
            weight,
            endpoint: Arc::new(EndpointMeta {
                name: format!("{host}@{address}").into(),
                priority,
                labels: Arc::default(),
                host: Some(host.into()),
            }),
        }
    }
}

impl TenantSnapshot {
    /// `answer = "cname"`: every published host name once, each by its first address (its
    /// endpoint's weight, tier and labels; all of a host's addresses share them), in the
    /// order a sink that holds one CNAME per name takes the first of: best tier, heaviest,
    /// then by name. A host is here while any of its addresses is published. Empty for a
    /// tenant answering addresses.
    pub fn hosts(&self) -> Vec<&PublishedAddress> {
        if self.answer != Answer::Cname {
            return Vec::new();
        }
        let mut hosts: Vec<&PublishedAddress> = self
            .addresses
            .iter()
            .filter(|a| a.endpoint.host.is_some())
            .collect();
        hosts.sort_by(|a, b| {
            (
                a.endpoint.priority,
                std::cmp::Reverse(a.weight),
                &a.endpoint.host,
            )
                .cmp(&(
                    b.endpoint.priority,
                    std::cmp::Reverse(b.weight),
                    &b.endpoint.host,
                ))
        });
        hosts.dedup_by(|a, b| a.endpoint.host == b.endpoint.host);
        hosts
    }

    /// Every published host with all its published addresses, in [`Self::hosts`]' order.
    pub fn host_addresses(&self) -> Vec<HostAddresses> {
        self.hosts()
            .into_iter()
            .filter_map(|first| {
                let host = first.endpoint.host.as_deref()?;
                let addresses = self
                    .addresses
                    .iter()
                    .filter(|a| a.endpoint.host.as_deref() == Some(host))
                    .map(|a| a.address)
                    .collect();
                Some(HostAddresses {
                    host: host.to_owned(),
                    addresses,
                })
            })
            .collect()
    }

    /// The one host name a sink holding one CNAME per name publishes (the first of
    /// [`Self::hosts`]); `None` for an address tenant, or when nothing is published.
    pub fn cname(&self) -> Option<&str> {
        self.hosts()
            .first()
            .and_then(|a| a.endpoint.host.as_deref())
    }
}

/// A published host name (`answer = "cname"`) and the addresses it resolved to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostAddresses {
    /// The host name, lower case, without the trailing dot.
    pub host: String,
    /// Its published addresses.
    pub addresses: Vec<IpAddr>,
}

/// Most changes carried by one snapshot; a mass event keeps the latest ones.
pub const MAX_CHANGES: usize = 1000;

/// One endpoint's verdict change: 48 bytes, its texts shared. A tenant's snapshot holds
/// its changes until it publishes again (after a start, every endpoint's first verdict),
/// so the name is the plan's and the reason the one [`Reasons`] gave every change of it;
/// the transition's span stays with the tracker, which makes the publish its child.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerdictChange {
    /// Endpoint name (the plan's `Endpoint::name`, shared).
    pub endpoint: Arc<str>,
    /// Its address.
    pub address: IpAddr,
    /// Verdict before.
    pub from: Health,
    /// Verdict after.
    pub to: Health,
    /// The probe result that completed the change (`refused`, `status 503`, `ok`, ...).
    pub reason: Reason,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of_host(host: &str, ip: &str, priority: u32, weight: u32) -> PublishedAddress {
        PublishedAddress::of_host(host, ip.parse().unwrap(), priority, weight)
    }

    /// Each host once, best tier first, then heaviest, then by name; none for addresses.
    #[test]
    fn hosts_are_listed_once_in_the_order_one_record_sinks_take_the_first_of() {
        let mut s = TenantSnapshot::healthy(
            "t",
            &["api.example.org"],
            RoutingPolicy::All,
            vec![
                of_host("standby.example.net", "10.0.0.9", 1, 100),
                of_host("light.example.net", "10.0.0.1", 0, 1),
                of_host("heavy.example.net", "10.0.0.2", 0, 5),
                of_host("heavy.example.net", "10.0.0.3", 0, 5),
                of_host("also-light.example.net", "10.0.0.4", 0, 1),
            ],
        );
        assert!(s.hosts().is_empty() && s.cname().is_none(), "addresses");
        s.answer = Answer::Cname;
        let hosts: Vec<&str> = s
            .hosts()
            .iter()
            .map(|a| a.endpoint.host.as_deref().unwrap())
            .collect();
        assert_eq!(
            hosts,
            [
                "heavy.example.net",
                "also-light.example.net",
                "light.example.net",
                "standby.example.net"
            ]
        );
        assert_eq!(s.cname(), Some("heavy.example.net"));
    }

    /// Seeded endpoints of a few label sets: each one's metadata says what it says alone,
    /// the same labels are one copy, and the metadata stays 48 bytes an endpoint.
    #[test]
    fn each_endpoints_metadata_is_its_own_with_labels_shared() {
        let mut rng = fastrand::Rng::with_seed(0x94d0_49bb_1331_11eb);
        let mut next = |below: u64| rng.u64(..below);
        let endpoints: Vec<ho_config::Endpoint> = (0..500)
            .map(|i| {
                let labels = (0..next(3))
                    .map(|k| (format!("k{k}"), format!("v{}", next(2))))
                    .collect();
                let address: IpAddr = format!("10.0.{}.{}", i / 250, i % 250).parse().unwrap();
                let mut ep = ho_config::Endpoint::new(format!("e{i}"), address, i).with_extras(
                    ho_config::EndpointExtras {
                        labels,
                        host: (next(2) == 0).then(|| format!("lb{}.example.net", next(5))),
                        ..Default::default()
                    },
                );
                ep.priority = next(3) as u32;
                ep
            })
            .collect();
        let each = EndpointMeta::of_each(&endpoints);
        assert_eq!(each.len(), endpoints.len());
        for (i, (meta, ep)) in each.iter().zip(&endpoints).enumerate() {
            assert_eq!(**meta, EndpointMeta::of(ep), "endpoint {i}");
            assert_eq!(&*meta.name, &*ep.name);
            assert_eq!(*meta.labels, *ep.labels());
            assert_eq!(meta.host.as_deref(), ep.host());
            assert_eq!(meta.priority, ep.priority);
            for (other, o) in each.iter().zip(&endpoints) {
                let shared = Arc::ptr_eq(&meta.labels, &other.labels);
                assert_eq!(shared, ep.labels() == o.labels(), "endpoint {i}");
            }
        }
        assert!(std::mem::size_of::<EndpointMeta>() <= 48);
    }
}
