//! What a back end serves, read through its own API: the answer canary's source for kinds
//! whose zone has no DNS port it can ask (a cloud provider's hosted zone). A listing is what
//! the provider's API holds now; the provider's name servers may still be propagating it,
//! which a listing cannot see. A back end whose DNS port only it knows (PowerDNS's
//! `local-address`) says where it is through the same API ([`DnsPort`]).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use super::SinkError;

/// What one name holds in a listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListedName {
    /// Its A and AAAA values, sorted (every routed set of the name together: a resolver is
    /// handed some of them).
    pub addresses: Vec<IpAddr>,
    /// The host its CNAME (or an alias to a host outside the zone) points at, lower case,
    /// no trailing dot.
    pub host: Option<String>,
}

/// Every name a listing holds, by name (lower case, no trailing dot; a wildcard as
/// written, `*.apps.example.com`).
pub type Listed = HashMap<String, ListedName>;

/// The future [`Listing::list`] returns.
pub type ListingFuture = Pin<Box<dyn Future<Output = Result<Listed, SinkError>> + Send>>;

/// A back end whose served records can be listed through its API.
pub trait Listing: Send + Sync {
    /// The zone's A, AAAA and CNAME records (and aliases) as the back end holds them now.
    fn list(&self) -> ListingFuture;
}

/// Why a back end could not say where its DNS server listens.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortError {
    /// The API could not be asked, or refused (down, wrong key, a timeout).
    #[error("its API could not be asked: {0}")]
    Api(String),
    /// The API answered, but with nothing a DNS address can be made of.
    #[error("its settings name no DNS address: {0}")]
    Unusable(String),
}

/// The future [`DnsPort::find`] returns.
pub type PortFuture = Pin<Box<dyn Future<Output = Result<SocketAddr, PortError>> + Send>>;

/// A back end that says through its API where its DNS server listens, so that the canary
/// asks it without the address being written into the config twice.
pub trait DnsPort: Send + Sync {
    /// The address (UDP) the back end's DNS server answers on now.
    fn find(&self) -> PortFuture;
}

/// What the canary reads back from one running sink.
#[derive(Clone, Default)]
struct Readback {
    listing: Option<Arc<dyn Listing>>,
    port: Option<Arc<dyn DnsPort>>,
}

/// The listings and DNS ports of the running sinks that have one, by sink name: kept by the
/// engine as sinks are built and replaced, read by the canary each time it lists or looks
/// for a port.
#[derive(Clone, Default)]
pub struct Listings(Arc<Mutex<BTreeMap<String, Readback>>>);

impl Listings {
    /// What sink `name` (just built) can be read back through from now on.
    pub fn set(&self, name: &str, sink: &dyn super::Sink) {
        let readback = Readback {
            listing: sink.listing(),
            port: sink.dns_port(),
        };
        let mut all = self.0.lock().expect("never poisoned");
        if readback.listing.is_none() && readback.port.is_none() {
            all.remove(name);
        } else {
            all.insert(name.to_owned(), readback);
        }
    }

    /// Keeps only the sinks `keep` names.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.0
            .lock()
            .expect("never poisoned")
            .retain(|name, _| keep(name));
    }

    /// Sink `name`'s listing, if it has one.
    pub fn get(&self, name: &str) -> Option<Arc<dyn Listing>> {
        let all = self.0.lock().expect("never poisoned");
        all.get(name).and_then(|r| r.listing.clone())
    }

    /// Where sink `name` says its DNS server listens, if it can say.
    pub fn port(&self, name: &str) -> Option<Arc<dyn DnsPort>> {
        let all = self.0.lock().expect("never poisoned");
        all.get(name).and_then(|r| r.port.clone())
    }
}
