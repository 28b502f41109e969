//! Why a `dns_server` sink's settings cannot make a server: each part's own error, named
//! here at the top where the parts are built, so no part below knows another's failures.

use super::dnssec::DnssecError;
use super::geo::GeoDbError;
use super::statics::StaticsError;
use super::transport::ListenError;
use crate::wire::key::KeyError;

/// Why a `dns_server` sink's settings cannot make a server (files its settings name:
/// DNSSEC keys, TSIG secrets, the GeoIP database, the cookie secret; its listen addresses).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// A zone, SOA or name server name is not a DNS name.
    #[error("{0}")]
    Zone(String),
    /// The DNSSEC keys cannot be used.
    #[error("dnssec: {0}")]
    Dnssec(DnssecError),
    /// The transfer settings (their TSIG key) cannot be used.
    #[error("transfer: {0}")]
    Transfer(KeyError),
    /// The reports' TSIG key cannot be used.
    #[error("reports: {0}")]
    Reports(KeyError),
    /// The ACME updates' TSIG key cannot be used.
    #[error("acme: {0}")]
    Acme(KeyError),
    /// `static_records` is not zone-file text the server can serve.
    #[error("static_records: {0}")]
    Statics(StaticsError),
    /// The GeoIP database cannot be read.
    #[error(transparent)]
    Geo(GeoDbError),
    /// A listen address cannot be served.
    #[error("{0}")]
    Listen(#[from] ListenError),
    /// The cookie secret cannot be read.
    #[error("{field}: {reason}")]
    Cookies {
        /// The field naming the file.
        field: String,
        /// Why.
        reason: String,
    },
}
