//! What a probe found: success, or a failure with a reason an operator can act on.

use std::fmt;
use std::io;
use std::time::Duration;

/// Why a probe failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The deadline passed before the connection was set up: the SYN went unanswered
    /// (host down, packets dropped by a firewall, or a listener whose queue is full).
    ConnectTimeout,
    /// The deadline passed after connecting: a peer that accepts and never answers, or
    /// answers too slowly.
    Timeout,
    /// Nothing listens: the connection was refused.
    Refused,
    /// The peer reset the connection.
    Reset,
    /// No route to the address.
    Unreachable,
    /// The peer closed the connection before a complete response.
    Closed,
    /// Any other socket error, with the OS's text.
    Io(String),
    /// This machine ran out of something (file descriptors, local ports, buffers): the
    /// result says nothing about the endpoint, so it never counts towards a verdict.
    Local(String),
    /// TLS handshake or certificate failure, with rustls's text.
    Tls(String),
    /// The response is not valid HTTP/1.x.
    Protocol(String),
    /// The status code is not in `expect_status`.
    Status(u16),
    /// `body_contains` was not found within `body_limit`.
    BodyMismatch,
    /// The target answered, not as its check kind expects (a DNS rcode, a missing answer):
    /// a label of the kind's, bounded, for metrics, and the detail for the operator. A kind
    /// names its own reasons without a variant here.
    Answer {
        /// The metric label (`rcode`, `answer`).
        label: &'static str,
        /// What was found (`rcode NXDOMAIN`).
        detail: String,
    },
}

impl Failure {
    /// A short, bounded label for metrics (`status` rather than `status 503`).
    pub fn label(&self) -> &'static str {
        match self {
            Failure::ConnectTimeout => "connect_timeout",
            Failure::Timeout => "timeout",
            Failure::Refused => "refused",
            Failure::Reset => "reset",
            Failure::Unreachable => "unreachable",
            Failure::Closed => "closed",
            Failure::Io(_) => "io",
            Failure::Local(_) => "local",
            Failure::Tls(_) => "tls",
            Failure::Protocol(_) => "protocol",
            Failure::Status(_) => "status",
            Failure::BodyMismatch => "body_mismatch",
            Failure::Answer { label, .. } => label,
        }
    }

    /// Classifies a socket error. An error TLS raised on an established stream (an alert
    /// the server sent after the handshake, such as TLS 1.3's `CertificateRequired`) is a
    /// TLS failure.
    pub fn from_io(e: &io::Error) -> Failure {
        use io::ErrorKind::*;
        if let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
            return Failure::Tls(tls.to_string());
        }
        if matches!(
            e.raw_os_error(),
            Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM | libc::EADDRNOTAVAIL)
        ) {
            return Failure::Local(e.to_string());
        }
        match e.kind() {
            ConnectionRefused => Failure::Refused,
            ConnectionReset | ConnectionAborted | BrokenPipe => Failure::Reset,
            HostUnreachable | NetworkUnreachable => Failure::Unreachable,
            TimedOut => Failure::Timeout,
            UnexpectedEof => Failure::Closed,
            _ => Failure::Io(e.to_string()),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::ConnectTimeout => f.write_str("timeout connecting (no answer to SYN)"),
            Failure::Io(msg) => write!(f, "io: {msg}"),
            Failure::Local(msg) => write!(f, "local resources: {msg}"),
            Failure::Tls(msg) => write!(f, "tls: {msg}"),
            Failure::Protocol(msg) => write!(f, "protocol: {msg}"),
            Failure::Status(code) => write!(f, "status {code}"),
            Failure::BodyMismatch => f.write_str("body mismatch"),
            Failure::Answer { detail, .. } => f.write_str(detail),
            other => f.write_str(other.label()),
        }
    }
}

/// The result of one probe attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeResult {
    /// `Ok` when healthy.
    pub outcome: Result<(), Failure>,
    /// Time from start to verdict (the timeout, for timeouts).
    pub latency: Duration,
    /// The verdict came over a connection kept from an earlier probe (`reuse_connection`).
    pub reused: bool,
    /// When the certificate the target presented stops being valid (TLS kinds), exported
    /// per target so an expiry is seen before it fails a probe.
    pub cert_not_after: Option<std::time::SystemTime>,
    /// The weight a healthy answer reported (`reported_weight`, clamped and damped); `None`:
    /// the configured weight.
    pub weight: Option<u32>,
}

impl ProbeResult {
    /// Whether the probe passed.
    pub fn ok(&self) -> bool {
        self.outcome.is_ok()
    }

    /// Whether the result says anything about the endpoint: false when this machine ran
    /// out of resources ([`Failure::Local`]); such results are counted, not judged.
    pub fn counts(&self) -> bool {
        !matches!(self.outcome, Err(Failure::Local(_)))
    }

    /// `ok` or the failure's text.
    pub fn reason(&self) -> String {
        match &self.outcome {
            Ok(()) => "ok".into(),
            Err(f) => f.to_string(),
        }
    }

    /// `ok` or the failure's metric label.
    pub fn label(&self) -> &'static str {
        match &self.outcome {
            Ok(()) => "ok",
            Err(f) => f.label(),
        }
    }
}
