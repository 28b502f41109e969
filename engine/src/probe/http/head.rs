//! A request head as it is sent: the check's head with the dialled address written into
//! its `Host` at attempt time ([`HeadParts`], [`AddressText`]), and how each kind of stream
//! sends it and takes the buffer the answer is read into ([`Answering`]).
//!
//! The head is prepared once per check, shared by every target of it: the address is the
//! only part that differs between them, and writing it as the head leaves (one vectored
//! write of the parts, or the parts put together in the answer's buffer over TLS) costs no
//! allocation per attempt, where a head per target cost ~91 bytes each.

use std::io::{IoSlice, Write};
use std::net::IpAddr;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// A request head in the parts it is sent in, in order: the check's head around the
/// dialled address, or one whole head (the address's and the last part empty).
#[derive(Clone, Copy)]
pub struct HeadParts<'a>(pub(super) [&'a [u8]; 3]);

impl<'a> HeadParts<'a> {
    /// A head sent as it is.
    pub fn whole(head: &'a [u8]) -> HeadParts<'a> {
        HeadParts([head, &[], &[]])
    }

    fn len(&self) -> usize {
        self.0.iter().map(|part| part.len()).sum()
    }
}

/// The buffer an answer is read into: a health endpoint's head fits it.
const ANSWER_BUFFER: usize = 1024;

/// A stream a request is sent on. A plain one waits for the gateway's first answer bytes
/// before the probe takes a buffer to read them into: a probe waiting on a gateway that
/// accepted and went silent then holds no read buffer, which in a mass hang is one buffer
/// per target in flight (10,000 hanging: 10 MB of empty buffers).
pub trait Answering {
    /// Sends `head` and returns the buffer to read the answer into once there is
    /// something to read (or the stream failed).
    fn request(
        &mut self,
        head: HeadParts<'_>,
    ) -> impl std::future::Future<Output = std::io::Result<Vec<u8>>> + Send;
}

/// One `writev` however many parts: the head leaves in one segment, as it did whole.
impl Answering for TcpStream {
    async fn request(&mut self, head: HeadParts<'_>) -> std::io::Result<Vec<u8>> {
        let mut slices = head.0.map(IoSlice::new);
        let mut unsent = &mut slices[..];
        while !unsent.is_empty() {
            match self.write_vectored(unsent).await? {
                0 => return Err(std::io::ErrorKind::WriteZero.into()),
                sent => IoSlice::advance_slices(&mut unsent, sent),
            }
        }
        self.readable().await?;
        Ok(Vec::with_capacity(ANSWER_BUFFER))
    }
}

/// TLS reads at once: rustls may already hold decrypted bytes the socket no longer shows,
/// and a TLS probe's handshake state outweighs the buffer anyway. The head is put together
/// in that buffer, so it leaves in one record without an allocation of its own.
impl<S: AsyncRead + AsyncWrite + Unpin + Send + Sync> Answering for TlsStream<S> {
    async fn request(&mut self, head: HeadParts<'_>) -> std::io::Result<Vec<u8>> {
        let mut buf = Vec::with_capacity(ANSWER_BUFFER.max(head.len()));
        for part in head.0 {
            buf.extend_from_slice(part);
        }
        self.write_all(&buf).await?;
        buf.clear();
        Ok(buf)
    }
}

/// An address as the `Host` names it (`10.0.0.1`, `[::1]`), written on the stack: an
/// attempt needs no allocation for it.
pub(super) struct AddressText {
    bytes: [u8; AddressText::LONGEST],
    len: u8,
}

impl AddressText {
    /// `[` + the longest IPv6 text (`ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255`) + `]`.
    pub(super) const LONGEST: usize = 47;

    pub(super) fn new(ip: IpAddr) -> AddressText {
        let mut bytes = [0; AddressText::LONGEST];
        let mut rest = &mut bytes[..];
        match ip {
            IpAddr::V4(ip) => write!(rest, "{ip}"),
            IpAddr::V6(ip) => write!(rest, "[{ip}]"),
        }
        .expect("an address's text fits");
        let len = (AddressText::LONGEST - rest.len()) as u8;
        AddressText { bytes, len }
    }

    /// The longest text of an address of `ip`'s family.
    pub(super) fn longest(ip: IpAddr) -> usize {
        match ip {
            IpAddr::V4(_) => "255.255.255.255".len(),
            IpAddr::V6(_) => AddressText::LONGEST,
        }
    }

    pub(super) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    pub(super) fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).expect("an address's text is ASCII")
    }
}

/// A request head: the request line (`method path`), the `Host` line, `fields`, and the
/// body when there is one.
pub(super) fn request_head(
    (method, path): (&str, &str),
    host: &str,
    fields: &str,
    body: Option<&str>,
) -> Vec<u8> {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\n{fields}");
    match body {
        Some(body) => head.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len())),
        None => head.push_str("\r\n"),
    }
    head.into_bytes()
}

/// Where the `Host` value starts in a [`request_head`] of `method path`.
pub(super) fn host_at((method, path): (&str, &str)) -> usize {
    format!("{method} {path} HTTP/1.1\r\nHost: ").len()
}
