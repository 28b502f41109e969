//! What the embedded server knows: per domain, the published set of its tenant, replaced
//! whole by each snapshot.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use hickory_proto::rr::Name;
use ho_config::RoutingPolicy;
use ho_engine::snapshot::{PublishedAddress, TenantSnapshot};

/// One published address as the server answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The address.
    pub ip: IpAddr,
    /// `weighted`: its weight.
    pub weight: u32,
    /// `geo`: its location (upper case), from the endpoint's `labels.geo`.
    pub geo: Option<String>,
}

/// A host name answered as a CNAME (`answer = "cname"`), and what the policy picks it by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// The name, absolute.
    pub name: Name,
    /// `weighted`: its endpoint's weight.
    pub weight: u32,
    /// `geo`: its location (upper case).
    pub geo: Option<String>,
}

/// What the routing policy picks from: an address or a host name, each with a weight and a
/// location.
pub trait Choice {
    /// `weighted`: the weight.
    fn weight(&self) -> u32;
    /// `geo`: the location (upper case).
    fn geo(&self) -> Option<&str>;
}

impl Choice for Target {
    fn weight(&self) -> u32 {
        self.weight
    }
    fn geo(&self) -> Option<&str> {
        self.geo.as_deref()
    }
}

impl Choice for Host {
    fn weight(&self) -> u32 {
        self.weight
    }
    fn geo(&self) -> Option<&str> {
        self.geo.as_deref()
    }
}

fn geo_of(a: &PublishedAddress) -> Option<String> {
    a.endpoint.labels.get("geo").map(|g| g.to_ascii_uppercase())
}

/// The answers of a tenant's domains: its published set, split by family, and how to pick
/// from it per query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameSet {
    /// Record TTL, seconds.
    pub ttl: u32,
    /// The tenant's routing policy.
    pub policy: RoutingPolicy,
    /// `geo`: location answered to clients of no known place, or of a place nearest to no
    /// location that is up (custom labels; upper case).
    pub default_geo: Option<String>,
    /// IPv4 addresses, sorted.
    pub v4: Vec<Target>,
    /// IPv6 addresses, sorted.
    pub v6: Vec<Target>,
    /// `answer = "cname"`: the host names a name below its zone's apex answers one of, as
    /// a CNAME (the apex answers `v4` and `v6`, as it cannot hold a CNAME). Empty for a
    /// tenant answering addresses.
    pub hosts: Vec<Host>,
}

impl NameSet {
    fn of(snapshot: &TenantSnapshot) -> NameSet {
        let mut targets: Vec<Target> = snapshot
            .addresses
            .iter()
            .map(|a| Target {
                ip: a.address,
                weight: a.weight,
                geo: geo_of(a),
            })
            .collect();
        // A host name that is not a valid DNS name was refused by the config.
        let hosts = snapshot
            .hosts()
            .into_iter()
            .filter_map(|a| {
                let name = Name::from_ascii(format!("{}.", a.endpoint.host.as_deref()?)).ok()?;
                Some(Host {
                    name,
                    weight: a.weight,
                    geo: geo_of(a),
                })
            })
            .collect();
        targets.sort_by_key(|t| t.ip);
        targets.dedup_by_key(|t| t.ip);
        let (v4, v6) = targets.into_iter().partition(|t| t.ip.is_ipv4());
        NameSet {
            ttl: u32::try_from(snapshot.ttl.as_secs()).unwrap_or(u32::MAX),
            policy: snapshot.policy,
            default_geo: snapshot
                .default_geo
                .as_ref()
                .map(|g| g.to_ascii_uppercase()),
            v4,
            v6,
            hosts,
        }
    }
}

/// A domain the server is asked about.
#[derive(Debug, Clone)]
pub enum Entry {
    /// A tenant's domain whose first snapshot has not arrived (start-up, before verdicts):
    /// answered SERVFAIL, never NXDOMAIN, so no resolver caches "does not exist".
    Pending,
    /// The tenant's current set.
    Ready(Arc<NameSet>),
}

/// Every domain's answers, and the SOA serial that counts their changes.
#[derive(Debug, Clone)]
pub struct Records {
    names: HashMap<String, Entry>,
    tenants: HashMap<String, Vec<String>>,
    /// Names that exist only as parents of domains (`b.example` of `a.b.example`): NODATA,
    /// not NXDOMAIN (RFC 8020: NXDOMAIN means nothing exists below either).
    empty_non_terminals: HashSet<String>,
    serial: u32,
    /// Until when names of the zones that are not known yet may still be declared by a
    /// tenant source whose first round has not been applied (`[kubernetes] tenants`).
    awaiting: Option<Instant>,
}

impl Default for Records {
    fn default() -> Self {
        Records {
            names: HashMap::new(),
            tenants: HashMap::new(),
            empty_non_terminals: HashSet::new(),
            serial: unix_seconds(),
            awaiting: None,
        }
    }
}

fn unix_seconds() -> u32 {
    let secs = ho_engine::clock::since_epoch(SystemTime::now()).as_secs();
    u32::try_from(secs).unwrap_or(u32::MAX)
}

impl Records {
    /// Marks `domains` of `tenant` as awaiting their first snapshot, unless known already
    /// (the index of parents is the caller's to rebuild); whether a name was added.
    fn expect(&mut self, tenant: &str, domains: &[String]) -> bool {
        let names = self.tenants.entry(tenant.to_owned()).or_default();
        let before = names.len();
        for d in domains {
            if !self.names.contains_key(d) {
                self.names.insert(d.clone(), Entry::Pending);
                names.push(d.clone());
            }
        }
        names.len() > before
    }

    /// Follows the tenants a new plan gives this server: the domains of tenants new to it
    /// await their first snapshot; those still awaiting it whose tenant left the plan go
    /// (a tenant removed before it ever published leaves nothing behind).
    /// Whether a name came or went.
    pub fn follow_plan<'a>(
        &mut self,
        tenants: impl IntoIterator<Item = (&'a str, &'a [String])>,
    ) -> bool {
        let tenants: HashMap<&str, &[String]> = tenants.into_iter().collect();
        let names = &mut self.names;
        let before = names.len();
        self.tenants.retain(|tenant, domains| {
            if !tenants.contains_key(tenant.as_str()) {
                domains.retain(|d| match names.get(d) {
                    Some(Entry::Pending) => names.remove(d).is_none(),
                    _ => true,
                });
            }
            !domains.is_empty()
        });
        let mut changed = self.names.len() != before;
        for (tenant, domains) in tenants {
            changed |= self.expect(tenant, domains);
        }
        if changed {
            self.reindex();
        }
        changed
    }

    /// Holds the names of the zones that are not known yet until `until` at most: a tenant
    /// source may still declare them, so they answer SERVFAIL, not NXDOMAIN.
    pub fn await_source(&mut self, until: Instant) {
        self.awaiting = Some(until);
    }

    /// The tenant source's first round is applied: what it did not declare does not exist.
    pub fn source_arrived(&mut self) {
        self.awaiting = None;
    }

    /// Whether an unknown name may still be declared at `now` (see [`Records::await_source`]).
    pub fn awaits_source(&self, now: Instant) -> bool {
        self.awaiting.is_some_and(|until| now < until)
    }

    /// Replaces the tenant's domains with `snapshot`'s; false when nothing changed.
    pub fn publish(&mut self, snapshot: &TenantSnapshot) -> bool {
        let set = Arc::new(NameSet::of(snapshot));
        let old = self
            .tenants
            .insert(snapshot.tenant.clone(), snapshot.domains.clone())
            .unwrap_or_default();
        let mut changed = false;
        for name in old.iter().filter(|n| !snapshot.domains.contains(n)) {
            changed |= self.names.remove(name).is_some();
        }
        for name in &snapshot.domains {
            let same = matches!(self.names.get(name), Some(Entry::Ready(s)) if **s == *set);
            if !same {
                self.names.insert(name.clone(), Entry::Ready(set.clone()));
                changed = true;
            }
        }
        if changed {
            self.reindex();
            self.bump_serial();
        }
        changed
    }

    /// Counts a change of the zones' data made beside the tenants' (an ACME challenge),
    /// so secondaries transfer it.
    pub fn bump_serial(&mut self) {
        self.serial = self.serial.wrapping_add(1).max(unix_seconds());
    }

    fn reindex(&mut self) {
        self.empty_non_terminals.clear();
        for name in self.names.keys() {
            let mut rest = name.as_str();
            while let Some((_, parent)) = rest.split_once('.') {
                if !self.names.contains_key(parent) {
                    self.empty_non_terminals.insert(parent.to_owned());
                }
                rest = parent;
            }
        }
    }

    /// The entry of `name` (lower case, no trailing dot).
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.names.get(name)
    }

    /// Every domain and its entry.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &Entry)> {
        self.names.iter().map(|(n, e)| (n.as_str(), e))
    }

    /// The wildcard entry that answers `name`, a name that does not exist under `apex`
    /// (RFC 4592): `*.` and its closest encloser, the nearest ancestor that exists (a
    /// domain, a parent of domains, or the apex). None when that wildcard is not published,
    /// so a name under an existing one is not caught by a wildcard further up.
    pub fn wildcard_for(&self, name: &str, apex: &str) -> Option<&Entry> {
        let mut rest = name;
        while let Some((_, parent)) = rest.split_once('.') {
            if parent.len() < apex.len() {
                return None;
            }
            if parent == apex
                || self.names.contains_key(parent)
                || self.is_empty_non_terminal(parent)
            {
                return self.names.get(&format!("*.{parent}"));
            }
            rest = parent;
        }
        None
    }

    /// Whether `name` exists only as a parent of domains.
    pub fn is_empty_non_terminal(&self, name: &str) -> bool {
        self.empty_non_terminals.contains(name)
    }

    /// The SOA serial: rises with every change (and starts at the Unix time, so it also
    /// rises across restarts).
    pub fn serial(&self) -> u32 {
        self.serial
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(domains: &[&str], addrs: &[&str]) -> TenantSnapshot {
        let addresses = addrs
            .iter()
            .map(|a| PublishedAddress::of(a, a.parse().unwrap(), 1, Default::default()))
            .collect();
        TenantSnapshot::healthy("t", domains, RoutingPolicy::All, addresses)
    }

    #[test]
    fn a_snapshot_replaces_the_tenants_names_and_bumps_the_serial_only_on_change() {
        let mut r = Records::default();
        r.expect("t", &["a.example.org".into()]);
        assert!(matches!(r.get("a.example.org"), Some(Entry::Pending)));
        let serial = r.serial();
        assert!(r.publish(&snapshot(&["a.example.org"], &["10.0.0.1", "2001:db8::1"])));
        assert!(r.serial() > serial);
        let Some(Entry::Ready(set)) = r.get("a.example.org") else {
            panic!("published")
        };
        assert_eq!((set.v4.len(), set.v6.len()), (1, 1));
        let serial = r.serial();
        assert!(!r.publish(&snapshot(&["a.example.org"], &["2001:db8::1", "10.0.0.1"])));
        assert_eq!(r.serial(), serial);
        assert!(r.publish(&snapshot(&["b.x.example.org"], &["10.0.0.1"])));
        assert!(
            r.get("a.example.org").is_none(),
            "a domain the tenant dropped goes"
        );
        assert!(r.is_empty_non_terminal("x.example.org"));
        assert!(r.is_empty_non_terminal("example.org"));
        assert!(!r.is_empty_non_terminal("b.x.example.org"));
    }
}
