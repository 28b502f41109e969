//! The `icmp` kind: one echo request through an unprivileged ping socket (Linux
//! `SOCK_DGRAM` + `IPPROTO_ICMP`, no CAP_NET_RAW), healthy when its reply comes back. The
//! kernel fills in the identifier and checksum and hands this socket only its own replies.
//! Ping sockets are allowed to the groups in `net.ipv4.ping_group_range`; when this
//! process's group is not among them, the probe cannot be prepared and start-up and
//! `check-config` say how to allow it.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;

use ho_config::{ResolvedCheck, Target};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use socket2::{Domain, Protocol, Socket, Type};

use super::registry::{CheckSettings, Prepare, Problems};
use super::{
    Attempt, Dial, Failure, KeptConnection, PreparedProbe, ProbeContext, ProbeError, ProbeKind,
    Progress,
};

/// Payload of an echo request: ping's default size.
const PAYLOAD: usize = 56;

/// `kind = "icmp"`: an echo, nothing more; the kind has no keys and no port.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IcmpSettings {}

impl ResolvedCheck for IcmpSettings {
    fn kind(&self) -> &'static str {
        Self::KIND
    }

    fn url(&self, target: SocketAddr) -> String {
        format!("icmp://{}", target.ip())
    }
}

impl CheckSettings for IcmpSettings {
    const KIND: &'static str = "icmp";
    const DEFAULT_PORT: Option<u16> = None;
    const URL_PORT: Option<u16> = Some(0);
    const USES_PORT: bool = false;
    type Resolved = IcmpSettings;

    fn resolve(self, _problems: &mut Problems<'_>) -> Option<IcmpSettings> {
        Some(self)
    }
}

/// An unprivileged ping socket for `to`'s family.
fn ping_socket(to: IpAddr) -> std::io::Result<Socket> {
    let (domain, protocol) = match to {
        IpAddr::V4(_) => (Domain::IPV4, Protocol::ICMPV4),
        IpAddr::V6(_) => (Domain::IPV6, Protocol::ICMPV6),
    };
    Socket::new(domain, Type::DGRAM, Some(protocol))
}

/// Why ping sockets are refused, and how to allow them.
fn not_allowed(e: &std::io::Error) -> String {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ping_group_range")
        .map(|r| r.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into());
    // /proc/self belongs to this process's user and group.
    let gid = std::fs::metadata("/proc/self").map_or(0, |m| {
        use std::os::unix::fs::MetadataExt;
        m.gid()
    });
    format!(
        "icmp checks need unprivileged ping sockets ({e}): this process's group {gid} is not in \
         net.ipv4.ping_group_range ({range}); allow it with `sysctl -w net.ipv4.ping_group_range=\"{gid} {gid}\"` \
         (in Kubernetes: the pod's securityContext.sysctls)"
    )
}

/// An echo check; it has nothing to prepare.
struct IcmpEcho;

impl IcmpEcho {
    async fn run(dial: &Dial, progress: &Progress) -> Result<(), Failure> {
        let io = |e: std::io::Error| Failure::from_io(&e);
        let socket = ping_socket(dial.addr.ip()).map_err(|e| Failure::Local(not_allowed(&e)))?;
        socket.set_nonblocking(true).map_err(io)?;
        if let Some(source) = dial.source {
            socket
                .bind(&SocketAddr::new(source, 0).into())
                .map_err(io)?;
        }
        socket
            .connect(&SocketAddr::new(dial.addr.ip(), 0).into())
            .map_err(io)?;
        let socket = tokio::net::UdpSocket::from_std(socket.into()).map_err(io)?;
        let sequence = fastrand::u16(..);
        let request_type = if dial.addr.is_ipv4() { 8 } else { 128 };
        let mut packet = vec![request_type, 0, 0, 0, 0, 0];
        packet.extend_from_slice(&sequence.to_be_bytes());
        packet.extend((0..PAYLOAD).map(|i| i as u8));
        socket.send(&packet).await.map_err(io)?;
        // Sent: no reply in time is a timeout of the host, not of a connection.
        progress.connected.store(true, Ordering::Relaxed);
        let reply_type = if dial.addr.is_ipv4() { 0 } else { 129 };
        let mut buf = [0u8; 512];
        loop {
            let n = socket.recv(&mut buf).await.map_err(io)?;
            // An earlier probe's late reply carries another sequence number.
            if n >= 8 && buf[0] == reply_type && buf[6..8] == sequence.to_be_bytes() {
                return Ok(());
            }
        }
    }
}

impl ProbeKind for IcmpEcho {
    fn attempt<'a>(
        &'a self,
        dial: &'a Dial,
        progress: &'a Progress,
        _kept: &'a mut Option<KeptConnection>,
    ) -> Attempt<'a> {
        Box::pin(Self::run(dial, progress))
    }
}

impl Prepare for IcmpSettings {
    fn prepare(
        &self,
        target: &Target,
        _ctx: &mut ProbeContext,
    ) -> Result<PreparedProbe, ProbeError> {
        // A socket now, so a host that forbids them is told at start, not per probe.
        ping_socket(target.address).map_err(|e| ProbeError::Host(not_allowed(&e)))?;
        Ok(PreparedProbe::new(IcmpEcho))
    }
}
