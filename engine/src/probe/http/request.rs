//! One HTTP/1.1 exchange over an established stream.
//!
//! The request head is serialized once per check, shared by its targets; when the `Host`
//! is the target's address, the address is written into its place as the head is sent
//! (one vectored write, no copy: [`HeadParts`]). The response head is parsed with
//! `httparse` (hyper's own parser) as it arrives, and a body is read only when there is
//! something to look for (`body_contains`) or the connection is kept for the next probe
//! ([`super::body`]). A status check is one write and usually one read, with one
//! allocation.
//!
//! Measured at 10,000 probes/s (bench/README.md): going through hyper's client cost ~600
//! bytes per target (a `HeaderMap`), a request, header map and URI built per probe, and an
//! 8 KB connection state inside every probe in flight.

use std::borrow::Cow;
use std::net::IpAddr;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};

use super::body::{read_body, BodyRead, Framing};
use super::conditions::BodyConditions;
use super::head::{host_at, request_head, AddressText, Answering, HeadParts};
use super::redirect::{is_redirect, method_after, same_origin_path, Origin};
use super::HttpCheck;
use crate::probe::weight::ReportedWeight;
use crate::probe::Failure;

/// Largest response head read; a health endpoint's is far smaller.
const MAX_HEAD: usize = 16 * 1024;
/// Most response headers parsed (hyper's default).
const MAX_HEADERS: usize = 100;
const USER_AGENT: &str = concat!("health-orchestrator/", env!("CARGO_PKG_VERSION"));

/// The request to send and the response that counts as healthy, prepared once per check.
pub struct HttpRequest {
    /// The request head, as sent but for the dialled address when the `Host` is it.
    head: Box<[u8]>,
    /// Where in `head` the dialled address goes (`Host: ADDRESS[:PORT]`); `None` when
    /// `host` names the `Host`.
    address_at: Option<usize>,
    expect_status: Box<[u16]>,
    needle: Option<Box<[u8]>>,
    conditions: BodyConditions,
    body_limit: usize,
    /// A HEAD request: the answer has no body whatever its head says.
    head_only: bool,
    /// What following redirects needs (`follow_redirects`); `None` (the default) judges a
    /// redirect as its status and costs nothing per target.
    redirects: Option<Box<Redirects>>,
    /// Where a healthy answer reports its weight (`reported_weight`).
    weight: Option<Box<ReportedWeight>>,
}

/// The parts of the request a redirect rebuilds it from.
struct Redirects {
    /// Most redirects followed in one probe.
    limit: u8,
    /// `http` or `https`, and the `Host` sent (`None`: the dialled address, with the port
    /// unless it is 80 or 443): a redirect elsewhere is not followed.
    scheme: &'static str,
    authority: Option<String>,
    /// The port dialled.
    port: u16,
    /// The header lines after the `Host` line, without the final empty line.
    fields: String,
    /// The first request's method, path and body.
    first: Hop,
    body: Option<String>,
}

/// One request of a redirect chain.
#[derive(Clone)]
pub struct Hop {
    method: String,
    path: String,
    /// The request's body goes with it (a 307 or 308 after a POST).
    with_body: bool,
}

/// How an exchange ended.
pub enum Answer {
    /// The answer was judged healthy: whether the connection can carry the next request,
    /// and the weight it reported (`reported_weight`), if it was read.
    Healthy { reusable: bool, weight: Option<f64> },
    /// A redirect to follow (`follow_redirects`): its status and `Location`.
    Redirect { code: u16, location: String },
}

/// A complete response head.
#[derive(Debug, PartialEq, Eq)]
struct Head {
    code: u16,
    /// Bytes of the head, up to and including its empty line.
    len: usize,
    /// Where the body ends, or why the head does not say (a status check does not care).
    framing: Result<Framing, String>,
    /// HTTP/1.1 without `Connection: close`: the server will take another request.
    keep_alive: bool,
    /// A redirect's `Location` (read only for redirect codes).
    location: Option<String>,
}

/// The smallest MSS a TCP peer may use (RFC 9293: 536 bytes for IPv4; IPv6's is larger).
const MIN_SEGMENT: usize = 536;

impl HttpRequest {
    /// Prepares the request to `port`. Path, header names and values were validated with
    /// the config. `tls`: the request goes over TLS (a redirect to `https://` on the same
    /// host is then on the endpoint).
    pub fn new(check: &HttpCheck, port: u16, tls: bool) -> HttpRequest {
        // No `Connection: close`: the server would then close first and keep TIME_WAIT state
        // for every probe (measured: 130,000 TIME_WAIT sockets and late probes at 10,000
        // probes/s). We close first with an RST instead (SO_LINGER 0), which leaves no
        // TIME_WAIT on either side.
        let mut fields = format!("User-Agent: {USER_AGENT}\r\n");
        for (name, value) in &check.headers {
            fields.push_str(&format!("{name}: {value}\r\n"));
        }
        for (name, value) in &check.secret_headers {
            fields.push_str(&format!("{name}: {}\r\n", value.expose()));
        }
        let first = Hop {
            method: check.method.clone(),
            path: check.path.clone(),
            with_body: check.request_body.is_some(),
        };
        // The `Host` after the address, which each attempt writes before it.
        let port_suffix = match port {
            80 | 443 => String::new(),
            port => format!(":{port}"),
        };
        let host = check.host.as_deref().unwrap_or(&port_suffix);
        let line = (first.method.as_str(), first.path.as_str());
        let head = request_head(line, host, &fields, check.request_body.as_deref());
        let address_at = check.host.is_none().then(|| host_at(line));
        let redirects = (check.follow_redirects > 0).then(|| {
            Box::new(Redirects {
                limit: check.follow_redirects,
                scheme: if tls { "https" } else { "http" },
                authority: check.host.clone(),
                port,
                fields,
                first,
                body: check.request_body.clone(),
            })
        });
        HttpRequest {
            head: head.into_boxed_slice(),
            address_at,
            redirects,
            expect_status: {
                let mut codes = check.expect_status.clone();
                codes.sort_unstable();
                codes.dedup();
                codes.into_boxed_slice()
            },
            needle: check
                .body_contains
                .as_ref()
                .map(|n| n.as_bytes().to_vec().into_boxed_slice()),
            conditions: BodyConditions::new(check.body_matches.as_deref(), &check.body_json),
            body_limit: check.body_limit,
            head_only: check.method == "HEAD",
            weight: check.reported_weight.clone().map(Box::new),
        }
    }

    /// Whether the request to `ip` leaves in one segment on any path, so Nagle's algorithm
    /// cannot hold part of it back (see
    /// [`SocketSetup`](crate::probe::connect::SocketSetup)).
    pub fn fits_one_segment(&self, ip: IpAddr) -> bool {
        let address = self.address_at.map_or(0, |_| AddressText::longest(ip));
        self.head.len() + address <= MIN_SEGMENT
    }

    /// Where a healthy answer reports its weight (`reported_weight`), if it does.
    pub fn reported_weight(&self) -> Option<&ReportedWeight> {
        self.weight.as_deref()
    }

    /// Sends the request to `ip` on `stream` and judges the response. With `keep`, the
    /// response is read to its end so the connection can carry the next request; the
    /// answer says whether it can (a healthy response, framed, HTTP/1.1 keep-alive, within
    /// `body_limit`).
    pub async fn exchange<S>(
        &self,
        stream: &mut S,
        ip: IpAddr,
        keep: bool,
    ) -> Result<Answer, Failure>
    where
        S: AsyncRead + AsyncWrite + Answering + Unpin,
    {
        let address = AddressText::new(ip);
        self.send(stream, self.head_to(&address), keep).await
    }

    /// The check's request head to the target whose address is `address`.
    fn head_to<'a>(&'a self, address: &'a AddressText) -> HeadParts<'a> {
        match self.address_at {
            Some(at) => {
                let (before, after) = self.head.split_at(at);
                HeadParts([before, address.as_bytes(), after])
            }
            None => HeadParts::whole(&self.head),
        }
    }

    /// Most redirects one probe follows (0: none).
    pub fn redirect_limit(&self) -> u8 {
        self.redirects.as_ref().map_or(0, |r| r.limit)
    }

    /// The request a redirect (`code`, `location`) after `previous` (`None`: the check's
    /// own request) to `ip` leads to, and its head; a failure when it leaves the endpoint.
    pub fn follow(
        &self,
        ip: IpAddr,
        previous: Option<&Hop>,
        code: u16,
        location: &str,
    ) -> Result<(Hop, Vec<u8>), Failure> {
        let r = self
            .redirects
            .as_deref()
            .expect("a redirect is answered only when following them");
        let previous = previous.unwrap_or(&r.first);
        let authority: Cow<'_, str> = match (&r.authority, r.port) {
            (Some(host), _) => host.into(),
            (None, 80 | 443) => AddressText::new(ip).as_str().to_owned().into(),
            (None, port) => format!("{}:{port}", AddressText::new(ip).as_str()).into(),
        };
        let origin = Origin {
            scheme: r.scheme,
            authority: &authority,
            port: r.port,
        };
        let (method, with_body) = method_after(code, &previous.method);
        let hop = Hop {
            method: method.to_owned(),
            path: same_origin_path(location, &origin, &previous.path)?,
            with_body: with_body && previous.with_body,
        };
        let body = r.body.as_deref().filter(|_| hop.with_body);
        let head = request_head((&hop.method, &hop.path), &authority, &r.fields, body);
        Ok((hop, head))
    }

    /// Sends the request `head` on `stream` and judges the response (see [`Self::exchange`]).
    pub async fn send<S>(
        &self,
        stream: &mut S,
        head: HeadParts<'_>,
        keep: bool,
    ) -> Result<Answer, Failure>
    where
        S: AsyncRead + AsyncWrite + Answering + Unpin,
    {
        let mut buf = stream
            .request(head)
            .await
            .map_err(|e| Failure::from_io(&e))?;
        let mut head = read_head(stream, &mut buf).await?;
        if self.head_only {
            head.framing = Ok(Framing::Length(0));
        }
        if self.expect_status.binary_search(&head.code).is_err() {
            return self.unexpected(head);
        }
        let keep =
            keep && head.keep_alive && matches!(head.framing, Ok(f) if f != Framing::UntilClose);
        let weight = self.weight.as_deref();
        let judge_body = self.conditions.need_body() || weight.is_some_and(|w| w.needs_body());
        // A weight in a header is read before the head is dropped.
        let head_weight = weight
            .filter(|w| !w.needs_body())
            .and_then(|w| w.read_http(&buf[..head.len], &[]));
        if self.needle.is_none() && !judge_body && !keep {
            return Ok(Answer::Healthy {
                reusable: false,
                weight: head_weight,
            });
        }
        let framing = head.framing.map_err(Failure::Protocol)?;
        buf.drain(..head.len);
        let read = BodyRead {
            needle: self.needle.as_deref(),
            limit: self.body_limit,
            to_end: keep,
            keep: judge_body,
        };
        let end = read_body(stream, buf, framing, read).await?;
        if !end.found {
            return Err(Failure::BodyMismatch);
        }
        self.conditions.judge(&end.body)?;
        Ok(Answer::Healthy {
            reusable: keep && end.at_boundary,
            weight: head_weight.or_else(|| {
                weight
                    .filter(|w| w.needs_body())
                    .and_then(|w| w.read_http(&[], &end.body))
            }),
        })
    }

    /// An answer whose status is not expected: a redirect to follow when this check follows
    /// them, else a failure naming the status.
    fn unexpected(&self, head: Head) -> Result<Answer, Failure> {
        match head.location {
            Some(location) if self.redirects.is_some() => Ok(Answer::Redirect {
                code: head.code,
                location,
            }),
            _ => Err(Failure::Status(head.code)),
        }
    }
}

/// Reads until a final (non-1xx) response head is complete; interim responses are skipped.
/// `buf` keeps everything read, the head starting at offset 0 on return.
async fn read_head<S>(stream: &mut S, buf: &mut Vec<u8>) -> Result<Head, Failure>
where
    S: AsyncRead + Unpin,
{
    loop {
        while let Some(head) = parse_head(buf)? {
            if (100..200).contains(&head.code) && head.code != 101 {
                buf.drain(..head.len);
                continue;
            }
            return Ok(head);
        }
        if buf.len() >= MAX_HEAD {
            return Err(Failure::Protocol(format!(
                "response head larger than {} KiB",
                MAX_HEAD / 1024
            )));
        }
        if stream
            .read_buf(buf)
            .await
            .map_err(|e| Failure::from_io(&e))?
            == 0
        {
            return Err(Failure::Closed);
        }
    }
}

/// The complete response head at the start of `bytes`, `None` while incomplete.
fn parse_head(bytes: &[u8]) -> Result<Option<Head>, Failure> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let len = match response.parse(bytes) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(Failure::Protocol(format!("invalid HTTP response: {e}"))),
    };
    let code = response.code.expect("complete head has a code");
    let mut keep_alive = response.version == Some(1);
    let mut length = Ok(None);
    let mut chunked = false;
    let mut location = None;
    for h in response.headers.iter() {
        let value = std::str::from_utf8(h.value).unwrap_or("");
        if is_redirect(code) && h.name.eq_ignore_ascii_case("location") {
            location = Some(value.to_owned());
        } else if h.name.eq_ignore_ascii_case("content-length") {
            length = match (length, value.trim().parse::<u64>()) {
                (Ok(None), Ok(n)) => Ok(Some(n)),
                (Ok(Some(l)), Ok(n)) if l == n => Ok(Some(n)),
                (Ok(Some(_)), Ok(_)) => Err("conflicting Content-Length headers".to_string()),
                (Ok(_), Err(_)) => Err(format!("invalid Content-Length {value:?}")),
                (Err(e), _) => Err(e),
            };
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            // Chunked only when it is the final coding (RFC 9112 section 6.3).
            chunked = value
                .rsplit(',')
                .next()
                .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
            length = Ok(None);
        } else if h.name.eq_ignore_ascii_case("connection")
            && value
                .split(',')
                .any(|t| t.trim().eq_ignore_ascii_case("close"))
        {
            keep_alive = false;
        }
    }
    let framing = if code == 204 || code == 304 || (100..200).contains(&code) {
        Ok(Framing::Length(0))
    } else if chunked {
        Ok(Framing::Chunked)
    } else {
        length.map(|l| l.map_or(Framing::UntilClose, Framing::Length))
    };
    Ok(Some(Head {
        code,
        len,
        framing,
        keep_alive,
        location,
    }))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

    use super::{parse_head, AddressText, Answer, Failure, Framing, Head, HttpCheck, HttpRequest};

    /// A GET status check expecting 200.
    fn status_check() -> HttpCheck {
        HttpCheck {
            path: "/healthz".into(),
            host: None,
            headers: Default::default(),
            secret_headers: Default::default(),
            expect_status: vec![200],
            body_contains: None,
            body_limit: 4096,
            probes_per_connection: 1,
            method: "GET".into(),
            request_body: None,
            body_matches: None,
            body_json: Default::default(),
            max_latency: None,
            follow_redirects: 0,
            reported_weight: None,
        }
    }

    /// Seeded checks and addresses (IPv4, IPv6, IPv4-mapped): the head a target is sent is
    /// the check's with that target's address as its `Host`, written as the test's own
    /// oracle writes a request.
    #[test]
    fn each_target_is_sent_the_checks_head_with_its_own_address() {
        let mut rng = fastrand::Rng::with_seed(2911);
        let agent = concat!("health-orchestrator/", env!("CARGO_PKG_VERSION"));
        for _ in 0..200 {
            let mut check = status_check();
            check.path = format!("/p{}", rng.u16(..));
            check.host = rng.bool().then(|| format!("h{}.test", rng.u8(..)));
            if rng.bool() {
                check
                    .headers
                    .insert("X-A".into(), format!("v{}", rng.u8(..)));
            }
            if rng.bool() {
                check.method = "POST".into();
                check.request_body = Some(format!("b{}", rng.u32(..)));
            }
            let port = [80, 443, 8080, rng.u16(1..)][rng.usize(..4)];
            let ip: IpAddr = match rng.u8(..3) {
                0 => Ipv4Addr::from(rng.u32(..)).into(),
                1 => Ipv6Addr::from(rng.u128(..)).into(),
                _ => Ipv4Addr::from(rng.u32(..)).to_ipv6_mapped().into(),
            };
            let address = match ip {
                IpAddr::V4(v4) => v4.to_string(),
                IpAddr::V6(v6) => format!("[{v6}]"),
            };
            let host = match (&check.host, port) {
                (Some(host), _) => host.clone(),
                (None, 80 | 443) => address,
                (None, port) => format!("{address}:{port}"),
            };
            let mut expected = format!(
                "{} {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {agent}\r\n",
                check.method, check.path
            );
            for (name, value) in &check.headers {
                expected.push_str(&format!("{name}: {value}\r\n"));
            }
            match &check.request_body {
                Some(body) => {
                    expected.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()))
                }
                None => expected.push_str("\r\n"),
            }
            let request = HttpRequest::new(&check, port, false);
            let text = AddressText::new(ip);
            let sent: Vec<u8> = request.head_to(&text).0.concat();
            assert_eq!(String::from_utf8(sent).unwrap(), expected);
            // Never said to fit one segment when it does not (Nagle would hold it back).
            assert!(!request.fits_one_segment(ip) || expected.len() <= super::MIN_SEGMENT);
        }
    }

    #[test]
    fn only_a_request_longer_than_a_segment_needs_nodelay() {
        let mut check = status_check();
        let ip = "127.0.0.1".parse().unwrap();
        assert!(HttpRequest::new(&check, 8080, false).fits_one_segment(ip));
        check.headers.insert(
            "Authorization".into(),
            format!("Bearer {}", "x".repeat(600)),
        );
        assert!(!HttpRequest::new(&check, 8080, false).fits_one_segment(ip));
    }

    /// A loopback gateway answers after a seeded delay, its response cut in two at a seeded
    /// point: the exchange waits for the first bytes before it takes a buffer, then reads
    /// the head across both writes. The verdict expected is the script's status against
    /// the check's `expect_status`.
    #[tokio::test]
    async fn a_late_answer_in_pieces_is_judged_whole() {
        let mut rng = fastrand::Rng::with_seed(74);
        let check = status_check();
        for _ in 0..12 {
            let code = if rng.bool() { 200 } else { 503 };
            let delay = Duration::from_millis(rng.u64(0..30));
            let response = format!("HTTP/1.1 {code} X\r\nContent-Length: 0\r\n\r\n");
            let cut = rng.usize(1..response.len());
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let gateway = tokio::spawn(async move {
                let (mut socket, _) = listener.accept().await.unwrap();
                let mut request = [0u8; 512];
                assert!(socket.read(&mut request).await.unwrap() > 0);
                tokio::time::sleep(delay).await;
                socket.write_all(&response.as_bytes()[..cut]).await.unwrap();
                tokio::time::sleep(Duration::from_millis(2)).await;
                socket.write_all(&response.as_bytes()[cut..]).await.unwrap();
            });
            let mut stream = TcpStream::connect(addr).await.unwrap();
            let request = HttpRequest::new(&check, addr.port(), false);
            let answer = request.exchange(&mut stream, addr.ip(), false).await;
            match code {
                200 => assert!(matches!(answer, Ok(Answer::Healthy { .. }))),
                _ => assert!(matches!(answer, Err(Failure::Status(503)))),
            }
            gateway.await.unwrap();
        }
    }

    #[test]
    fn response_heads_parse_as_they_arrive() {
        let head = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        assert_eq!(parse_head(&head[..20]), Ok(None));
        assert_eq!(
            parse_head(head),
            Ok(Some(Head {
                code: 200,
                len: head.len() - 2,
                framing: Ok(Framing::Length(2)),
                keep_alive: true,
                location: None,
            }))
        );
        assert!(matches!(
            parse_head(b"SSH-2.0-OpenSSH_9.2\r\n"),
            Err(Failure::Protocol(m)) if m.starts_with("invalid HTTP response")
        ));
    }

    #[test]
    fn framing_and_keep_alive_follow_the_headers() {
        let parse = |h: &[u8]| parse_head(h).unwrap().unwrap();
        let h = parse(b"HTTP/1.0 503 x\r\n\r\n");
        assert_eq!(
            (h.code, h.framing, h.keep_alive),
            (503, Ok(Framing::UntilClose), false)
        );
        let h = parse(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 9\r\n\r\n",
        );
        assert_eq!(h.framing, Ok(Framing::Chunked));
        let h =
            parse(b"HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 0\r\n\r\n");
        assert!(!h.keep_alive);
        let h = parse(b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n");
        assert_eq!(h.framing, Ok(Framing::Length(0)));
        // A status check does not need the length: a bad one only matters to a body read.
        let h = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n");
        assert_eq!(h.framing, Err("conflicting Content-Length headers".into()));
        let h = parse(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n");
        assert_eq!(h.framing, Err("invalid Content-Length \"-1\"".into()));
    }
}
