//! Why the DNS server cannot answer on an address.

use std::net::SocketAddr;

use super::xdp::error::XdpError;

/// Why the server cannot answer on an address.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// Another DNS server sink of this process answers there.
    #[error("{addr} is already answered by sinks.{owner}")]
    Taken {
        /// The address.
        addr: SocketAddr,
        /// The sink answering there.
        owner: String,
    },
    /// The system refused the socket (in use, not permitted, no such address).
    #[error("cannot listen on {addr} ({transport}): {source}")]
    Socket {
        /// The address.
        addr: SocketAddr,
        /// `UDP` or `TCP`.
        transport: &'static str,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// A serving thread could not be started.
    #[error("cannot start a DNS thread: {0}")]
    Thread(#[source] std::io::Error),
    /// The XDP path asked for could not be set up.
    #[error("xdp on {interface}: {source}")]
    Xdp {
        /// The interface.
        interface: String,
        /// Why.
        #[source]
        source: XdpError,
    },
}

impl ListenError {
    /// The system refused the `transport` socket on `addr`.
    pub(super) fn socket(
        addr: SocketAddr,
        transport: &'static str,
    ) -> impl Fn(std::io::Error) -> ListenError + Copy {
        move |source| ListenError::Socket {
            addr,
            transport,
            source,
        }
    }
}
