//! TCP connect through socket2, so the socket is configured before the SYN is sent.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::TcpStream;

use super::Failure;

/// Opens a non-blocking connection with SO_LINGER 0 (closing sends RST: no TIME_WAIT left
/// on either side per probe), and TCP_NODELAY only with `nodelay`.
///
/// Nagle's algorithm holds back a small segment only while earlier data is unacknowledged,
/// so a request written whole in one segment leaves at once without TCP_NODELAY, and a
/// plain HTTP probe saves that `setsockopt` (one of ~9 system calls per probe). A TLS
/// handshake writes again before its first flight is acknowledged, and a request longer
/// than a segment ends in a partial one: both would wait for the server's delayed ACK (up
/// to 40 ms), so those ask for `nodelay`.
///
/// Returns once the handshake has ended either way: a refused or unreachable connection also
/// wakes the socket as writable. Its error is not read here: the first write of an HTTP or
/// HTTPS probe returns it (the kernel reports a pending socket error on `send`), which saves
/// the `getsockopt(SO_ERROR)` those probes would pay on every success. A TCP check writes
/// nothing, so it asks [`handshake_error`]. With `source`, the connection leaves from that
/// local address (any port).
pub async fn connect(
    addr: SocketAddr,
    source: Option<IpAddr>,
    nodelay: bool,
) -> Result<TcpStream, Failure> {
    let io_err = |e: io::Error| Failure::from_io(&e);
    // SOCK_NONBLOCK at creation saves two fcntl calls per probe.
    let socket = Socket::new(
        Domain::for_address(addr),
        Type::STREAM.nonblocking(),
        Some(Protocol::TCP),
    )
    .map_err(io_err)?;
    if nodelay {
        socket.set_nodelay(true).map_err(io_err)?;
    }
    socket.set_linger(Some(Duration::ZERO)).map_err(io_err)?;
    if let Some(ip) = source {
        socket
            .bind(&SocketAddr::new(ip, 0).into())
            .map_err(io_err)?;
    }
    match socket.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(io_err(e)),
    }
    let stream = TcpStream::from_std(std::net::TcpStream::from(socket)).map_err(io_err)?;
    stream.writable().await.map_err(io_err)?;
    Ok(stream)
}

/// The handshake's outcome on a stream from [`connect`], for checks that send nothing.
pub fn handshake_error(stream: &TcpStream) -> Result<(), Failure> {
    match stream.take_error() {
        Ok(None) => Ok(()),
        Ok(Some(e)) | Err(e) => Err(Failure::from_io(&e)),
    }
}
