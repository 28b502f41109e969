//! What the engine asks of DNS servers as a client, answered by `ho-dns`, the crate that
//! speaks DNS messages: a host name's addresses from a recursive resolver (endpoints given
//! by name, [`crate::hosts`]) and what the DNS server in front of a back end answers for a
//! name (the answer canary, `canary`). The `dns` check kind's seam is the probe
//! path's own ([`crate::probe::dns`]).

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::time::Duration;

use ipnet::IpNet;

/// A question in flight.
pub type Asking<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Asks DNS servers as a client.
pub trait DnsClient: Send + Sync {
    /// `host`'s A and AAAA addresses from the first of `servers` (recursive resolvers) that
    /// answers within `timeout`, the CNAME chain followed as the resolver gives it.
    fn lookup<'a>(
        &'a self,
        host: &'a str,
        servers: &'a [SocketAddr],
        timeout: Duration,
    ) -> Asking<'a, Result<Found, LookupError>>;

    /// An asker of `server`, which keeps what it opened between questions.
    fn asker(&self, server: SocketAddr) -> Box<dyn Asker>;
}

/// One server's asker, as the canary keeps it.
pub trait Asker: Send {
    /// What the server answers for `name`'s `rtype` addresses, asked as a client in
    /// `client` (EDNS Client Subnet) when given: its addresses (NXDOMAIN, NODATA, SERVFAIL
    /// and REFUSED answer none) and the CNAME at `name`, if there is one.
    fn answer<'a>(
        &'a mut self,
        name: &'a str,
        rtype: AddressType,
        client: Option<IpNet>,
        deadline: Duration,
    ) -> Asking<'a, Result<Answered, AskError>>;
}

/// The address record a question asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressType {
    /// IPv4.
    A,
    /// IPv6.
    Aaaa,
}

/// What a name resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Its addresses, sorted, each once.
    pub addresses: Vec<IpAddr>,
    /// The shortest TTL among the records used.
    pub ttl: Duration,
}

/// Why a host name has no addresses, or no resolver can be asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// `/etc/resolv.conf` cannot be read.
    #[error("/etc/resolv.conf: {0} (set [resolver] servers)")]
    ResolvConf(String),
    /// `/etc/resolv.conf` names no usable resolver.
    #[error("/etc/resolv.conf names no nameserver (set [resolver] servers)")]
    NoNameserver,
    /// The host is not a DNS name.
    #[error("{host}: {reason}")]
    Name {
        /// The host as written.
        host: String,
        /// Why it is not a name.
        reason: String,
    },
    /// No resolver to ask.
    #[error("no resolver configured")]
    NoServer,
    /// The last resolver asked gave no addresses: no answer, a negative one, or none usable.
    #[error("{server}: {reason}")]
    Unanswered {
        /// The resolver.
        server: SocketAddr,
        /// What it answered, or why it did not.
        reason: String,
    },
}

/// One answer as the canary reads it.
#[derive(Debug, Default)]
pub struct Answered {
    /// Its addresses, sorted (a server that follows a CNAME in its own zones adds the
    /// target's).
    pub addresses: Vec<IpAddr>,
    /// The CNAME at the name asked (its target, lower case, no trailing dot).
    pub cname: Option<String>,
    /// SERVFAIL or REFUSED: the server holds no answer for the name, which a resolver
    /// that has only this server passes on as a failure: the name answers nothing.
    pub failed: Option<&'static str>,
    /// No answer but a referral: the name lies below a delegation to other name servers
    /// (`below a delegation at NAME (NS ...)`), which resolvers follow instead (a zone cut
    /// over to or from another system).
    pub referral: Option<String>,
}

impl Answered {
    /// The server answered error code `rcode` instead of records.
    pub fn failed(rcode: &'static str) -> Answered {
        Answered {
            failed: Some(rcode),
            ..Answered::default()
        }
    }
}

/// Why a question got no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    /// The name cannot be asked (not a DNS name).
    #[error("{0:?} is not a DNS name")]
    Name(String),
    /// No answer within the deadline.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The socket failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// An answer that does not parse.
    #[error("unreadable answer: {0}")]
    Unreadable(String),
    /// An answer with an error code that says the question was not understood (FORMERR,
    /// NOTIMP, ...): nothing is known of what the name serves.
    #[error("rcode {0}")]
    Rcode(String),
}
