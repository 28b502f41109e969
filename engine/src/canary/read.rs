//! Where a canary reads what a name is served: the DNS server in front of the back end,
//! asked as a resolver asks, or the back end's own listing.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::dns_client::{AddressType, AskError, Asker, DnsClient};
use crate::sink::listing::{Listed, Listings};

/// How long one question may take.
const DEADLINE: Duration = Duration::from_secs(1);

/// A listing older than a decision is read again, but not more often than this: one
/// listing may be many paged requests against an account-wide API limit.
const REREAD: Duration = Duration::from_secs(1);

/// Where a sink's canary reads what is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Asks this DNS server, as a resolver would.
    Dns(SocketAddr),
    /// Asks the DNS server the sink says it answers on, once it says
    /// ([`crate::sink::listing::DnsPort`]).
    Found,
    /// Reads the sink's listing ([`crate::sink::listing`]).
    Listing,
}

/// What a name is served, as the canary compares it.
#[derive(Debug, Clone)]
pub(super) struct Served {
    /// The addresses in the answer, sorted.
    pub addresses: Arc<[IpAddr]>,
    /// The CNAME at the name, if it answered one.
    pub host: Option<String>,
    /// The error code a DNS server answered instead of records (SERVFAIL, REFUSED): to the
    /// `A` question, the name served nothing; to the `AAAA` one, its IPv4 addresses stand.
    pub failed: Option<String>,
    /// The delegation the server referred the question to instead of answering it.
    pub referral: Option<String>,
}

/// Why nothing usable was read.
#[derive(Debug, thiserror::Error)]
pub(super) enum ReadError {
    /// The DNS question failed.
    #[error(transparent)]
    Ask(#[from] AskError),
    /// The listing failed.
    #[error("listing: {0}")]
    Listing(String),
    /// The sink (being rebuilt by a reload) has no listing now.
    #[error("the sink has no listing")]
    NoListing,
}

/// One name's question.
pub(super) struct Question<'a> {
    /// The name as published (a wildcard as written).
    pub name: &'a str,
    /// Ask AAAA as well.
    pub v6: bool,
    /// Asked as a client in this network (EDNS Client Subnet).
    pub client: Option<ipnet::IpNet>,
    /// When the decision it is compared with was made (unix ms).
    pub decided_at: u64,
}

/// A sink canary's reader.
pub(super) enum Reader {
    /// One UDP socket kept for every question.
    Dns(Box<dyn Asker>),
    /// The last listing: when it was started (monotonic, unix ms) and what it held.
    Listing {
        sink: String,
        every: Duration,
        last: Option<(Instant, u64, Arc<Listed>)>,
    },
}

impl Reader {
    /// A reader asking the DNS server at `address` through `dns`.
    pub fn dns(address: SocketAddr, dns: &dyn DnsClient) -> Reader {
        Reader::Dns(dns.asker(address))
    }

    /// A reader of sink `sink`'s listing, whose names are read once in `every`.
    pub fn listing(sink: &str, every: Duration) -> Reader {
        Reader::Listing {
            sink: sink.to_owned(),
            every,
            last: None,
        }
    }

    /// What `q.name` is served.
    pub async fn served(
        &mut self,
        listings: &Listings,
        q: &Question<'_>,
    ) -> Result<Served, ReadError> {
        match self {
            Reader::Dns(asker) => Ok(ask_dns(&mut **asker, q).await?),
            Reader::Listing { sink, every, last } => {
                let fresh = last.as_ref().is_some_and(|(at, ms, _)| {
                    at.elapsed() < *every && (*ms >= q.decided_at || at.elapsed() < REREAD)
                });
                if !fresh {
                    let listing = listings.get(sink).ok_or(ReadError::NoListing)?;
                    let (at, ms) = (Instant::now(), crate::clock::unix_millis(SystemTime::now()));
                    let listed = listing
                        .list()
                        .await
                        .map_err(|e| ReadError::Listing(e.message))?;
                    *last = Some((at, ms, Arc::new(listed)));
                }
                let (_, _, listed) = last.as_ref().expect("just listed");
                let held = listed.get(q.name).cloned().unwrap_or_default();
                Ok(Served {
                    addresses: held.addresses.into(),
                    host: held.host,
                    failed: None,
                    referral: None,
                })
            }
        }
    }
}

/// What the DNS server serves for `q.name` (a wildcard asked through a name it covers).
async fn ask_dns(asker: &mut dyn Asker, q: &Question<'_>) -> Result<Served, AskError> {
    let qname = match q.name.strip_prefix("*.") {
        Some(parent) => format!("ho-canary.{parent}"),
        None => q.name.to_owned(),
    };
    let mut answered = asker
        .answer(&qname, AddressType::A, q.client, DEADLINE)
        .await?;
    if q.v6 && answered.cname.is_none() && answered.failed.is_none() {
        let more = asker
            .answer(&qname, AddressType::Aaaa, q.client, DEADLINE)
            .await?;
        answered.addresses.extend(more.addresses);
        answered.cname = more.cname;
        answered.failed = more.failed;
        answered.referral = answered.referral.or(more.referral);
    }
    answered.addresses.sort();
    Ok(Served {
        addresses: answered.addresses.into(),
        host: answered.cname,
        failed: answered.failed.map(str::to_owned),
        referral: answered.referral,
    })
}
