//! The Ethernet, IP and UDP headers around a query taken from the XDP socket, and those of
//! its answer: the socket hands over whole frames and sends whole frames, so what the
//! kernel's UDP and IP layers do for a socket (find the payload, swap the addresses, sum
//! the checksums) is done here, for the shapes the filter program lets through (IPv4
//! without options and not fragmented, IPv6 with UDP as the first next header).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::Range;

const ETH: usize = 14;
const IPV4: usize = 20;
const IPV6: usize = 40;
const UDP: usize = 8;
const PROTO_UDP: u8 = 17;
/// Hop limit of answers, as Linux's default.
const TTL: u8 = 64;

/// A query found in a frame: who asked, and where its DNS message lies.
#[derive(Debug, PartialEq, Eq)]
pub struct Query {
    /// The client's address (the answer's destination).
    pub client: IpAddr,
    /// The DNS message's bytes within the frame.
    pub message: Range<usize>,
    v6: bool,
}

impl Query {
    /// The UDP query in `frame`, or `None` for anything else (the filter program passes only
    /// UDP to the served ports; this checks again, and checks the lengths it relies on).
    pub fn find(frame: &[u8]) -> Option<Query> {
        let ethertype = u16::from_be_bytes(frame.get(12..ETH)?.try_into().ok()?);
        let (v6, udp_at, client) = match ethertype {
            0x0800 => {
                let ip = frame.get(ETH..ETH + IPV4)?;
                let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
                let fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0;
                if ip[0] != 0x45 || ip[9] != PROTO_UDP || fragment || ETH + total > frame.len() {
                    return None;
                }
                let src: [u8; 4] = ip[12..16].try_into().ok()?;
                (false, ETH + IPV4, IpAddr::V4(Ipv4Addr::from(src)))
            }
            0x86dd => {
                let ip = frame.get(ETH..ETH + IPV6)?;
                let payload = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
                if ip[0] >> 4 != 6 || ip[6] != PROTO_UDP || ETH + IPV6 + payload > frame.len() {
                    return None;
                }
                let src: [u8; 16] = ip[8..24].try_into().ok()?;
                (true, ETH + IPV6, IpAddr::V6(Ipv6Addr::from(src)))
            }
            _ => return None,
        };
        let udp = frame.get(udp_at..udp_at + UDP)?;
        let length = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
        if length < UDP || udp_at + length > frame.len() {
            return None;
        }
        Some(Query {
            client,
            message: udp_at + UDP..udp_at + length,
            v6,
        })
    }

    /// Turns the query's frame into its answer's: `message` after headers addressed back to
    /// the client (Ethernet, IP and UDP source and destination swapped). `frame` holds the
    /// query's frame and has room for the answer; returns the answer frame's length, or
    /// `None` when `message` does not fit.
    pub fn answer_in(&self, frame: &mut [u8], message: &[u8]) -> Option<usize> {
        let udp_at = self.message.start - UDP;
        let end = self.message.start + message.len();
        if end > frame.len() {
            return None;
        }
        let udp_len = u16::try_from(UDP + message.len()).ok()?;
        let (mac, ip) = frame.split_at_mut(ETH);
        let (mut dst, mut src) = ([0u8; 6], [0u8; 6]);
        dst.copy_from_slice(&mac[0..6]);
        src.copy_from_slice(&mac[6..12]);
        mac[0..6].copy_from_slice(&src);
        mac[6..12].copy_from_slice(&dst);
        let mut sum = Sum::default();
        if self.v6 {
            reply_ipv6(ip, udp_len, &mut sum);
        } else {
            let total = u16::try_from(IPV4 + UDP + message.len()).ok()?;
            reply_ipv4(ip, udp_len, total, &mut sum);
        }
        if self.v6 {
            sum.add(&[0, 0, 0, PROTO_UDP]);
        }
        let udp = &mut frame[udp_at..end];
        let (ports, rest) = udp.split_at_mut(4);
        let (client_port, our_port) = ([ports[0], ports[1]], [ports[2], ports[3]]);
        ports[0..2].copy_from_slice(&our_port);
        ports[2..4].copy_from_slice(&client_port);
        rest[0..2].copy_from_slice(&udp_len.to_be_bytes());
        rest[2..4].copy_from_slice(&[0, 0]);
        rest[4..].copy_from_slice(message);
        sum.add(udp);
        // A UDP checksum that sums to zero is sent as all ones (zero means "none").
        let checksum = match sum.finish() {
            0 => 0xffff,
            c => c,
        };
        udp[6..8].copy_from_slice(&checksum.to_be_bytes());
        Some(end)
    }
}

/// Rewrites an IPv6 header in place to answer the query it carried (`udp_len`: the
/// answer's UDP length), adding the UDP pseudo-header's addresses and length to `sum`.
fn reply_ipv6(ip: &mut [u8], udp_len: u16, sum: &mut Sum) {
    let (mut from, mut to) = ([0u8; 16], [0u8; 16]);
    from.copy_from_slice(&ip[24..40]);
    to.copy_from_slice(&ip[8..24]);
    ip[0..4].copy_from_slice(&[0x60, 0, 0, 0]);
    ip[4..6].copy_from_slice(&udp_len.to_be_bytes());
    ip[6] = PROTO_UDP;
    ip[7] = TTL;
    ip[8..24].copy_from_slice(&from);
    ip[24..40].copy_from_slice(&to);
    sum.add(&from);
    sum.add(&to);
    sum.add(&u32::from(udp_len).to_be_bytes());
}

/// Rewrites an IPv4 header in place to answer the query it carried (`total`: the answer
/// packet's length), with its own checksum; adds the UDP pseudo-header to `sum`.
fn reply_ipv4(ip: &mut [u8], udp_len: u16, total: u16, sum: &mut Sum) {
    let (mut from, mut to) = ([0u8; 4], [0u8; 4]);
    from.copy_from_slice(&ip[16..20]);
    to.copy_from_slice(&ip[12..16]);
    let header = &mut ip[..IPV4];
    header[0] = 0x45;
    header[1] = 0;
    header[2..4].copy_from_slice(&total.to_be_bytes());
    // Identification 0 and Don't Fragment: answers are kept under the path MTU
    // (`max_udp_payload`), as the kernel does for a UDP socket's.
    header[4..8].copy_from_slice(&[0, 0, 0x40, 0]);
    header[8] = TTL;
    header[9] = PROTO_UDP;
    header[10..12].copy_from_slice(&[0, 0]);
    header[12..16].copy_from_slice(&from);
    header[16..20].copy_from_slice(&to);
    let mut ip_sum = Sum::default();
    ip_sum.add(header);
    header[10..12].copy_from_slice(&ip_sum.finish().to_be_bytes());
    sum.add(&from);
    sum.add(&to);
    sum.add(&[0, PROTO_UDP]);
    sum.add(&udp_len.to_be_bytes());
}

/// The Internet checksum (RFC 1071) over pieces added in order; every piece but the last
/// has an even length, as here.
#[derive(Default)]
struct Sum(u64);

impl Sum {
    fn add(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(2);
        for w in &mut words {
            self.0 += u64::from(u16::from_be_bytes([w[0], w[1]]));
        }
        if let [last] = words.remainder() {
            self.0 += u64::from(*last) << 8;
        }
    }

    fn finish(&self) -> u16 {
        let mut s = self.0;
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame as a client's kernel sends it: Ethernet, IPv4 or IPv6, UDP, `message`.
    fn query_frame(v6: bool, message: &[u8]) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
        let udp_len = (UDP + message.len()) as u16;
        if v6 {
            f.extend([0x86, 0xdd, 0x60, 0, 0, 0]);
            f.extend(udp_len.to_be_bytes());
            f.extend([PROTO_UDP, 64]);
            f.extend(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2).octets());
            f.extend(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1).octets());
        } else {
            f.extend([0x08, 0x00, 0x45, 0]);
            f.extend((28 + message.len() as u16).to_be_bytes());
            f.extend([
                0x12, 0x34, 0, 0, 64, PROTO_UDP, 0, 0, 192, 0, 2, 2, 192, 0, 2, 1,
            ]);
        }
        f.extend(40000u16.to_be_bytes());
        f.extend(53u16.to_be_bytes());
        f.extend(udp_len.to_be_bytes());
        f.extend([0, 0]);
        f.extend(message);
        f
    }

    /// Sums a whole header (with its checksum field filled in): a right checksum sums to 0.
    fn verifies(pieces: &[&[u8]]) -> bool {
        let mut s = Sum::default();
        for p in pieces {
            s.add(p);
        }
        s.finish() == 0
    }

    #[test]
    fn an_ipv4_answer_goes_back_to_the_client_with_checksums_a_receiver_accepts() {
        let mut frame = query_frame(false, b"query");
        let q = Query::find(&frame).expect("a query");
        assert_eq!(q.client, IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)));
        assert_eq!(&frame[q.message.clone()], b"query");
        frame.resize(256, 0);
        let n = q.answer_in(&mut frame, b"the answer").expect("fits");
        let f = &frame[..n];
        assert_eq!(n, ETH + IPV4 + UDP + 10);
        assert_eq!(&f[0..12], &[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
        assert_eq!(&f[26..34], &[192, 0, 2, 1, 192, 0, 2, 2]);
        assert_eq!(u16::from_be_bytes([f[16], f[17]]), 38);
        assert!(verifies(&[&f[14..34]]), "IPv4 header checksum");
        assert_eq!(&f[34..38], &[0, 53, 0x9c, 0x40]);
        let pseudo = [&f[26..34], &[0, PROTO_UDP, 0, 18][..], &f[34..]];
        assert!(verifies(&pseudo), "UDP checksum");
        assert_eq!(&f[42..], b"the answer");
    }

    #[test]
    fn an_ipv6_answer_carries_the_checksum_ipv6_requires() {
        let mut frame = query_frame(true, b"q");
        let q = Query::find(&frame).expect("a query");
        assert_eq!(
            q.client,
            IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2))
        );
        frame.resize(256, 0);
        let n = q.answer_in(&mut frame, b"odd").expect("fits");
        let f = &frame[..n];
        assert_eq!(
            &f[22..38],
            &Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1).octets()
        );
        assert_eq!(
            &f[38..54],
            &Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2).octets()
        );
        let udp_checksum = u16::from_be_bytes([f[60], f[61]]);
        assert_ne!(udp_checksum, 0);
        let pseudo = [&f[22..54], &[0, 0, 0, 11, 0, 0, 0, PROTO_UDP][..], &f[54..]];
        assert!(
            verifies(&pseudo),
            "UDP checksum over the IPv6 pseudo-header"
        );
    }

    #[test]
    fn anything_but_a_whole_udp_query_is_not_taken() {
        let good = query_frame(false, b"query");
        let mut fragment = good.clone();
        fragment[20] = 0x20; // More Fragments
        let mut options = good.clone();
        options[14] = 0x46;
        let mut tcp = good.clone();
        tcp[23] = 6;
        let mut long_udp = good.clone();
        long_udp[39] = 200;
        for (what, frame) in [
            ("a fragment", &fragment),
            ("IP options", &options),
            ("TCP", &tcp),
            ("a UDP length past the frame", &long_udp),
            ("a cut frame", &good[..30].to_vec()),
        ] {
            assert_eq!(Query::find(frame), None, "{what}");
        }
    }

    /// Frames are what the network sends: any bytes. A valid query with some of its bytes
    /// changed at random (a fixed seed) is taken or refused, never a panic, and an answer
    /// to what is taken is written within the frame.
    #[test]
    fn mangled_frames_are_refused_or_answered_never_a_panic() {
        let mut rng = fastrand::Rng::with_seed(0x9e37_79b9_7f4a_7c15);
        let mut next = || rng.u64(..);
        let mut taken = 0;
        for i in 0..20_000 {
            let mut frame = query_frame(i % 2 == 0, b"a query of some length");
            for _ in 0..(next() % 4 + 1) {
                let at = (next() % frame.len() as u64) as usize;
                frame[at] = next() as u8;
            }
            frame.truncate((next() % (frame.len() as u64 + 1)) as usize);
            if let Some(q) = Query::find(&frame) {
                taken += 1;
                let len = frame.len();
                frame.resize(len + 64, 0);
                if let Some(n) = q.answer_in(&mut frame, b"answer") {
                    assert!(n <= frame.len());
                }
            }
        }
        assert!(taken > 0, "some mangled frames are still queries");
    }

    #[test]
    fn an_answer_that_does_not_fit_the_frame_is_refused() {
        let mut frame = query_frame(false, b"query");
        let q = Query::find(&frame).expect("a query");
        let len = frame.len();
        assert_eq!(q.answer_in(&mut frame, &[0; 64]), None);
        assert_eq!(frame.len(), len);
    }
}
