//! What a back end serves, read through its own API: the answer canary's source for kinds
//! whose zone has no DNS port it can ask (a cloud provider's hosted zone). A listing is what
//! the provider's API holds now; the provider's name servers may still be propagating it,
//! which a listing cannot see.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::IpAddr;
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

/// The listings of the running sinks that have one, by sink name: kept by the engine as
/// sinks are built and replaced, read by the canary each time it lists.
#[derive(Clone, Default)]
pub struct Listings(Arc<Mutex<BTreeMap<String, Arc<dyn Listing>>>>);

impl Listings {
    /// Sink `name`'s listing from now on (`None`: it has none).
    pub fn set(&self, name: &str, listing: Option<Arc<dyn Listing>>) {
        let mut all = self.0.lock().expect("never poisoned");
        match listing {
            Some(l) => all.insert(name.to_owned(), l),
            None => all.remove(name),
        };
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
        self.0.lock().expect("never poisoned").get(name).cloned()
    }
}
