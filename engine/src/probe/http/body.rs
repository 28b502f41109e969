//! Reading an HTTP/1.1 response body as it is framed (RFC 9112 section 6): by
//! `Content-Length`, by chunks, or until the server closes.
//!
//! A probe reads a body for three reasons: to look for `body_contains`, to judge the body's
//! conditions (`body_matches`, `body_json`) on it, and to bring a kept connection to the end
//! of the response so it can carry the next request. All stop at `body_limit` bytes: past it
//! the body is judged on its prefix and the connection is closed rather than drained.

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::probe::Failure;

/// Longest chunk-size line or trailer section accepted (both are a few bytes in practice).
const MAX_CHUNK_META: usize = 8 * 1024;

/// How the response says where its body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `Content-Length` bytes (0 for 204 and 304 responses).
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Neither: the body ends when the server closes the connection.
    UntilClose,
}

/// What one body read is for.
pub struct BodyRead<'a> {
    /// Text to look for in the first `limit` bytes.
    pub needle: Option<&'a [u8]>,
    /// Most bytes read.
    pub limit: usize,
    /// Read to the end of the body (a kept connection), not only until the needle is found.
    pub to_end: bool,
    /// Keep the first `limit` bytes for conditions judged on the whole body.
    pub keep: bool,
}

/// How far a body read got.
#[derive(Debug, PartialEq, Eq)]
pub struct BodyEnd {
    /// The needle was found (always true without a needle).
    pub found: bool,
    /// The body was read exactly to its end and nothing followed: the connection stands
    /// at a message boundary.
    pub at_boundary: bool,
    /// The first `limit` bytes, when the read kept them.
    pub body: Vec<u8>,
}

/// Bytes seen so far and what was found in them.
struct Scan<'a> {
    read: BodyRead<'a>,
    /// Body bytes taken so far.
    total: usize,
    /// The first `limit` bytes, kept only when there is a needle or the read keeps them.
    seen: Vec<u8>,
    found: bool,
}

impl Scan<'_> {
    /// Takes one piece of body; false once reading further is pointless.
    fn take(&mut self, data: &[u8]) -> bool {
        let looking = self.read.needle.filter(|_| !self.found);
        if looking.is_some() || self.read.keep {
            let room = self.read.limit.saturating_sub(self.seen.len());
            let from = self
                .seen
                .len()
                .saturating_sub(looking.map_or(0, |needle| needle.len().saturating_sub(1)));
            self.seen.extend_from_slice(&data[..data.len().min(room)]);
            if let Some(needle) = looking {
                self.found = contains(&self.seen[from..], needle);
            }
        }
        self.total += data.len();
        if self.total > self.read.limit {
            return false;
        }
        if self.read.to_end || self.read.keep {
            return true;
        }
        !self.found && self.total < self.read.limit
    }
}

/// Reads the body that follows a response head. `buf` holds what was read past the head.
pub async fn read_body<S>(
    stream: &mut S,
    mut buf: Vec<u8>,
    framing: Framing,
    read: BodyRead<'_>,
) -> Result<BodyEnd, Failure>
where
    S: AsyncRead + Unpin,
{
    let mut scan = Scan {
        found: read.needle.is_none(),
        read,
        total: 0,
        seen: Vec::new(),
    };
    let complete = match framing {
        Framing::Length(len) => by_length(stream, &mut buf, len, &mut scan).await?,
        Framing::Chunked => chunked(stream, &mut buf, &mut scan).await?,
        Framing::UntilClose => {
            until_close(stream, &mut buf, &mut scan).await?;
            false
        }
    };
    Ok(BodyEnd {
        found: scan.found,
        at_boundary: complete && buf.is_empty(),
        body: if scan.read.keep {
            scan.seen
        } else {
            Vec::new()
        },
    })
}

/// Reads more into `buf`; the end of the stream is `Closed` (a framed body is incomplete).
async fn fill<S: AsyncRead + Unpin>(stream: &mut S, buf: &mut Vec<u8>) -> Result<(), Failure> {
    if buf.capacity() == buf.len() {
        buf.reserve(4096);
    }
    match stream.read_buf(buf).await {
        Ok(0) => Err(Failure::Closed),
        Ok(_) => Ok(()),
        Err(e) => Err(Failure::from_io(&e)),
    }
}

/// A `Content-Length` body; true when read to its end.
async fn by_length<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut Vec<u8>,
    len: u64,
    scan: &mut Scan<'_>,
) -> Result<bool, Failure> {
    let mut left = len;
    loop {
        let n = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let more = scan.take(&buf[..n]);
        buf.drain(..n);
        left -= n as u64;
        if left == 0 {
            return Ok(true);
        }
        if !more {
            return Ok(false);
        }
        fill(stream, buf).await?;
    }
}

/// A chunked body; true when read to the end of its trailers.
async fn chunked<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut Vec<u8>,
    scan: &mut Scan<'_>,
) -> Result<bool, Failure> {
    loop {
        let size = loop {
            match httparse::parse_chunk_size(buf) {
                Ok(httparse::Status::Complete((used, size))) => {
                    buf.drain(..used);
                    break size;
                }
                Ok(httparse::Status::Partial) if buf.len() < MAX_CHUNK_META => {
                    fill(stream, buf).await?
                }
                _ => return Err(Failure::Protocol("invalid chunk size line".into())),
            }
        };
        if size == 0 {
            return trailers(stream, buf).await.map(|()| true);
        }
        if !by_length(stream, buf, size, scan).await? {
            return Ok(false);
        }
        while buf.len() < 2 {
            fill(stream, buf).await?;
        }
        if &buf[..2] != b"\r\n" {
            return Err(Failure::Protocol("chunk not followed by CRLF".into()));
        }
        buf.drain(..2);
    }
}

/// Skips the trailer section after the last chunk, up to its empty line.
async fn trailers<S: AsyncRead + Unpin>(stream: &mut S, buf: &mut Vec<u8>) -> Result<(), Failure> {
    loop {
        if buf.starts_with(b"\r\n") {
            buf.drain(..2);
            return Ok(());
        }
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.drain(..end + 4);
            return Ok(());
        }
        if buf.len() >= MAX_CHUNK_META {
            return Err(Failure::Protocol("trailer section too large".into()));
        }
        fill(stream, buf).await?;
    }
}

/// A body that ends when the server closes.
async fn until_close<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut Vec<u8>,
    scan: &mut Scan<'_>,
) -> Result<(), Failure> {
    loop {
        let more = scan.take(buf);
        buf.clear();
        if !more {
            return Ok(());
        }
        match fill(stream, buf).await {
            Err(Failure::Closed) => return Ok(()),
            other => other?,
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `wire` (everything after the head) with the given framing.
    async fn body(wire: &[u8], framing: Framing, read: BodyRead<'_>) -> Result<BodyEnd, Failure> {
        // Split the input so each framing is exercised across reads, not only in one buffer.
        let (first, rest) = wire.split_at(wire.len().min(7));
        let mut stream = rest;
        read_body(&mut stream, first.to_vec(), framing, read).await
    }

    fn drain() -> BodyRead<'static> {
        BodyRead {
            needle: None,
            limit: 1024,
            to_end: true,
            keep: false,
        }
    }

    fn look_for(needle: &'static str, to_end: bool) -> BodyRead<'static> {
        BodyRead {
            needle: Some(needle.as_bytes()),
            limit: 1024,
            to_end,
            keep: false,
        }
    }

    #[tokio::test]
    async fn length_bodies_end_at_their_length() {
        let end = body(b"hello ready", Framing::Length(11), look_for("ready", true)).await;
        assert_eq!(
            end,
            Ok(BodyEnd {
                found: true,
                at_boundary: true,
                body: Vec::new(),
            })
        );
        // Bytes after the body: not a boundary we can trust for the next request.
        let end = body(b"okHTTP/1.1", Framing::Length(2), drain())
            .await
            .unwrap();
        assert!(!end.at_boundary);
        assert_eq!(
            body(b"short", Framing::Length(10), drain()).await,
            Err(Failure::Closed)
        );
    }

    #[tokio::test]
    async fn chunked_bodies_are_decoded_with_extensions_and_trailers() {
        let wire = b"5;ext=1\r\nhello\r\n7\r\n, ready\r\n0\r\nX-Trailer: 1\r\n\r\n";
        let end = body(wire, Framing::Chunked, look_for("hello, ready", true)).await;
        assert_eq!(
            end,
            Ok(BodyEnd {
                found: true,
                at_boundary: true,
                body: Vec::new(),
            })
        );
        let end = body(
            b"3\r\nabc\r\n0\r\n\r\n",
            Framing::Chunked,
            look_for("x", true),
        )
        .await;
        assert_eq!(
            end,
            Ok(BodyEnd {
                found: false,
                at_boundary: true,
                body: Vec::new(),
            })
        );
        assert!(matches!(
            body(b"zz\r\n", Framing::Chunked, drain()).await,
            Err(Failure::Protocol(_))
        ));
        assert!(matches!(
            body(b"3\r\nabcXY0\r\n\r\n", Framing::Chunked, drain()).await,
            Err(Failure::Protocol(_))
        ));
    }

    #[tokio::test]
    async fn reading_stops_at_the_limit_or_at_the_needle() {
        let big = vec![b'x'; 4096];
        let end = body(&big, Framing::Length(4096), drain()).await.unwrap();
        assert!(!end.at_boundary, "a body past the limit is not drained");
        let end = body(&big, Framing::UntilClose, look_for("y", false)).await;
        assert_eq!(
            end,
            Ok(BodyEnd {
                found: false,
                at_boundary: false,
                body: Vec::new(),
            })
        );
        // Found early and not kept: the rest is not read (the stream would block if it were).
        let end = body(
            b"ready and more",
            Framing::Length(1 << 20),
            look_for("ready", false),
        )
        .await;
        assert_eq!(
            end,
            Ok(BodyEnd {
                found: true,
                at_boundary: false,
                body: Vec::new(),
            })
        );
    }

    #[test]
    fn substring_search() {
        assert!(contains(b"status: ready", b"ready"));
        assert!(!contains(b"status: rea", b"ready"));
        assert!(contains(b"x", b""));
    }
}
