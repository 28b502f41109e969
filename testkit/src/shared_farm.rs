//! A farm of many gateways behind one listening socket, for farms larger than the
//! open-file limit allows with one listener each (100,000 endpoints with a limit of 20,000).
//!
//! The listener is bound to `0.0.0.0:PORT`, so connections to every loopback address on that
//! port reach it; connections from anything but loopback are closed at once, so nothing is
//! served beyond this machine. Each connection is answered by the behaviour of the address it
//! was made to (its local address). One difference from separate gateways: a listener cannot
//! refuse connections for some addresses only, so `Refuse` answers with a reset (the prober
//! sees `reset` instead of `refused`; detection times are the same path).

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::gateway::{bind, serve, Behaviour};

/// Many loopback gateways on one port; gateway `i` is `first + i`.
pub struct SharedFarm {
    first: Ipv4Addr,
    port: u16,
    behaviours: Arc<Vec<AtomicU32>>,
    requests: Arc<AtomicU64>,
    visits: Arc<Visits>,
    accept: JoinHandle<()>,
}

/// Per gateway: connections accepted, and the longest quiet stretch between two of them,
/// so a load test can tell how often each gateway was probed and whether any went unprobed
/// for longer than its interval (while probing moves between replicas, say).
struct Visits {
    epoch: Instant,
    /// Connections accepted.
    count: Vec<AtomicU32>,
    /// When the last one was accepted, in ms after `epoch` (0: none yet).
    last_ms: Vec<AtomicU64>,
    /// The longest gap between two connections since the last [`SharedFarm::reset_gaps`], ms.
    longest_gap_ms: Vec<AtomicU64>,
}

impl Visits {
    fn new(count: usize) -> Visits {
        let zeros = |n| (0..n).map(|_| AtomicU64::new(0)).collect();
        Visits {
            epoch: Instant::now(),
            count: (0..count).map(|_| AtomicU32::new(0)).collect(),
            last_ms: zeros(count),
            longest_gap_ms: zeros(count),
        }
    }

    fn visit(&self, slot: usize) {
        // At least 1 ms after the epoch, so 0 keeps meaning "never".
        let now = (self.epoch.elapsed().as_millis() as u64).max(1);
        self.count[slot].fetch_add(1, Ordering::Relaxed);
        let before = self.last_ms[slot].swap(now, Ordering::Relaxed);
        if before != 0 {
            self.longest_gap_ms[slot].fetch_max(now.saturating_sub(before), Ordering::Relaxed);
        }
    }
}

const HEALTHY: u32 = 0;
const RESET: u32 = 1;
const HANG: u32 = 2;
/// `STATUS + code`: answer with that HTTP status.
const STATUS: u32 = 1000;

fn encode(b: &Behaviour) -> u32 {
    match b {
        Behaviour::Healthy => HEALTHY,
        Behaviour::Refuse | Behaviour::Reset => RESET,
        Behaviour::Hang => HANG,
        Behaviour::Status(code) => STATUS + u32::from(*code),
    }
}

fn decode(v: u32) -> Behaviour {
    match v {
        HEALTHY => Behaviour::Healthy,
        RESET => Behaviour::Reset,
        HANG => Behaviour::Hang,
        code => Behaviour::Status(u16::try_from(code - STATUS).unwrap_or(500)),
    }
}

impl SharedFarm {
    /// Starts `count` healthy gateways at `first`, `first + 1`, ... on one free port. Must
    /// run in a tokio runtime.
    pub fn start(first: Ipv4Addr, count: usize) -> io::Result<SharedFarm> {
        let listener = bind(SocketAddr::from(([0, 0, 0, 0], 0)))?;
        let port = listener.local_addr()?.port();
        let behaviours: Arc<Vec<AtomicU32>> =
            Arc::new((0..count).map(|_| AtomicU32::new(HEALTHY)).collect());
        let requests = Arc::new(AtomicU64::new(0));
        let visits = Arc::new(Visits::new(count));
        let accept = tokio::spawn(accept_loop(
            listener.0,
            first,
            behaviours.clone(),
            requests.clone(),
            visits.clone(),
        ));
        Ok(SharedFarm {
            first,
            port,
            behaviours,
            requests,
            visits,
            accept,
        })
    }

    /// Gateway `i`'s address.
    pub fn addr(&self, i: usize) -> SocketAddr {
        let ip = Ipv4Addr::from(u32::from(self.first) + i as u32);
        SocketAddr::new(IpAddr::V4(ip), self.port)
    }

    /// Gateways in the farm.
    pub fn len(&self) -> usize {
        self.behaviours.len()
    }

    /// Whether the farm is empty.
    pub fn is_empty(&self) -> bool {
        self.behaviours.is_empty()
    }

    /// Switches gateway `i`'s behaviour (`Refuse` answers with a reset; see the module doc).
    pub fn set(&self, i: usize, behaviour: &Behaviour) {
        self.behaviours[i].store(encode(behaviour), Ordering::Relaxed);
    }

    /// HTTP requests answered so far, over all gateways.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Connections gateway `i` accepted so far (each probe is one).
    pub fn visits(&self, i: usize) -> u32 {
        self.visits.count[i].load(Ordering::Relaxed)
    }

    /// The longest time gateway `i` went without a connection since the last
    /// [`SharedFarm::reset_gaps`], counting the stretch still open now.
    pub fn longest_gap(&self, i: usize) -> std::time::Duration {
        let now = self.visits.epoch.elapsed().as_millis() as u64;
        let last = self.visits.last_ms[i].load(Ordering::Relaxed);
        let open = if last == 0 {
            0
        } else {
            now.saturating_sub(last)
        };
        let closed = self.visits.longest_gap_ms[i].load(Ordering::Relaxed);
        std::time::Duration::from_millis(closed.max(open))
    }

    /// Forgets the gaps seen so far: [`SharedFarm::longest_gap`] counts from here (from
    /// each gateway's last connection).
    pub fn reset_gaps(&self) {
        for gap in &self.visits.longest_gap_ms {
            gap.store(0, Ordering::Relaxed);
        }
    }
}

impl Drop for SharedFarm {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn accept_loop(
    listener: std::net::TcpListener,
    first: Ipv4Addr,
    behaviours: Arc<Vec<AtomicU32>>,
    requests: Arc<AtomicU64>,
    visits: Arc<Visits>,
) {
    let Ok(listener) = TcpListener::from_std(listener) else {
        return;
    };
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(conn) => conn,
            Err(_) => {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let local = stream.local_addr().ok();
        let slot = match (peer.ip().is_loopback(), local.map(|a| a.ip())) {
            (true, Some(IpAddr::V4(ip))) => (u32::from(ip))
                .checked_sub(u32::from(first))
                .map(|i| i as usize)
                .filter(|&i| i < behaviours.len()),
            _ => None,
        };
        let Some(slot) = slot else {
            continue; // not ours or not from loopback: dropped (closed)
        };
        visits.visit(slot);
        let behaviour = decode(behaviours[slot].load(Ordering::Relaxed));
        let requests = requests.clone();
        let all = behaviours.clone();
        let current = move || decode(all[slot].load(Ordering::Relaxed));
        tokio::spawn(async move {
            if behaviour == Behaviour::Reset {
                let _ = socket2::SockRef::from(&stream).set_linger(Some(std::time::Duration::ZERO));
                drop(stream);
                return;
            }
            serve(stream, behaviour, current, requests).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn probe(addr: SocketAddr) {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.0\r\n\r\n").await.unwrap();
        let mut answer = Vec::new();
        s.read_to_end(&mut answer).await.unwrap();
        assert!(answer.starts_with(b"HTTP/1."), "an HTTP answer");
    }

    async fn until(what: impl Fn() -> bool) {
        for _ in 0..500 {
            if what() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("not within 5 s");
    }

    /// Each gateway's probes are counted on its own, and the quiet stretch between two of
    /// them is kept until reset.
    #[tokio::test]
    async fn counts_each_gateways_probes_and_its_longest_gap() {
        let farm = SharedFarm::start(Ipv4Addr::new(127, 31, 250, 1), 2).unwrap();
        probe(farm.addr(0)).await;
        let gap = Duration::from_millis(60);
        tokio::time::sleep(gap).await;
        let before_second = std::time::Instant::now();
        probe(farm.addr(0)).await;
        until(|| farm.visits(0) == 2).await;
        assert_eq!(farm.visits(1), 0, "gateway 1 was never probed");
        assert!(farm.longest_gap(0) >= gap, "{:?}", farm.longest_gap(0));
        assert_eq!(
            farm.longest_gap(1),
            Duration::ZERO,
            "never probed: no gap yet"
        );
        farm.reset_gaps();
        let open = farm.longest_gap(0);
        assert!(
            open <= before_second.elapsed() + Duration::from_millis(1),
            "after a reset only the stretch since the last probe counts: {open:?}"
        );
    }
}
