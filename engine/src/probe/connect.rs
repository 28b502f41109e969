//! TCP connect through socket2, so the socket is configured before the SYN is sent.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::TcpStream;

use super::Failure;

/// How a probe's socket is set up before its SYN leaves.
#[derive(Clone, Copy, Debug, Default)]
pub struct SocketSetup {
    /// TCP_NODELAY. Nagle's algorithm holds back a small segment only while earlier data is
    /// unacknowledged, so a request written whole in one segment leaves at once without it,
    /// and a plain HTTP probe saves that `setsockopt` (one of ~9 system calls per probe). A
    /// TLS handshake writes again before its first flight is acknowledged, and a request
    /// longer than a segment ends in a partial one: both would wait for the server's delayed
    /// ACK (up to 40 ms), so those set it.
    pub nodelay: bool,
    /// The probe writes as soon as the handshake ends (an HTTP request, a TLS ClientHello):
    /// TCP_QUICKACK is turned off, so the handshake's last ACK rides on that first write
    /// instead of being a segment of its own, as HAProxy does for its checks. Measured at
    /// 2,000 endpoints: 8 -> 6 segments per probe, and the gateway is woken once (accept and
    /// request together) instead of twice: its CPU per probe fell ~22 % (bench/README.md).
    /// A TCP check writes nothing, so it keeps the immediate ACK: that ACK is what puts the
    /// connection in the gateway's accept queue, the thing a TCP check is there to prove.
    pub ack_with_first_write: bool,
}

/// Opens a non-blocking connection with SO_LINGER 0 (closing sends RST: no TIME_WAIT left
/// on either side per probe), set up as `setup` says.
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
    setup: SocketSetup,
) -> Result<TcpStream, Failure> {
    let io_err = |e: io::Error| Failure::from_io(&e);
    // SOCK_NONBLOCK at creation saves two fcntl calls per probe.
    let socket = Socket::new(
        Domain::for_address(addr),
        Type::STREAM.nonblocking(),
        Some(Protocol::TCP),
    )
    .map_err(io_err)?;
    if setup.nodelay {
        socket.set_nodelay(true).map_err(io_err)?;
    }
    if setup.ack_with_first_write {
        socket.set_quickack(false).map_err(io_err)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// The gateway sees a probe's connection only once its handshake's last ACK arrives.
    /// With `ack_with_first_write` that ACK waits for the request (the kernel holds it up to
    /// 200 ms), so right after the handshake nothing can be accepted yet; without it (a TCP
    /// check) the connection is already in the accept queue. Real loopback sockets.
    #[tokio::test]
    async fn the_last_handshake_ack_rides_on_the_first_write_only_when_asked() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let would_block =
            |r: io::Result<_>| matches!(r, Err(e) if e.kind() == io::ErrorKind::WouldBlock);

        let tcp_check = connect(addr, None, SocketSetup::default()).await.unwrap();
        handshake_error(&tcp_check).unwrap();
        assert!(
            listener.accept().is_ok(),
            "a TCP check completes the handshake"
        );

        let setup = SocketSetup {
            nodelay: false,
            ack_with_first_write: true,
        };
        let probe = connect(addr, None, setup).await.unwrap();
        assert!(
            would_block(listener.accept()),
            "the last ACK was sent alone"
        );
        probe.try_write(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        listener.set_nonblocking(false).unwrap();
        let (mut gateway, _) = listener.accept().unwrap();
        let mut got = [0u8; 32];
        let n = std::io::Read::read(&mut gateway, &mut got).unwrap();
        assert_eq!(&got[..n], b"GET / HTTP/1.1\r\n\r\n");
    }
}
