//! The `/metrics` answer streamed: encoded off the runtime into chunks of [`CHUNK`] bytes
//! that the connection sends as it takes them, so an answer holds a few chunks in memory
//! (about 200 KiB: [`QUEUED`] queued, one being filled, one in the connection's buffer)
//! whatever the number of series; at 100,000 endpoints the whole classic text is 8.4 MiB,
//! which was the heap's peak.
//!
//! The encoder holds the registry's read lock, and while it writes a family that family's,
//! until the last chunk is queued: a reader that does not keep up holds them. So the
//! encoder waits at most [`ChunkLimits::stall`] for room for a chunk and queues the last one
//! by [`ChunkLimits::whole`] after it started; past either it abandons the answer (the
//! connection is cut without the body's last chunk, so the scraper counts a failed scrape,
//! never a short one) and lets the locks go. Who waits for them: [`Metrics::set`] when it
//! registers a set for the first time (at start-up), and an update making a family's first
//! series of a label set while that family is being written (with, queued behind it, that
//! family's other updates); each at most `whole` (15 s) an answer, and behind a reader that
//! keeps up only as long as encoding takes. `node_status`, the one family as large as the
//! plan, holds no lock while it is written (it writes the plan and values it started
//! with). Concurrent answers read the registry at once, each with its own encoder and chunks.

use std::fmt::Write;
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::{Exposition, Metrics};

/// Bytes of text a chunk carries (the last may carry fewer).
const CHUNK: usize = 32 * 1024;

/// Chunks encoded but not yet taken by the connection: with the one being filled and the
/// one the connection is writing, an answer holds about 200 KiB at most.
const QUEUED: usize = 4;

/// How long an answer's encoder waits for its reader before abandoning the answer.
#[derive(Clone, Copy, Debug)]
pub struct ChunkLimits {
    /// Longest wait for room for one chunk (the reader took nothing meanwhile).
    pub stall: Duration,
    /// Longest time from the start of the answer to its last chunk queued.
    pub whole: Duration,
}

impl Default for ChunkLimits {
    /// 5 s without progress; 15 s whole: above Prometheus's default scrape timeout (10 s),
    /// and 8.4 MiB (100,000 endpoints) in 15 s needs under 5 Mbit/s.
    fn default() -> Self {
        ChunkLimits {
            stall: Duration::from_secs(5),
            whole: Duration::from_secs(15),
        }
    }
}

/// What the encoder hands the connection.
enum Piece {
    Text(Bytes),
    /// The answer is whole: without it, the closed channel means it was abandoned.
    End,
}

/// Why an encoder stopped before the end.
#[derive(Debug, thiserror::Error)]
enum Cut {
    #[error("its reader took no chunk for {0:?}")]
    Stalled(Duration),
    #[error("it was not read whole within {0:?}")]
    TooLong(Duration),
    #[error("its reader went away")]
    Gone,
}

/// The error ending a [`MetricsBody`] that was abandoned: hyper then cuts the connection
/// instead of ending the chunked body, so the reader cannot take a part for the whole.
#[derive(Debug, thiserror::Error)]
#[error("the /metrics answer was abandoned before its end (its reader stalled or was too slow)")]
pub struct Abandoned;

/// A `/metrics` answer's body: the chunks its encoder makes, as they come.
pub struct MetricsBody {
    pieces: mpsc::Receiver<Piece>,
    ended: bool,
}

impl hyper::body::Body for MetricsBody {
    type Data = Bytes;
    type Error = Abandoned;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, Abandoned>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        let piece = std::task::ready!(self.pieces.poll_recv(cx));
        Poll::Ready(match piece {
            Some(Piece::Text(text)) => Some(Ok(hyper::body::Frame::data(text))),
            Some(Piece::End) => {
                self.ended = true;
                None
            }
            None => {
                self.ended = true;
                Some(Err(Abandoned))
            }
        })
    }

    fn is_end_stream(&self) -> bool {
        self.ended
    }
}

impl Metrics {
    /// The exposition in `format` as a streamed body, encoded on a blocking thread as the
    /// connection takes it, within `limits` (see the module's comment for who waits how long).
    pub fn stream(self: &Arc<Self>, format: Exposition, limits: ChunkLimits) -> MetricsBody {
        let (tx, pieces) = mpsc::channel(QUEUED);
        let metrics = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let mut chunks = Chunks::new(tx, limits);
            let written = metrics.write(format, &mut chunks).map(drop);
            drop(metrics);
            let ended = match written {
                Ok(_) => chunks.end(),
                Err(std::fmt::Error) => Err(chunks.cut.take().unwrap_or(Cut::Gone)),
            };
            match ended {
                Ok(()) | Err(Cut::Gone) => debug!("/metrics answer ended: {ended:?}"),
                Err(cut) => warn!("/metrics answer abandoned: {cut}"),
            }
        });
        MetricsBody {
            pieces,
            ended: false,
        }
    }
}

/// Wakes the encoder's thread when the channel has room.
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// The encoder's output: text gathered into chunks, each queued for the connection within
/// the limits; on the encoder's (blocking) thread.
struct Chunks {
    tx: mpsc::Sender<Piece>,
    text: Vec<u8>,
    stall: Duration,
    whole: Duration,
    end_by: Instant,
    waker: Waker,
    /// Why a write failed, for the log.
    cut: Option<Cut>,
}

impl Chunks {
    fn new(tx: mpsc::Sender<Piece>, limits: ChunkLimits) -> Chunks {
        Chunks {
            tx,
            text: Vec::new(),
            stall: limits.stall,
            whole: limits.whole,
            end_by: Instant::now() + limits.whole,
            waker: Waker::from(Arc::new(Unpark(std::thread::current()))),
            cut: None,
        }
    }

    /// Queues the text gathered so far as a chunk.
    fn flush(&mut self) -> Result<(), Cut> {
        let text = std::mem::take(&mut self.text);
        self.send(Piece::Text(Bytes::from(text)))
    }

    /// Queues the last chunk and the mark that the answer is whole.
    fn end(&mut self) -> Result<(), Cut> {
        if !self.text.is_empty() {
            self.flush()?;
        }
        self.send(Piece::End)
    }

    /// Queues `piece` once the channel has room: parks the thread meanwhile, at most
    /// `stall`, and never past `end_by`.
    fn send(&mut self, piece: Piece) -> Result<(), Cut> {
        let start = Instant::now();
        if start >= self.end_by {
            return Err(Cut::TooLong(self.whole));
        }
        let deadline = (start + self.stall).min(self.end_by);
        let mut cx = Context::from_waker(&self.waker);
        let mut room = pin!(self.tx.reserve());
        loop {
            match room.as_mut().poll(&mut cx) {
                Poll::Ready(Ok(permit)) => {
                    permit.send(piece);
                    return Ok(());
                }
                Poll::Ready(Err(_)) => return Err(Cut::Gone),
                Poll::Pending => {}
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(match deadline == self.end_by {
                    true => Cut::TooLong(self.whole),
                    false => Cut::Stalled(self.stall),
                });
            }
            std::thread::park_timeout(deadline - now);
        }
    }
}

impl Write for Chunks {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if !self.text.is_empty() && self.text.len() + s.len() > CHUNK {
            if let Err(cut) = self.flush() {
                self.cut = Some(cut);
                return Err(std::fmt::Error);
            }
        }
        if self.text.capacity() == 0 {
            self.text.reserve_exact(CHUNK.max(s.len()));
        }
        self.text.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
#[path = "chunked_tests.rs"]
mod tests;
