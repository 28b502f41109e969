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

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::gateway::{bind, serve, Behaviour};

/// Many loopback gateways on one port; gateway `i` is `first + i`.
pub struct SharedFarm {
    first: Ipv4Addr,
    port: u16,
    behaviours: Arc<Vec<AtomicU32>>,
    requests: Arc<AtomicU64>,
    accept: JoinHandle<()>,
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
        let accept = tokio::spawn(accept_loop(
            listener.0,
            first,
            behaviours.clone(),
            requests.clone(),
        ));
        Ok(SharedFarm {
            first,
            port,
            behaviours,
            requests,
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
