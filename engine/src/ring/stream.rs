//! The verdict stream between ring members: each member connects to every other member's
//! `listen` address and pushes its own verdicts there, all of them when the connection
//! opens and each change after. TCP, one length-prefixed JSON frame after another. The
//! whole state goes in pieces of [`PIECE`] verdicts to a listener that says it takes them
//! ([`Challenge::pieces`]), so neither side ever holds it whole; in one frame to one that
//! does not.
//!
//! The taking side proves nothing; the pushing side proves it knows the ring's secret: the
//! listener sends a fresh nonce, the member answers with its identity and
//! HMAC-SHA256(secret, ring name | identity | nonce), so a recorded handshake cannot be
//! replayed and nobody without the secret can inject verdicts. The frames after it are not
//! signed one by one: the stream is meant for the pod network between replicas; put it
//! under a NetworkPolicy (shipped) or a mesh's mTLS where that network is not trusted.

use std::time::Duration;

use ::ring::hmac;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::hysteresis::Health;
use crate::secret::hex;

/// The largest frame: a full state of 1,000,000 targets fits (about 60 bytes each).
const MAX_FRAME: u32 = 64 << 20;

/// The most verdicts in one piece of a whole state: few enough that applying one piece
/// (a transition and its event per target, at worst) is a small step for the tracker and
/// whoever follows its events.
pub const PIECE: usize = 128;

/// How long a handshake may take.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a stream ended.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("a frame of {0} bytes is larger than the limit")]
    TooLarge(u32),
    #[error("not a frame of the verdict stream: {0}")]
    Malformed(#[from] serde_json::Error),
    #[error("member {identity:?} of ring {ring:?} did not prove it knows this ring's secret")]
    Unauthenticated { ring: String, identity: String },
    #[error("the handshake took longer than {0:?}")]
    Slow(Duration),
    #[error("this replica's tracker stopped: no verdicts to send")]
    Stopped,
}

/// The listener's first frame.
#[derive(Debug, Serialize, Deserialize)]
pub struct Challenge {
    pub nonce: String,
    /// Whether the listener takes a whole state in pieces ([`Batch::more`]); absent from
    /// a listener that does not.
    #[serde(default)]
    pub pieces: bool,
}

/// The pushing member's answer.
#[derive(Debug, Serialize, Deserialize)]
pub struct Hello {
    pub ring: String,
    pub identity: String,
    pub mac: String,
}

/// Verdicts: a full state (`full`) or changes. `impaired`: the sender's self-check judges
/// its vantage impaired (its down verdicts never withdraw alone).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Batch {
    pub full: bool,
    pub impaired: bool,
    /// When the sender made the batch, microseconds since the Unix epoch: the taker's
    /// `ring_stream_lag_seconds`. 0 from a sender that does not stamp its batches.
    #[serde(default)]
    pub made_us: u64,
    /// A piece of a whole state (`full`) that more pieces follow: the state ends with the
    /// first piece without it.
    #[serde(default)]
    pub more: bool,
    /// Target key and verdict: `u` up, `d` down, `?` no verdict (stopped probing it).
    pub verdicts: Vec<(String, char)>,
}

/// A verdict as one letter on the wire.
pub fn letter(health: Health) -> char {
    match health {
        Health::Up => 'u',
        Health::Down => 'd',
        Health::Unknown => '?',
    }
}

/// The verdict a letter stands for.
pub fn health(letter: char) -> Health {
    match letter {
        'u' => Health::Up,
        'd' => Health::Down,
        _ => Health::Unknown,
    }
}

/// Now, in microseconds since the Unix epoch: a batch's [`Batch::made_us`].
pub fn stamp() -> u64 {
    crate::clock::since_epoch(std::time::SystemTime::now()).as_micros() as u64
}

/// How long ago, by this host's clock, a batch stamped `made_us` was made: `None` for an
/// unstamped batch. Hosts' clocks differ by their NTP error, so a negative age (the
/// sender's clock ahead) counts as zero.
pub fn age(made_us: u64) -> Option<Duration> {
    (made_us != 0).then(|| Duration::from_micros(stamp().saturating_sub(made_us)))
}

/// The proof a member sends for `nonce`.
pub fn prove(secret: &[u8], ring: &str, identity: &str, nonce: &str) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
    hex(hmac::sign(&key, &signed(ring, identity, nonce)).as_ref())
}

/// Whether `hello` proves knowledge of `secret` for `nonce` (in constant time).
pub fn verify(secret: &[u8], ring: &str, nonce: &str, hello: &Hello) -> bool {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
    let Some(tag) = unhex(&hello.mac) else {
        return false;
    };
    hello.ring == ring && hmac::verify(&key, &signed(ring, &hello.identity, nonce), &tag).is_ok()
}

/// A fresh nonce: 16 bytes of the system's randomness (fastrand's, should the system's
/// not answer), hex.
pub fn nonce() -> String {
    let mut bytes = [0u8; 16];
    if ::ring::rand::SecureRandom::fill(&::ring::rand::SystemRandom::new(), &mut bytes).is_err() {
        bytes = std::array::from_fn(|_| fastrand::u8(..));
    }
    hex(&bytes)
}

fn signed(ring: &str, identity: &str, nonce: &str) -> Vec<u8> {
    format!("{ring}\n{identity}\n{nonce}").into_bytes()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Writes one frame.
pub async fn write_frame<T: Serialize>(
    io: &mut (impl AsyncWrite + Unpin),
    frame: &T,
) -> Result<usize, StreamError> {
    let body = serde_json::to_vec(frame)?;
    let len = u32::try_from(body.len()).map_err(|_| StreamError::TooLarge(u32::MAX))?;
    io.write_u32(len).await?;
    io.write_all(&body).await?;
    io.flush().await?;
    Ok(body.len() + 4)
}

/// Writes a whole state: `verdicts` in pieces of `piece` (at least one piece, empty for
/// an empty state), each flagged `impaired`; the bytes written.
pub async fn write_whole(
    io: &mut (impl AsyncWrite + Unpin),
    verdicts: impl Iterator<Item = (String, Health)>,
    impaired: bool,
    piece: usize,
) -> Result<usize, StreamError> {
    let mut verdicts = verdicts.peekable();
    let mut sent = 0;
    loop {
        let batch = Batch {
            full: true,
            impaired,
            made_us: stamp(),
            more: false,
            verdicts: verdicts
                .by_ref()
                .take(piece)
                .map(|(key, health)| (key, letter(health)))
                .collect(),
        };
        let more = verdicts.peek().is_some();
        sent += write_frame(io, &Batch { more, ..batch }).await?;
        if !more {
            return Ok(sent);
        }
    }
}

/// Reads one frame.
pub async fn read_frame<T: for<'de> Deserialize<'de>>(
    io: &mut (impl AsyncRead + Unpin),
) -> Result<T, StreamError> {
    let len = io.read_u32().await?;
    if len > MAX_FRAME {
        return Err(StreamError::TooLarge(len));
    }
    let mut body = vec![0u8; len as usize];
    io.read_exact(&mut body).await?;
    Ok(serde_json::from_slice(&body)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_holds_only_for_its_secret_ring_and_nonce() {
        let n = nonce();
        let hello = Hello {
            ring: "ho".into(),
            identity: "ho-1".into(),
            mac: prove(b"s3cret", "ho", "ho-1", &n),
        };
        assert!(verify(b"s3cret", "ho", &n, &hello));
        assert!(!verify(b"other", "ho", &n, &hello));
        assert!(!verify(b"s3cret", "ho", &nonce(), &hello), "a replay");
        assert!(!verify(b"s3cret", "ring-b", &n, &hello));
        let renamed = Hello {
            identity: "ho-2".into(),
            ..hello
        };
        assert!(!verify(b"s3cret", "ho", &n, &renamed));
    }

    #[test]
    fn a_batch_from_a_sender_that_does_not_stamp_has_no_age() {
        let old: Batch = serde_json::from_str(r#"{"full":false,"impaired":false,"verdicts":[]}"#)
            .expect("a batch without made_us still parses");
        assert_eq!(age(old.made_us), None);
        assert_eq!(
            age(stamp() + 5_000_000),
            Some(Duration::ZERO),
            "clock ahead"
        );
    }

    #[tokio::test]
    async fn frames_cross_a_socket_and_oversized_ones_are_refused() {
        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        let batch = Batch {
            full: true,
            impaired: false,
            made_us: stamp(),
            more: false,
            verdicts: vec![("tcp://10.0.0.1:80".into(), letter(Health::Down))],
        };
        write_frame(&mut a, &batch).await.unwrap();
        let got: Batch = read_frame(&mut b).await.unwrap();
        assert_eq!(got, batch);
        assert_eq!(health(got.verdicts[0].1), Health::Down);
        assert!(age(got.made_us).expect("stamped") < Duration::from_secs(60));
        a.write_u32(MAX_FRAME + 1).await.unwrap();
        assert!(matches!(
            read_frame::<Batch>(&mut b).await,
            Err(StreamError::TooLarge(_))
        ));
    }

    /// A whole state of any size goes in pieces of at most `piece`, every one flagged
    /// `full`, all but the last `more`; read back in order they are the state.
    #[tokio::test]
    async fn a_whole_state_goes_in_bounded_pieces() {
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..30 {
            let n = rng.usize(..600);
            let piece = rng.usize(1..200);
            let state: Vec<(String, Health)> = (0..n)
                .map(|i| {
                    let health = [Health::Up, Health::Down][rng.usize(..2)];
                    (format!("tcp://10.0.{}.{}:80", i / 250, i % 250), health)
                })
                .collect();
            let (mut a, mut b) = tokio::io::duplex(1 << 20);
            let sent = write_whole(&mut a, state.iter().cloned(), true, piece)
                .await
                .unwrap();
            drop(a);
            let (mut got, mut frames, mut bytes) = (Vec::new(), Vec::new(), 0);
            while let Ok(batch) = read_frame::<Batch>(&mut b).await {
                bytes += serde_json::to_vec(&batch).unwrap().len() + 4;
                assert!(batch.full && batch.impaired);
                assert!(batch.verdicts.len() <= piece);
                got.extend(batch.verdicts.iter().map(|(k, l)| (k.clone(), health(*l))));
                frames.push(batch.more);
            }
            assert_eq!(got, state);
            assert_eq!(frames.len(), n.div_ceil(piece).max(1), "{n} in {piece}s");
            assert!(frames
                .split_last()
                .is_some_and(|(last, rest)| !last && rest.iter().all(|m| *m)));
            assert_eq!(sent, bytes);
        }
    }

    /// A listener that does not say it takes pieces gets the whole state in one frame; a
    /// pusher that sends no `more` sends whole states.
    #[test]
    fn the_fields_of_pieces_default_to_one_frame() {
        let old: Challenge = serde_json::from_str(r#"{"nonce":"ab"}"#).unwrap();
        assert!(!old.pieces);
        let old: Batch =
            serde_json::from_str(r#"{"full":true,"impaired":false,"verdicts":[]}"#).unwrap();
        assert!(!old.more);
    }
}
