//! A TCP link the fault harness can cut or slow: a forwarder on a loopback address of its
//! own in front of one upstream (one process's way to a shared back end), which
//! - while cut behaves as a partition does: connections open at the cut stop carrying
//!   anything and close, new ones are accepted and then hear nothing (the client waits out
//!   its own timeout, as it would for packets dropped on the way), until the cut heals;
//! - while slowed holds every chunk for the delay before passing it on, both ways (a slow
//!   or congested path; a userspace stand-in for `tc netem delay`, which this kernel lacks);
//! - records when each HTTP write request (`PATCH`, `PUT`, `POST`, `DELETE`) reaches the
//!   upstream, so the harness knows which process wrote the shared back end when.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::harness::loopback_ip;

/// The state of a link: cut, and the delay of each chunk.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Condition {
    cut: bool,
    delay: Duration,
}

/// A running link.
pub struct Link {
    /// Where clients connect.
    pub addr: SocketAddr,
    condition: watch::Sender<Condition>,
    writes: Arc<Mutex<Vec<Instant>>>,
}

/// The methods of requests that change the upstream's state.
const WRITES: [&[u8]; 4] = [b"PATCH /", b"PUT /", b"POST /", b"DELETE /"];

impl Link {
    /// Forwards connections to `upstream` until dropped.
    pub async fn start(upstream: SocketAddr) -> Link {
        let listener = TcpListener::bind(SocketAddr::new(IpAddr::V4(loopback_ip()), 0))
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let (condition, watching) = watch::channel(Condition::default());
        let writes: Arc<Mutex<Vec<Instant>>> = Arc::default();
        let log = writes.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let mut cut = watching.clone();
                let (up, down) = (watching.clone(), watching.clone());
                let log = log.clone();
                tokio::spawn(async move {
                    if cut.borrow().cut {
                        // Heard nothing; closed once the cut heals (or the client leaves).
                        let _ = cut.wait_for(|c| !c.cut).await;
                        drop(client);
                        return;
                    }
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    tokio::select! {
                        _ = carry(client_read, server_write, up, Some(log)) => {}
                        _ = carry(server_read, client_write, down, None) => {}
                        _ = cut.wait_for(|c| c.cut) => {}
                    }
                });
            }
        });
        Link {
            addr,
            condition,
            writes,
        }
    }

    /// Cuts the link (`true`) or heals it.
    pub fn set_cut(&self, cut: bool) {
        self.condition.send_modify(|c| c.cut = cut);
    }

    /// Holds every chunk for `delay` (zero: passes them at once).
    pub fn set_delay(&self, delay: Duration) {
        self.condition.send_modify(|c| c.delay = delay);
    }

    /// When each write request reached the upstream.
    pub fn writes(&self) -> Vec<Instant> {
        self.writes.lock().unwrap().clone()
    }
}

/// Copies `from` to `to` chunk by chunk, each held for the link's delay as it was when the
/// chunk arrived; with `log`, notes each write request as it is passed on. A request line
/// split across two chunks would be missed: the harness's clients send a request's head in
/// one write, far below a chunk's 16 KiB.
async fn carry(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    condition: watch::Receiver<Condition>,
    log: Option<Arc<Mutex<Vec<Instant>>>>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let delay = condition.borrow().delay;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
        if let Some(log) = &log {
            let chunk = &buf[..n];
            let requests = WRITES
                .iter()
                .map(|m| chunk.windows(m.len()).filter(|w| w == m).count())
                .sum::<usize>();
            let now = Instant::now();
            log.lock().unwrap().extend((0..requests).map(|_| now));
        }
    }
}
