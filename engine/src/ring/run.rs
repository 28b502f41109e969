//! `[ring]` at work: the task that follows the Leases' listings ([`Sighting`]s, from the
//! binary's Kubernetes side), opens and closes the probers' gates, tells the tracker which
//! targets it probes and which members left, pushes this replica's verdicts to every other
//! member and takes theirs.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::Addr;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{info, warn};

use super::combine::Vantage;
use super::members::{Members, Sighting};
use super::ownership::{Moves, Ownership};
use super::stream::{self, Batch, Challenge, Hello, StreamError};
use crate::events::{Event, Events};
use crate::hysteresis::Health;
use crate::metrics::Metrics;
use crate::secret::Secret;
use crate::status::{MemberStatus, RingStatus};
use crate::tracker::{HealthTracker, MemberLeft, OwnVerdicts, Part, PeerVerdicts, Probing};

/// Pause between attempts to reach a member that does not answer.
const RECONNECT: Duration = Duration::from_millis(500);

/// What the ring runs with.
pub struct RingParts {
    pub ring: String,
    pub identity: String,
    pub secret: Secret,
    pub lease_duration: Duration,
    /// How often the Leases are renewed and listed.
    pub renew_period: Duration,
    pub ownership: Arc<Ownership>,
    /// This replica's own verdict changes, from the tracker.
    pub shares: mpsc::UnboundedReceiver<(String, Health)>,
    pub listener: TcpListener,
}

/// What goes to every pusher: changes, or the word to send the whole state again.
#[derive(Clone)]
enum Out {
    Changes(Arc<Batch>),
    Whole,
}

/// Where the binary hands the ring's Lease listings, and where `/status` reads the ring.
#[derive(Clone)]
pub struct RingHandle {
    pub sightings: mpsc::Sender<Vec<Sighting>>,
    pub status: Arc<Mutex<RingStatus>>,
}

/// Starts the ring: the stream listener and the task following the Leases.
pub fn start(
    parts: RingParts,
    tracker: Addr<HealthTracker>,
    events: &Events,
    metrics: Arc<Metrics>,
) -> RingHandle {
    let (sightings, listings) = mpsc::channel(4);
    let status = Arc::new(Mutex::new(RingStatus {
        identity: parts.identity.clone(),
        ..RingStatus::default()
    }));
    let (changes, _) = broadcast::channel(4096);
    let secret: Arc<[u8]> = Arc::from(parts.secret.expose().as_bytes());
    tokio::spawn(take_streams(
        parts.listener,
        parts.ring.clone(),
        secret.clone(),
        tracker.clone(),
        metrics.clone(),
    ));
    let runner = Runner {
        members: Members::new(
            parts.identity.clone(),
            parts.lease_duration,
            parts.renew_period,
        ),
        ring: parts.ring,
        secret,
        ownership: parts.ownership,
        tracker,
        impaired: Arc::new(AtomicBool::new(false)),
        changes,
        pushers: BTreeMap::new(),
        live: HashSet::new(),
        status: status.clone(),
        metrics,
    };
    tokio::spawn(runner.run(listings, parts.shares, events.follow()));
    RingHandle { sightings, status }
}

struct Runner {
    members: Members,
    ring: String,
    secret: Arc<[u8]>,
    ownership: Arc<Ownership>,
    tracker: Addr<HealthTracker>,
    /// Whether the self-check judges this replica's network impaired: every batch says so.
    /// Its own verdicts are the tracker's ([`OwnVerdicts`]), not copied here.
    impaired: Arc<AtomicBool>,
    changes: broadcast::Sender<Out>,
    /// One pushing task per other live member with an address, by identity.
    pushers: BTreeMap<String, (String, JoinHandle<()>)>,
    live: HashSet<String>,
    status: Arc<Mutex<RingStatus>>,
    metrics: Arc<Metrics>,
}

impl Runner {
    async fn run(
        mut self,
        mut listings: mpsc::Receiver<Vec<Sighting>>,
        mut shares: mpsc::UnboundedReceiver<(String, Health)>,
        mut events: mpsc::UnboundedReceiver<Arc<Event>>,
    ) {
        loop {
            let expiry = self.ownership.next_expiry();
            let lapse = self.members.next_lapse();
            tokio::select! {
                listing = listings.recv() => match listing {
                    Some(sightings) => {
                        self.members.listed(sightings, Instant::now());
                        self.judge();
                    }
                    None => break,
                },
                _ = tokio::time::sleep_until(lapse.unwrap_or_else(Instant::now)), if lapse.is_some() => self.judge(),
                Some((key, health)) = shares.recv() => self.share(vec![(key, health)], &mut shares),
                Some(event) = events.recv() => {
                    if let Event::Impaired { impaired, .. } = *event {
                        self.impaired(impaired);
                    }
                }
                _ = tokio::time::sleep_until(expiry.unwrap_or_else(Instant::now)), if expiry.is_some() => {
                    let moves = self.ownership.expire(Instant::now());
                    if self.moved(moves) {
                        self.publish_status();
                    }
                }
            }
        }
        for (_, (_, task)) in std::mem::take(&mut self.pushers) {
            task.abort();
        }
    }

    /// The ring as the Leases say now (after a listing, or when a member lapses).
    fn judge(&mut self) {
        let now = Instant::now();
        let live = self.members.live(now);
        let moves = self.ownership.ring(live.clone(), now);
        let identities: HashSet<String> = live.iter().map(|m| m.identity.clone()).collect();
        for gone in self.live.difference(&identities) {
            info!(member = %gone, "ring: member left; its targets go to their next owners");
            self.tracker.do_send(MemberLeft(gone.clone()));
        }
        for joined in identities.difference(&self.live) {
            if joined != self.members.me() {
                info!(member = %joined, "ring: member joined");
            }
        }
        self.live = identities;
        self.pushers.retain(|identity, (peer, task)| {
            let keep = live
                .iter()
                .any(|m| &m.identity == identity && m.peer.as_ref() == Some(peer));
            if !keep {
                task.abort();
            }
            keep
        });
        for member in live.iter().filter(|m| m.identity != self.members.me()) {
            let Some(peer) = &member.peer else {
                continue;
            };
            if !self.pushers.contains_key(&member.identity) {
                let task = tokio::spawn(push(
                    peer.clone(),
                    self.hello_parts(),
                    (self.tracker.clone(), self.impaired.clone()),
                    self.changes.clone(),
                    self.metrics.clone(),
                ));
                self.pushers
                    .insert(member.identity.clone(), (peer.clone(), task));
            }
        }
        self.moved(moves);
        self.publish_status();
    }

    fn hello_parts(&self) -> (String, String, Arc<[u8]>) {
        (
            self.ring.clone(),
            self.members.me().to_owned(),
            self.secret.clone(),
        )
    }

    /// Gates opened and closed: the tracker counts this replica's verdicts of them or
    /// forgets them (and tells the others). Whether any moved.
    fn moved(&mut self, moves: Moves) -> bool {
        let moved = moves.opened.len() + moves.closed.len();
        if moved == 0 {
            return false;
        }
        self.metrics.ring.moves.inc_by(moved as u64);
        if !moves.opened.is_empty() {
            self.tracker.do_send(Probing {
                hashes: moves.opened,
                on: true,
            });
        }
        if !moves.closed.is_empty() {
            self.tracker.do_send(Probing {
                hashes: moves.closed,
                on: false,
            });
        }
        true
    }

    /// This replica's own verdict changes (and any others already queued): pushed to every
    /// member as one batch.
    fn share(
        &mut self,
        mut batch: Vec<(String, Health)>,
        more: &mut mpsc::UnboundedReceiver<(String, Health)>,
    ) {
        while let Ok(next) = more.try_recv() {
            batch.push(next);
        }
        let frame = Batch {
            full: false,
            impaired: self.impaired.load(Ordering::Acquire),
            made_us: stream::stamp(),
            more: false,
            verdicts: batch
                .into_iter()
                .map(|(k, h)| (k, stream::letter(h)))
                .collect(),
        };
        let _ = self.changes.send(Out::Changes(Arc::new(frame)));
    }

    /// The self-check changed its mind: every member gets the whole state again, flagged
    /// (each pusher takes it from the tracker and sends it in pieces).
    fn impaired(&mut self, impaired: bool) {
        self.impaired.store(impaired, Ordering::Release);
        let _ = self.changes.send(Out::Whole);
    }

    fn publish_status(&self) {
        let leases: BTreeMap<String, Option<Duration>> =
            self.members.leases().into_iter().collect();
        let members = self
            .ownership
            .members()
            .into_iter()
            .map(|(m, owns)| MemberStatus {
                lease_age_seconds: leases
                    .get(&m.identity)
                    .copied()
                    .flatten()
                    .map(|d| d.as_secs_f64()),
                identity: m.identity,
                peer: m.peer,
                owns,
            })
            .collect::<Vec<_>>();
        let probing = self.ownership.probing_count();
        self.metrics.ring.members.set(members.len() as i64);
        self.metrics.ring.probing.set(probing as i64);
        let mut status = self.status.lock().expect("not poisoned");
        status.members = members;
        status.probing = probing;
    }
}

/// This replica's own verdicts (the tracker's) and whether its network is impaired.
type Own = (Addr<HealthTracker>, Arc<AtomicBool>);

/// Pushes this replica's verdicts to one member until aborted: the whole state on each
/// connection, then every change; reconnects when the member goes away or this side falls
/// behind.
async fn push(
    peer: String,
    hello: (String, String, Arc<[u8]>),
    own: Own,
    changes: broadcast::Sender<Out>,
    metrics: Arc<Metrics>,
) {
    let mut logged = false;
    loop {
        let mut updates = changes.subscribe();
        let pushed = push_once(&peer, &hello, &own, &mut updates, &metrics).await;
        // Not subscribed while away: what it missed comes with the next whole state.
        drop(updates);
        match pushed {
            Ok(()) => {}
            Err(e) if !logged => {
                warn!(%peer, "ring: cannot push verdicts to the member (retrying every {RECONNECT:?}): {e}");
                logged = true;
            }
            Err(_) => {}
        }
        tokio::time::sleep(RECONNECT).await;
    }
}

async fn push_once(
    peer: &str,
    (ring, identity, secret): &(String, String, Arc<[u8]>),
    own: &Own,
    updates: &mut broadcast::Receiver<Out>,
    metrics: &Metrics,
) -> Result<(), StreamError> {
    let mut socket = TcpStream::connect(peer).await?;
    socket.set_nodelay(true)?;
    let challenge: Challenge =
        tokio::time::timeout(stream::HANDSHAKE_TIMEOUT, stream::read_frame(&mut socket))
            .await
            .map_err(|_| StreamError::Slow(stream::HANDSHAKE_TIMEOUT))??;
    let mac = stream::prove(secret, ring, identity, &challenge.nonce);
    let hello = Hello {
        ring: ring.clone(),
        identity: identity.clone(),
        mac,
    };
    stream::write_frame(&mut socket, &hello).await?;
    let piece = if challenge.pieces {
        stream::PIECE
    } else {
        usize::MAX
    };
    // Taken after subscribing: every change the state does not hold is in `updates`.
    let sent = push_whole(&mut socket, own, piece).await?;
    metrics.ring.stream_bytes.inc_by(sent as u64);
    loop {
        let sent = match updates.recv().await {
            Ok(Out::Changes(batch)) => stream::write_frame(&mut socket, &*batch).await?,
            Ok(Out::Whole) => push_whole(&mut socket, own, piece).await?,
            // Fell behind: a new connection starts with the whole state.
            Err(broadcast::error::RecvError::Lagged(_)) => return Ok(()),
            Err(broadcast::error::RecvError::Closed) => return Ok(()),
        };
        metrics.ring.stream_bytes.inc_by(sent as u64);
    }
}

/// Sends this replica's whole state, taken from the tracker now, in pieces of `piece`
/// verdicts (a byte a target held while it goes, each piece's keys written as it does); the
/// bytes written. A change the tracker made before the state was taken may reach the member after it: it
/// says what the state already says.
async fn push_whole(
    socket: &mut TcpStream,
    (tracker, impaired): &Own,
    piece: usize,
) -> Result<usize, StreamError> {
    let state = tracker
        .send(OwnVerdicts)
        .await
        .map_err(|_| StreamError::Stopped)?;
    let impaired = impaired.load(Ordering::Acquire);
    stream::write_whole(socket, state.iter(), impaired, piece).await
}

/// Takes the other members' streams: each proves it knows the secret, then its batches go
/// to the tracker.
async fn take_streams(
    listener: TcpListener,
    ring: String,
    secret: Arc<[u8]>,
    tracker: Addr<HealthTracker>,
    metrics: Arc<Metrics>,
) {
    loop {
        let Ok((socket, from)) = listener.accept().await else {
            continue;
        };
        let (ring, secret, tracker, metrics) = (
            ring.clone(),
            secret.clone(),
            tracker.clone(),
            metrics.clone(),
        );
        tokio::spawn(async move {
            if let Err(e) = take_one(socket, &ring, &secret, &tracker, &metrics).await {
                warn!(%from, "ring: a verdict stream ended: {e}");
            }
        });
    }
}

async fn take_one(
    mut socket: TcpStream,
    ring: &str,
    secret: &[u8],
    tracker: &Addr<HealthTracker>,
    metrics: &Metrics,
) -> Result<(), StreamError> {
    let hello = challenge(&mut socket, ring, secret).await?;
    // Whether a whole state's pieces are arriving: the next piece is not its first.
    let mut listing = false;
    loop {
        let batch: Batch = match stream::read_frame(&mut socket).await {
            Ok(batch) => batch,
            Err(StreamError::Io(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Ok(())
            }
            Err(e) => return Err(e),
        };
        if let Some(age) = stream::age(batch.made_us) {
            metrics.ring.stream_lag.observe(age.as_secs_f64());
        }
        let part = if batch.full {
            let first = !listing;
            listing = batch.more;
            Part::Whole {
                first,
                last: !batch.more,
            }
        } else {
            Part::Changes
        };
        let impaired = batch.impaired;
        let verdicts = batch
            .verdicts
            .into_iter()
            .map(|(key, letter)| {
                let health = stream::health(letter);
                (key, Vantage { health, impaired })
            })
            .collect();
        // Applied before the next frame is read: a whole state's pieces are never queued
        // at the tracker together.
        tracker
            .send(PeerVerdicts {
                from: hello.identity.clone(),
                part,
                verdicts,
            })
            .await
            .map_err(|_| StreamError::Stopped)?;
    }
}

/// The pusher on `socket` proves it knows the ring's secret (its answer to a fresh nonce,
/// within the handshake's time); its hello names it.
async fn challenge(
    socket: &mut TcpStream,
    ring: &str,
    secret: &[u8],
) -> Result<Hello, StreamError> {
    let nonce = stream::nonce();
    stream::write_frame(
        socket,
        &Challenge {
            nonce: nonce.clone(),
            pieces: true,
        },
    )
    .await?;
    let hello: Hello = tokio::time::timeout(stream::HANDSHAKE_TIMEOUT, stream::read_frame(socket))
        .await
        .map_err(|_| StreamError::Slow(stream::HANDSHAKE_TIMEOUT))??;
    if !stream::verify(secret, ring, &nonce, &hello) {
        return Err(StreamError::Unauthenticated {
            ring: hello.ring,
            identity: hello.identity,
        });
    }
    Ok(hello)
}
