//! Any bytes as a run of UDP queries, from a few clients, through the DNS server's one
//! transport-neutral `respond` (what the sockets and the XDP path call). For every answer:
//! no panic; it parses; it carries the query's id; it is never larger than the client may
//! receive (512 bytes, or what its EDNS offers up to `max_udp_payload`); a query with a
//! well-formed client cookie gets it back with a server cookie (unless the EDNS version is
//! one we do not speak), and only a query carrying a full server cookie counts as proven. After the run, the first query that got a full answer is repeated from
//! the same client: rate limiting lets at most `responses_per_second` of those through in
//! full and truncates some of the rest.
#![no_main]

use std::net::IpAddr;

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};
use ho_dns::server::fuzzing::{Responder, MAX_UDP_PAYLOAD, RESPONSES_PER_SECOND};
use libfuzzer_sys::fuzz_target;

const CLIENTS: [&str; 4] = ["192.0.2.10", "192.0.2.20", "198.51.100.1", "2001:db8::10"];

fuzz_target!(|data: &[u8]| {
    let server = Responder::new();
    let mut first_full: Option<(Vec<u8>, IpAddr)> = None;
    let mut rest = data;
    for _ in 0..16 {
        let [who, hi, lo, tail @ ..] = rest else { break };
        let len = usize::from(u16::from_be_bytes([*hi, *lo])).min(tail.len());
        let (request, next) = tail.split_at(len);
        rest = next;
        let client: IpAddr = CLIENTS[usize::from(*who) % CLIENTS.len()].parse().unwrap();
        let Some(answer) = server.respond(request, client) else { continue };
        check(request, &answer.bytes, answer.proven_client);
        if first_full.is_none() && !answer.proven_client && !truncated(&answer.bytes) {
            first_full = Some((request.to_vec(), client));
        }
    }
    if let Some((request, client)) = first_full {
        let mut full = 0;
        let mut slipped = 0;
        for _ in 0..RESPONSES_PER_SECOND + 3 {
            match server.respond(&request, client) {
                Some(a) if a.proven_client => return,
                Some(a) if truncated(&a.bytes) => slipped += 1,
                Some(_) => full += 1,
                None => {}
            }
        }
        assert!(full <= RESPONSES_PER_SECOND, "{full} full answers at one instant");
        assert!(slipped > 0, "no limited answer slipped (truncated) with slip = 2");
    }
});

fn truncated(answer: &[u8]) -> bool {
    answer.len() > 2 && answer[2] & 0x02 != 0
}

fn check(request: &[u8], answer: &[u8], proven: bool) {
    let response = Message::from_vec(answer).expect("every answer parses");
    if request.len() >= 2 {
        assert_eq!(answer[..2], request[..2], "the answer carries the query's id");
    }
    let query = Message::from_vec(request).ok();
    let edns = query.as_ref().and_then(|q| q.edns.as_ref());
    let limit = edns.map_or(512, |e| e.max_payload().clamp(512, MAX_UDP_PAYLOAD));
    assert!(
        answer.len() <= usize::from(limit),
        "{} bytes to a client that takes {limit}",
        answer.len()
    );
    let cookie = edns.and_then(|e| match e.option(EdnsCode::Cookie) {
        Some(EdnsOption::Unknown(_, data)) => Some(data.clone()),
        _ => None,
    });
    if proven {
        assert!(
            cookie.as_ref().is_some_and(|c| c.len() == 24),
            "a client proven without a full server cookie"
        );
    }
    let well_formed = cookie
        .as_ref()
        .is_some_and(|c| c.len() == 8 || (16..=40).contains(&c.len()));
    // FORMERR (a malformed cookie among other things) and BADVERS (an EDNS version we do
    // not speak: the options are not read) answer without one; BADVERS is code 16, which
    // hickory reads back as BADSIG.
    let answered_edns = !matches!(
        response.metadata.response_code,
        ResponseCode::FormErr | ResponseCode::BADVERS | ResponseCode::BADSIG
    );
    if well_formed && !truncated(answer) && answered_edns {
        let sent = response.edns.as_ref().and_then(|e| match e.option(EdnsCode::Cookie) {
            Some(EdnsOption::Unknown(_, data)) => Some(data.clone()),
            _ => None,
        });
        let client_cookie = &cookie.unwrap()[..8];
        assert!(
            sent.is_some_and(|s| s.len() == 24 && &s[..8] == client_cookie),
            "a well-formed client cookie not answered with a server cookie"
        );
    }
}
