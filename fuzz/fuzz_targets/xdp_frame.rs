//! Any bytes as an Ethernet frame through the XDP path's parser: a frame is refused or read
//! as a UDP query whose message lies inside it, never a panic; and the answer written into
//! a taken frame is itself a well-formed UDP frame, addressed back to the client, whose
//! checksums hold and whose payload is exactly the answer.
#![no_main]

use ho_dns::server::xdp::frame::Query;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&answer_len, frame)) = data.split_last() else { return };
    let Some(query) = Query::find(frame) else { return };
    assert!(query.message.end <= frame.len(), "the message lies inside the frame");
    let answer: Vec<u8> = (0..answer_len).collect();
    let mut out = frame.to_vec();
    out.resize(frame.len() + 64, 0);
    let Some(n) = query.answer_in(&mut out, &answer) else { return };
    assert!(n <= out.len());
    let back = Query::find(&out[..n]).expect("an answer frame parses as UDP");
    assert_eq!(&out[back.message.clone()], &answer[..], "the payload is the answer");
    assert_eq!(out[..6], frame[6..12], "sent to the client's MAC");
    assert!(checksums_hold(&out[..n]), "checksums of the answer frame");
});

/// The IPv4 header checksum and the UDP checksum (over its pseudo-header) both sum to
/// all ones.
fn checksums_hold(frame: &[u8]) -> bool {
    let v6 = frame[12..14] == [0x86, 0xdd];
    let (ip_len, src, dst) = if v6 { (40, 8..24, 24..40) } else { (20, 12..16, 16..20) };
    let ip = &frame[14..14 + ip_len];
    if !v6 && sum(&[ip]) != 0xffff {
        return false;
    }
    let udp_len = usize::from(u16::from_be_bytes([frame[14 + ip_len + 4], frame[14 + ip_len + 5]]));
    let udp = &frame[14 + ip_len..14 + ip_len + udp_len];
    let proto_len: Vec<u8> = if v6 {
        [(udp_len as u32).to_be_bytes(), [0, 0, 0, 17]].concat()
    } else {
        vec![0, 17, (udp_len >> 8) as u8, udp_len as u8]
    };
    sum(&[&ip[src], &ip[dst], &proto_len, udp]) == 0xffff
}

/// The ones'-complement sum (RFC 1071) of the pieces, each of even length but the last.
fn sum(pieces: &[&[u8]]) -> u16 {
    let mut total: u32 = 0;
    for piece in pieces {
        for pair in piece.chunks(2) {
            let word = u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]);
            total += u32::from(word);
        }
    }
    while total > 0xffff {
        total = (total & 0xffff) + (total >> 16);
    }
    total as u16
}
