//! TCP connect through socket2, so the socket is configured before the SYN is sent.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::TcpStream;

use super::Failure;

/// Opens a non-blocking connection with TCP_NODELAY (the request goes out at once) and
/// SO_LINGER 0 (closing sends RST: no TIME_WAIT left on either side per probe).
pub async fn connect(addr: SocketAddr) -> Result<TcpStream, Failure> {
    let io_err = |e: io::Error| Failure::from_io(&e);
    // SOCK_NONBLOCK at creation saves two fcntl calls per probe.
    let socket = Socket::new(
        Domain::for_address(addr),
        Type::STREAM.nonblocking(),
        Some(Protocol::TCP),
    )
    .map_err(io_err)?;
    socket.set_nodelay(true).map_err(io_err)?;
    socket.set_linger(Some(Duration::ZERO)).map_err(io_err)?;
    match socket.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(io_err(e)),
    }
    let stream = TcpStream::from_std(std::net::TcpStream::from(socket)).map_err(io_err)?;
    stream.writable().await.map_err(io_err)?;
    if let Some(e) = stream.take_error().map_err(io_err)? {
        return Err(io_err(e));
    }
    Ok(stream)
}
