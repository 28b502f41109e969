//! The sockets of the embedded server: UDP and TCP on one address, answered by dedicated
//! threads so queries never wait behind probes or sink writes.
//!
//! A listener outlives a reload that rebuilds its sink: the new sink takes the running
//! listener of the same address (a process-wide registry keyed by address) and points it
//! at its authority, so the socket is never closed and a query is never unanswered. The
//! listener stops when the last sink holding it goes.

use std::collections::{BTreeMap, HashMap};
use std::io::{IoSlice, IoSliceMut};
use std::net::{IpAddr, SocketAddr, TcpListener, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::socket::{recvmmsg, sendmmsg, MsgFlags, MultiHeaders, SockaddrStorage};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tracing::{debug, info, warn};

use super::error::ListenError;
use super::serve::{respond, Shared, Tally, STOP_POLL};
use super::xdp::XdpPath;
use crate::server::answer::{Authority, Reply, Transfer};
use crate::server::config::XdpConfig;
use crate::server::metrics::ServerMetrics;

/// TCP connections served at once; more wait in the kernel's accept queue.
const MAX_TCP_CONNECTIONS: usize = 256;
/// TCP connections one client address may hold at once; more are closed as they are
/// accepted, so one client cannot take every slot (or hold them idle until `TCP_IDLE`).
const MAX_TCP_PER_CLIENT: usize = 16;
/// A TCP connection with no query for this long is closed (RFC 7766 suggests seconds).
const TCP_IDLE: Duration = Duration::from_secs(10);
/// How long a zone transfer asked while the zone is not ready waits for it.
const TRANSFER_WAIT: Duration = Duration::from_secs(10);
/// How often such a transfer is tried again.
const TRANSFER_POLL: Duration = Duration::from_millis(50);

/// Running listeners by address, with the sink that owns each.
static RUNNING: Mutex<BTreeMap<SocketAddr, (String, Weak<Listener>)>> = Mutex::new(BTreeMap::new());

/// One address answered over UDP and TCP; stops when dropped.
pub struct Listener {
    addr: SocketAddr,
    shared: Arc<Shared>,
    /// UDP queries taken through XDP, when the sink has `xdp` (held by the listener of
    /// its first address).
    xdp: Option<XdpPath>,
}

impl Listener {
    /// The running listener of `addr` re-pointed at `authority` if sink `sink` already has
    /// one (a reload), else a new one bound now. An address another sink answers on is an
    /// error, as is one the system refuses.
    ///
    /// `xdp` (the settings and every address of the sink) also takes UDP queries to those
    /// addresses through XDP; a reload keeps the XDP path it started with.
    pub fn open(
        sink: &str,
        addr: SocketAddr,
        authority: Arc<Authority>,
        metrics: &ServerMetrics,
        xdp: Option<(&XdpConfig, &[SocketAddr])>,
    ) -> Result<Arc<Listener>, ListenError> {
        let mut running = RUNNING.lock().expect("not poisoned");
        if let Some((owner, weak)) = running.get(&addr) {
            if let Some(listener) = weak.upgrade() {
                if owner != sink {
                    let owner = owner.clone();
                    return Err(ListenError::Taken { addr, owner });
                }
                let started = listener.xdp.as_ref().map(|x| (&x.config, &x.served[..]));
                if started != xdp {
                    warn!(
                        sink,
                        "sinks.{sink}.xdp or its listen addresses changed: XDP keeps what it \
                         started with until the next start"
                    );
                }
                *listener.shared.authority.write().expect("not poisoned") = authority;
                return Ok(listener);
            }
        }
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(1, 4));
        let udp = udp_sockets(addr, threads)?;
        let refused = ListenError::socket(addr, "TCP");
        let tcp = TcpListener::bind(addr).map_err(refused)?;
        tcp.set_nonblocking(true).map_err(refused)?;
        let (stop_tcp, stopped) = tokio::sync::watch::channel(false);
        let shared = Arc::new(Shared {
            authority: RwLock::new(authority),
            stop: AtomicBool::new(false),
            stop_tcp,
            metrics: metrics.clone(),
        });
        let xdp = match start_serving(&shared, udp, tcp, stopped, xdp) {
            Ok(xdp) => xdp,
            Err(e) => {
                // Whatever started stops: every serving thread watches these.
                shared.stop.store(true, Ordering::Relaxed);
                let _ = shared.stop_tcp.send(true);
                return Err(e);
            }
        };
        info!(%addr, "DNS server listening (UDP and TCP)");
        let listener = Arc::new(Listener { addr, shared, xdp });
        running.insert(addr, (sink.to_owned(), Arc::downgrade(&listener)));
        Ok(listener)
    }

    /// The authority it answers from now.
    pub fn authority(&self) -> Arc<Authority> {
        self.shared.authority.read().expect("not poisoned").clone()
    }

    /// The running listener of `addr` owned by `sink`, if any.
    pub fn running(sink: &str, addr: SocketAddr) -> Option<Arc<Listener>> {
        let running = RUNNING.lock().expect("not poisoned");
        let (owner, weak) = running.get(&addr)?;
        (owner == sink).then(|| weak.upgrade()).flatten()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        let _ = self.shared.stop_tcp.send(true);
        let mut running = RUNNING.lock().expect("not poisoned");
        if running
            .get(&self.addr)
            .is_some_and(|(_, w)| w.strong_count() == 0)
        {
            running.remove(&self.addr);
        }
        info!(addr = %self.addr, "DNS server stopped listening");
    }
}

/// Starts the XDP path (when asked) and the threads serving `udp` and `tcp`.
fn start_serving(
    shared: &Arc<Shared>,
    udp: Vec<UdpSocket>,
    tcp: TcpListener,
    stopped: tokio::sync::watch::Receiver<bool>,
    xdp: Option<(&XdpConfig, &[SocketAddr])>,
) -> Result<Option<XdpPath>, ListenError> {
    let xdp = xdp
        .map(|(config, served)| XdpPath::start(config, served, shared))
        .transpose()?;
    let failed = ListenError::Thread;
    for (i, socket) in udp.into_iter().enumerate() {
        let shared = shared.clone();
        std::thread::Builder::new()
            .name(format!("dns-udp-{i}"))
            .spawn(move || serve_udp(&socket, &shared))
            .map_err(failed)?;
    }
    let shared = shared.clone();
    std::thread::Builder::new()
        .name("dns-tcp".into())
        .spawn(move || serve_tcp(tcp, shared, stopped))
        .map_err(failed)?;
    Ok(xdp)
}

/// `n` UDP sockets on `addr`, one per serving thread (`SO_REUSEPORT`: the kernel spreads
/// clients over them by flow, so no two threads wait on one socket: measured, two threads
/// sharing one socket spent ~25 % more CPU per query, waking for each other's packets).
/// The address is first bound without `SO_REUSEPORT`: if any other socket holds it (an
/// old orchestrator left running would otherwise answer half the queries from stale data,
/// silently), this fails as a plain bind does.
fn udp_sockets(addr: SocketAddr, n: usize) -> Result<Vec<UdpSocket>, ListenError> {
    let failed = ListenError::socket(addr, "UDP");
    let probe = UdpSocket::bind(addr).map_err(failed)?;
    // Port 0: every socket takes the port the system gave the first bind.
    let bound = probe.local_addr().map_err(failed)?;
    drop(probe);
    (0..n)
        .map(|_| {
            let socket = socket2::Socket::new(
                socket2::Domain::for_address(bound),
                socket2::Type::DGRAM,
                Some(socket2::Protocol::UDP),
            )
            .map_err(failed)?;
            socket.set_reuse_port(true).map_err(failed)?;
            socket.bind(&bound.into()).map_err(failed)?;
            let socket = UdpSocket::from(socket);
            socket.set_read_timeout(Some(STOP_POLL)).map_err(failed)?;
            Ok(socket)
        })
        .collect()
}

/// Queries taken from the socket (and answers sent) per system call at most.
const UDP_BATCH: usize = 32;

/// Serves UDP in batches: `recvmmsg` takes every query waiting (at least one), they are
/// answered, and `sendmmsg` sends the answers together. Under load that is one receive and
/// one send call for up to [`UDP_BATCH`] queries instead of two calls per query.
fn serve_udp(socket: &UdpSocket, shared: &Shared) {
    let fd = socket.as_raw_fd();
    let mut bufs = vec![[0u8; 4096]; UDP_BATCH];
    let mut received: Vec<(usize, SocketAddr)> = Vec::with_capacity(UDP_BATCH);
    let mut replies: Vec<(Reply, SocketAddr)> = Vec::with_capacity(UDP_BATCH);
    let mut recv_headers = MultiHeaders::<SockaddrStorage>::preallocate(UDP_BATCH, None);
    let mut send_headers = MultiHeaders::<SockaddrStorage>::preallocate(UDP_BATCH, None);
    let mut tally = Tally::new(&shared.metrics);
    while !shared.stop.load(Ordering::Relaxed) {
        received.clear();
        {
            let mut slices: Vec<[IoSliceMut<'_>; 1]> =
                bufs.iter_mut().map(|b| [IoSliceMut::new(b)]).collect();
            match recvmmsg(
                fd,
                &mut recv_headers,
                slices.iter_mut(),
                MsgFlags::MSG_WAITFORONE,
                None,
            ) {
                Ok(results) => received.extend(results.filter_map(|r| {
                    let peer = r.address.and_then(|a| socket_addr(&a))?;
                    Some((r.bytes, peer))
                })),
                Err(Errno::EAGAIN | Errno::EINTR) => {
                    tally.flush();
                    continue;
                }
                // ICMP errors of earlier sends surface here; they concern that client only.
                Err(e) => {
                    debug!(error = %e, "DNS UDP receive failed");
                    continue;
                }
            }
        }
        let arrived = Instant::now();
        replies.clear();
        let authority = shared.current();
        for (i, &(n, peer)) in received.iter().enumerate() {
            if let Some(reply) = respond(&authority, &mut tally, &bufs[i][..n], peer.ip(), arrived)
            {
                replies.push((reply, peer));
            }
        }
        send_all(fd, &mut send_headers, &replies);
        let now = Instant::now();
        let took = now.duration_since(arrived).as_secs_f64();
        for (reply, _) in &replies {
            tally.record(reply, took);
        }
        tally.batch_done(now);
    }
}

/// Sends every reply, in one `sendmmsg` when it takes them all.
fn send_all(
    fd: RawFd,
    headers: &mut MultiHeaders<SockaddrStorage>,
    replies: &[(Reply, SocketAddr)],
) {
    if replies.is_empty() {
        return;
    }
    let slices: Vec<[IoSlice<'_>; 1]> = replies
        .iter()
        .map(|(r, _)| [IoSlice::new(&r.bytes)])
        .collect();
    let addrs: Vec<Option<SockaddrStorage>> = replies
        .iter()
        .map(|(_, peer)| Some(SockaddrStorage::from(*peer)))
        .collect();
    let sent =
        sendmmsg(fd, headers, &slices, &addrs, [], MsgFlags::empty()).map_or(0, Iterator::count);
    // A send that failed (a client's ICMP error, a full buffer) stops the batch there:
    // the rest go one by one, each failure only that client's.
    for (reply, peer) in &replies[sent..] {
        let storage = SockaddrStorage::from(*peer);
        if let Err(e) = nix::sys::socket::sendto(fd, &reply.bytes, &storage, MsgFlags::empty()) {
            debug!(%peer, error = %e, "DNS answer not sent");
        }
    }
}

fn socket_addr(a: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = a.as_sockaddr_in() {
        return Some(SocketAddr::V4((*v4).into()));
    }
    a.as_sockaddr_in6().map(|v6| SocketAddr::V6((*v6).into()))
}

fn serve_tcp(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "DNS over TCP not served: cannot start its runtime");
            return;
        }
    };
    runtime.block_on(async move {
        let listener = match tokio::net::TcpListener::from_std(listener) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "DNS over TCP not served");
                return;
            }
        };
        let slots = Arc::new(tokio::sync::Semaphore::new(MAX_TCP_CONNECTIONS));
        let clients = Arc::new(PerClient::default());
        loop {
            tokio::select! {
                _ = stopped.changed() => return,
                accepted = listener.accept() => {
                    let Ok((stream, peer)) = accepted else { continue };
                    let Some(client) = clients.enter(peer.ip()) else { continue };
                    let Ok(slot) = slots.clone().acquire_owned().await else { return };
                    let shared = shared.clone();
                    tokio::spawn(async move {
                        let _slots = (slot, client);
                        serve_connection(stream, peer, &shared).await;
                    });
                }
            }
        }
    });
}

/// Open TCP connections per client address.
#[derive(Default)]
struct PerClient(Mutex<HashMap<IpAddr, usize>>);

/// One of a client's connections; counted until dropped.
struct ClientSlot {
    clients: Arc<PerClient>,
    ip: IpAddr,
}

impl PerClient {
    /// A slot for one more connection of `ip`, or `None` at [`MAX_TCP_PER_CLIENT`].
    fn enter(self: &Arc<Self>, ip: IpAddr) -> Option<ClientSlot> {
        let mut open = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let count = open.entry(ip).or_default();
        if *count >= MAX_TCP_PER_CLIENT {
            debug!(%ip, "DNS over TCP: connection closed, the client holds the most it may");
            return None;
        }
        *count += 1;
        Some(ClientSlot {
            clients: self.clone(),
            ip,
        })
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut open = self.clients.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = open.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// The messages of `transfer`; while the zone is not ready (a name awaits its first
/// snapshot, as at start-up), `request` is asked again every [`TRANSFER_POLL`] for up to
/// [`TRANSFER_WAIT`], so a secondary asking then gets the zone once it is there rather
/// than a failure it would retry only after the SOA's `retry` (minutes).
async fn transfer_when_ready(
    shared: &Shared,
    request: &[u8],
    client: IpAddr,
    mut transfer: Transfer,
) -> Vec<Vec<u8>> {
    let deadline = tokio::time::Instant::now() + TRANSFER_WAIT;
    loop {
        match transfer {
            Transfer::Answer(messages) => return messages,
            Transfer::NotReady(messages) if tokio::time::Instant::now() >= deadline => {
                return messages
            }
            Transfer::NotReady(messages) => {
                tokio::time::sleep(TRANSFER_POLL).await;
                transfer = shared
                    .current()
                    .transfer(request, client)
                    .unwrap_or(Transfer::Answer(messages));
            }
        }
    }
}

/// Writes each message with its two-byte length.
async fn write_framed(
    stream: &mut tokio::net::TcpStream,
    messages: &[Vec<u8>],
) -> std::io::Result<()> {
    for m in messages {
        let len = u16::try_from(m.len()).map_err(|_| std::io::ErrorKind::InvalidData)?;
        stream.write_all(&len.to_be_bytes()).await?;
        stream.write_all(m).await?;
    }
    Ok(())
}

/// Queries on one TCP connection, each prefixed by its two-byte length (RFC 1035 4.2.2),
/// answered in order until the client closes or idles.
async fn serve_connection(mut stream: tokio::net::TcpStream, peer: SocketAddr, shared: &Shared) {
    let mut buf = vec![0u8; 65535];
    let mut tally = Tally::new(&shared.metrics);
    loop {
        let Ok(Ok(len)) = tokio::time::timeout(TCP_IDLE, stream.read_u16()).await else {
            return;
        };
        let request = &mut buf[..usize::from(len)];
        if stream.read_exact(request).await.is_err() {
            return;
        }
        let arrived = Instant::now();
        let authority = shared.current();
        if let Some(transfer) = authority.transfer(request, peer.ip()) {
            let messages = transfer_when_ready(shared, request, peer.ip(), transfer).await;
            if write_framed(&mut stream, &messages).await.is_err() {
                return;
            }
            continue;
        }
        let Some(reply) = authority.answer(request, peer.ip(), false) else {
            return;
        };
        let Ok(len) = u16::try_from(reply.bytes.len()) else {
            return;
        };
        let mut framed = Vec::with_capacity(reply.bytes.len() + 2);
        framed.extend_from_slice(&len.to_be_bytes());
        framed.extend_from_slice(&reply.bytes);
        if stream.write_all(&framed).await.is_err() {
            return;
        }
        tally.record(&reply, arrived.elapsed().as_secs_f64());
        tally.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_thread_gets_a_socket_on_one_port_and_a_held_address_is_refused() {
        let sockets = udp_sockets("127.0.0.1:0".parse().unwrap(), 2).unwrap();
        let ports: Vec<u16> = sockets
            .iter()
            .map(|s| s.local_addr().unwrap().port())
            .collect();
        assert_eq!(ports[0], ports[1], "port 0: both on the port the first got");
        let held = UdpSocket::bind("127.0.0.1:0").unwrap();
        let err = udp_sockets(held.local_addr().unwrap(), 2).unwrap_err();
        assert!(err.to_string().contains("cannot listen on"), "{err}");
        let ours = sockets[0].local_addr().unwrap();
        assert!(
            udp_sockets(ours, 1).is_err(),
            "another listener's sockets hold it too"
        );
    }
}
