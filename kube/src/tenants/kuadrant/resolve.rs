//! Host names checked before they reach the engine. A plan runs only once every endpoint's
//! host name has resolved (the engine's rule, so no gateway leaves DNS for want of a
//! lookup); a Kuadrant record or probe naming a load balancer that does not resolve would
//! hold every other change back. So each new host name a record's stand-ins carry is looked
//! up here first, through the operator's `[resolver]`, and a record whose name does not
//! resolve is refused alone, saying which name and why; the others go on. A name that
//! resolved once is the engine's to follow from then on (a later failed lookup keeps its
//! last addresses there); one that failed is asked again after `min_refresh`.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use ho_config::ResolverConfig;
use ho_engine::dns_client::DnsClient;
use ho_engine::hosts::resolv_conf;

/// What is known of the host names the records carry.
pub struct HostCheck {
    dns: Arc<dyn DnsClient>,
    resolved: HashSet<String>,
    /// Names whose last lookup failed: why, and when it was asked.
    failed: HashMap<String, (String, Instant)>,
}

impl HostCheck {
    /// Nothing looked up yet; `dns` asks the resolvers.
    pub fn new(dns: Arc<dyn DnsClient>) -> HostCheck {
        HostCheck {
            dns,
            resolved: HashSet::new(),
            failed: HashMap::new(),
        }
    }

    /// Looks up those of `hosts` not resolved yet (a failed one again once `min_refresh`
    /// passed), all at once, through `resolver`'s servers or the system's.
    pub async fn look_up(&mut self, hosts: BTreeSet<String>, resolver: &ResolverConfig) {
        self.failed.retain(|h, _| hosts.contains(h));
        let due: Vec<String> = hosts
            .into_iter()
            .filter(|h| !self.resolved.contains(h))
            .filter(|h| {
                self.failed
                    .get(h)
                    .is_none_or(|(_, at)| at.elapsed() >= resolver.min_refresh)
            })
            .collect();
        if due.is_empty() {
            return;
        }
        let servers = match resolver.servers.is_empty() {
            false => resolver.servers.clone(),
            true => match resolv_conf::system_servers() {
                Ok(servers) => servers,
                Err(e) => {
                    for h in due {
                        self.failed.insert(h, (e.to_string(), Instant::now()));
                    }
                    return;
                }
            },
        };
        let dns = self.dns.clone();
        let lookups = due
            .iter()
            .map(|h| dns.lookup(h, &servers, resolver.timeout));
        let found = futures_util::future::join_all(lookups).await;
        for (host, result) in due.into_iter().zip(found) {
            match result {
                Ok(_) => {
                    self.failed.remove(&host);
                    self.resolved.insert(host);
                }
                Err(e) => {
                    self.failed.insert(host, (e.to_string(), Instant::now()));
                }
            }
        }
    }

    /// Whether a name that failed is due to be asked again (a round should run).
    pub fn retry_due(&self, resolver: &ResolverConfig) -> bool {
        self.failed
            .values()
            .any(|(_, at)| at.elapsed() >= resolver.min_refresh)
    }

    /// Why `host` cannot be handed to the engine yet, if it cannot.
    pub fn unresolved(&self, host: &str) -> Option<String> {
        if self.resolved.contains(host) {
            return None;
        }
        Some(match self.failed.get(host) {
            Some((why, _)) => why.clone(),
            None => "not looked up yet".to_owned(),
        })
    }
}
