//! `xdp = { interface = "eth0" }`: UDP queries taken from the network card's receive
//! queues before the kernel's IP and UDP layers, answered, and sent back the same way
//! (AF_XDP). A query then costs no socket buffer, route lookup or netfilter pass; the
//! ordinary sockets stay open and answer what the filter leaves to the kernel (TCP, IP
//! fragments, IPv4 options, IPv6 extension headers, VLAN-tagged frames) and anything sent
//! while the program is not attached.
//!
//! - [`program`]: the filter program and the `bpf(2)` calls that attach it.
//! - [`socket`]: one AF_XDP socket and its rings.
//! - [`frame`]: the Ethernet, IP and UDP headers around a query and its answer.

pub(super) mod error;
pub mod frame;
pub mod program;
pub mod socket;

pub use error::XdpError;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use tracing::{info, warn};

use super::error::ListenError;
use super::serve::{respond, Shared, Tally, STOP_POLL};
use crate::server::answer::Reply;
use crate::server::config::XdpConfig;
use crate::server::rate_limit::truncated;
use frame::Query;
use program::Filter;
use socket::Xsk;

/// Frames taken from the receive ring per pass, as `recvmmsg`'s batch.
const BATCH: u32 = 64;

/// The program attached to the interface; its serving threads (one per receive queue)
/// stop with the listener that started them, and the program is detached when this is
/// dropped.
pub struct XdpPath {
    _filter: Filter,
    /// The settings it was started with (a reload cannot move it).
    pub config: XdpConfig,
    /// The addresses its program matches.
    pub served: Vec<SocketAddr>,
}

impl XdpPath {
    /// Attaches to `config.interface` for the `served` addresses (the sink's `listen`)
    /// and starts one thread per receive queue, answering from `shared`'s authority.
    pub(super) fn start(
        config: &XdpConfig,
        served: &[SocketAddr],
        shared: &Arc<Shared>,
    ) -> Result<XdpPath, ListenError> {
        let interface = &config.interface;
        let failed = |source| ListenError::Xdp {
            interface: interface.clone(),
            source,
        };
        let ifindex = ifindex(interface).map_err(failed)?;
        let queues = receive_queues(interface);
        let mut filter = Filter::load(served, queues).map_err(failed)?;
        let mut sockets = Vec::new();
        for queue in 0..queues {
            let xsk = Xsk::open(ifindex, queue).map_err(|e| {
                failed(match e.raw_os_error() {
                    Some(libc::EBUSY) => XdpError::QueueBusy(queue),
                    _ => XdpError::Socket {
                        step: "open the AF_XDP socket",
                        queue,
                        source: e,
                    },
                })
            })?;
            filter.add_socket(queue, xsk.fd()).map_err(failed)?;
            sockets.push(xsk);
        }
        filter.attach(ifindex).map_err(failed)?;
        for (queue, xsk) in sockets.into_iter().enumerate() {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("dns-xdp-{queue}"))
                .spawn(move || serve(xsk, &shared))
                .map_err(ListenError::Thread)?;
        }
        info!(%interface, queues, "DNS server answering UDP through XDP");
        Ok(XdpPath {
            _filter: filter,
            config: config.clone(),
            served: served.to_vec(),
        })
    }
}

/// The interface's index, from sysfs.
fn ifindex(interface: &str) -> Result<u32, XdpError> {
    let path = format!("/sys/class/net/{interface}/ifindex");
    let refused = |reason: String| XdpError::Interface {
        path: path.clone(),
        reason,
    };
    let text = std::fs::read_to_string(&path).map_err(|e| refused(e.to_string()))?;
    text.trim().parse().map_err(|e| refused(format!("{e}")))
}

/// How many receive queues the interface has (each gets a socket; a queue without one
/// would pass its queries to the kernel).
fn receive_queues(interface: &str) -> u32 {
    let dir = format!("/sys/class/net/{interface}/queues");
    let n = std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
            .count()
    });
    u32::try_from(n).unwrap_or(1).max(1)
}

/// Answers one queue's frames until the listener stops.
fn serve(mut xsk: Xsk, shared: &Shared) {
    let mut tally = Tally::new(&shared.metrics);
    let mut answered: Vec<Reply> = Vec::with_capacity(BATCH as usize);
    while !shared.stop.load(Ordering::Relaxed) {
        let authority = shared.current();
        let arrived = Instant::now();
        let taken = xsk.serve(BATCH, |frame, len| {
            let query = Query::find(&frame[..len])?;
            let request = &frame[query.message.clone()];
            let reply = respond(&authority, &mut tally, request, query.client, arrived)?;
            // An answer too big for the frame goes truncated: the client asks over TCP.
            let n = query
                .answer_in(frame, &reply.bytes)
                .or_else(|| query.answer_in(frame, &truncated(&reply.bytes)));
            match n {
                Some(_) => answered.push(reply),
                None => warn!("a DNS answer does not fit an XDP frame even truncated"),
            }
            n
        });
        // Counted before they leave, so whoever holds an answer sees it counted.
        if !answered.is_empty() {
            shared.metrics.xdp_answers.inc_by(answered.len() as u64);
        }
        xsk.send();
        if taken == 0 {
            tally.flush();
            xsk.wait(STOP_POLL);
            continue;
        }
        let now = Instant::now();
        let took = now.duration_since(arrived).as_secs_f64();
        for reply in answered.drain(..) {
            tally.record(&reply, took);
        }
        tally.batch_done(now);
    }
}
