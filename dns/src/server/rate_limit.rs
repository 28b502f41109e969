//! Response rate limiting (RRL) for answers over UDP, as BIND, Knot and NSD ship it.
//!
//! An authoritative server on the internet answers whoever a query claims to come from, so
//! spoofed queries turn it into a reflector aimed at their victim. Each client network
//! (`/24` for IPv4, `/56` for IPv6 by default) gets at most `responses_per_second` identical
//! answers (same name, type and response code) per second, after a burst of as many; past
//! that, answers are dropped, except every `slip`-th, which is sent truncated (TC, no
//! records) so a real client behind that network retries over TCP, which cannot be
//! spoofed. TCP is never limited.
//!
//! The accounting table has a fixed size: a flood of distinct sources or names overwrites
//! slots (each starting with a full burst) and never grows memory.

use std::hash::{BuildHasher, Hasher};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Instant;

use ipnet::IpNet;

use super::config::RateLimitConfig;

/// Shards of the table, each behind its own lock so the serving threads rarely meet.
const SHARDS: usize = 16;
/// Slots per shard: 16 x 1,024 answers tracked at once, ~0.5 MB.
const SLOTS: usize = 1024;

/// What to do with one answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Within the limit: send it.
    Send,
    /// Over the limit, this one slips through truncated (TC) so the client retries on TCP.
    Slip,
    /// Over the limit: not sent.
    Drop,
}

/// The limiter of one `dns_server` sink.
pub struct RateLimiter {
    rate: f64,
    slip: u32,
    ipv4_prefix: u8,
    ipv6_prefix: u8,
    exempt: Vec<IpNet>,
    hasher: std::collections::hash_map::RandomState,
    shards: Box<[Mutex<Box<[Slot]>>]>,
}

/// One answer's account: a token bucket and the count of answers it limited.
#[derive(Clone, Copy, Default)]
struct Slot {
    key: u64,
    tokens: f64,
    at: Option<Instant>,
    limited: u32,
}

impl RateLimiter {
    /// The limiter `config` asks for (its fields were checked with the sink's settings).
    pub fn new(config: &RateLimitConfig) -> RateLimiter {
        RateLimiter {
            rate: f64::from(config.responses_per_second),
            slip: config.slip,
            ipv4_prefix: config.ipv4_prefix,
            ipv6_prefix: config.ipv6_prefix,
            exempt: config
                .exempt
                .iter()
                .filter_map(|n| n.parse::<IpNet>().ok())
                .collect(),
            hasher: std::collections::hash_map::RandomState::new(),
            shards: (0..SHARDS)
                .map(|_| Mutex::new(vec![Slot::default(); SLOTS].into_boxed_slice()))
                .collect(),
        }
    }

    /// Whether the answer to `request` with response code `rcode` may go to `client` now.
    pub fn check(&self, client: IpAddr, request: &[u8], rcode: &str, now: Instant) -> Verdict {
        if self.exempt.iter().any(|net| net.contains(&client)) {
            return Verdict::Send;
        }
        let key = self.key(client, request, rcode);
        let shard = (key as usize) % SHARDS;
        let index = ((key >> 8) as usize) % SLOTS;
        let mut slots = self.shards[shard].lock().unwrap_or_else(|e| e.into_inner());
        let slot = &mut slots[index];
        if slot.key != key || slot.at.is_none() {
            *slot = Slot {
                key,
                tokens: self.rate,
                at: Some(now),
                limited: 0,
            };
        }
        let elapsed = slot
            .at
            .map_or(0.0, |at| now.saturating_duration_since(at).as_secs_f64());
        slot.tokens = (slot.tokens + elapsed * self.rate).min(self.rate);
        slot.at = Some(now);
        if slot.tokens >= 1.0 {
            slot.tokens -= 1.0;
            return Verdict::Send;
        }
        slot.limited = slot.limited.wrapping_add(1);
        if self.slip > 0 && slot.limited.is_multiple_of(self.slip) {
            Verdict::Slip
        } else {
            Verdict::Drop
        }
    }

    /// The account an answer belongs to: the client's network, the question (name case
    /// folded, type and class) and the response code.
    fn key(&self, client: IpAddr, request: &[u8], rcode: &str) -> u64 {
        let prefix = match client {
            IpAddr::V4(_) => self.ipv4_prefix,
            IpAddr::V6(_) => self.ipv6_prefix,
        };
        let network = IpNet::new(client, prefix).map_or(client, |n| n.network());
        let mut h = self.hasher.build_hasher();
        match network {
            IpAddr::V4(a) => h.write(&a.octets()),
            IpAddr::V6(a) => h.write(&a.octets()),
        }
        for b in question(request) {
            h.write_u8(b.to_ascii_lowercase());
        }
        h.write(rcode.as_bytes());
        h.finish()
    }
}

/// The question section of a message (name, type, class), or nothing when the message is
/// too short to hold one (the answer then counts by network and response code only).
fn question(message: &[u8]) -> &[u8] {
    let end = question_end(message).unwrap_or(12.min(message.len()));
    &message[12.min(end)..end]
}

/// Where the first question ends: its labels, the root label, type and class.
pub(super) fn question_end(message: &[u8]) -> Option<usize> {
    let mut at = 12;
    loop {
        let len = usize::from(*message.get(at)?);
        if len == 0 {
            at += 1;
            break;
        }
        // Compression pointers have no place in a question; a label is at most 63 bytes.
        if len > 63 {
            return None;
        }
        at += 1 + len;
    }
    let end = at + 4;
    (end <= message.len()).then_some(end)
}

/// `reply` cut to its header and question, with TC set and no records: the slipped form
/// of a limited answer.
pub fn truncated(reply: &[u8]) -> Vec<u8> {
    let end = question_end(reply).unwrap_or(12.min(reply.len()));
    let mut out = reply[..end].to_vec();
    if out.len() >= 12 {
        out[2] |= 0x02;
        out[6..12].fill(0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn config(rate: u32, slip: u32) -> RateLimitConfig {
        RateLimitConfig {
            responses_per_second: rate,
            slip,
            ipv4_prefix: 24,
            ipv6_prefix: 56,
            exempt: vec!["10.9.0.0/16".into()],
        }
    }

    /// A query for `name` A, as a client writes it.
    fn query(name: &str) -> Vec<u8> {
        let mut m = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for label in name.split('.') {
            m.push(label.len() as u8);
            m.extend_from_slice(label.as_bytes());
        }
        m.extend_from_slice(&[0, 0, 1, 0, 1]);
        m
    }

    fn verdicts(l: &RateLimiter, client: &str, name: &str, n: usize, now: Instant) -> Vec<Verdict> {
        (0..n)
            .map(|_| l.check(client.parse().unwrap(), &query(name), "NOERROR", now))
            .collect()
    }

    #[test]
    fn a_burst_then_every_second_limited_answer_slips() {
        let l = RateLimiter::new(&config(3, 2));
        let now = Instant::now();
        use Verdict::*;
        assert_eq!(
            verdicts(&l, "192.0.2.7", "api.example.org", 7, now),
            [Send, Send, Send, Drop, Slip, Drop, Slip]
        );
        // The same network, another host: the same account. Names differ only in case.
        assert_eq!(
            verdicts(&l, "192.0.2.200", "API.example.org", 1, now),
            [Drop]
        );
        // Another name, another network, an exempt network: their own accounts.
        assert_eq!(verdicts(&l, "192.0.2.7", "www.example.org", 1, now), [Send]);
        assert_eq!(
            verdicts(&l, "198.51.100.1", "api.example.org", 1, now),
            [Send]
        );
        assert_eq!(
            verdicts(&l, "10.9.3.4", "api.example.org", 9, now),
            [Send; 9]
        );
        // Tokens come back at the configured rate (2.1 after 700 ms); the count of limited
        // answers goes on (this is the sixth), so the slip rhythm holds across refills.
        let later = now + Duration::from_millis(700);
        assert_eq!(
            verdicts(&l, "192.0.2.7", "api.example.org", 4, later),
            [Send, Send, Slip, Drop]
        );
    }

    #[test]
    fn slip_zero_drops_and_slip_one_always_truncates() {
        let now = Instant::now();
        let drop_all = RateLimiter::new(&config(1, 0));
        assert_eq!(
            verdicts(&drop_all, "2001:db8::1", "a.example.org", 3, now),
            [Verdict::Send, Verdict::Drop, Verdict::Drop]
        );
        // 2001:db8:0:ff::1 shares 2001:db8::1's /56; 2001:db8:0:100::1 does not.
        assert_eq!(
            verdicts(&drop_all, "2001:db8:0:ff::1", "a.example.org", 1, now),
            [Verdict::Drop]
        );
        assert_eq!(
            verdicts(&drop_all, "2001:db8:0:100::1", "a.example.org", 1, now),
            [Verdict::Send]
        );
        let slip_all = RateLimiter::new(&config(1, 1));
        assert_eq!(
            verdicts(&slip_all, "192.0.2.1", "a.example.org", 3, now),
            [Verdict::Send, Verdict::Slip, Verdict::Slip]
        );
    }

    #[test]
    fn a_slipped_answer_is_the_header_and_question_with_tc() {
        let mut reply = query("api.example.org");
        reply[2] |= 0x80; // a response
        reply[6..8].copy_from_slice(&[0, 1]); // one answer record follows
        let question = reply.len();
        reply.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4, 192, 0, 2, 1]);
        let cut = truncated(&reply);
        assert_eq!(cut.len(), question);
        assert_eq!(cut[2] & 0x02, 0x02, "TC set");
        assert_eq!(
            &cut[4..12],
            &[0, 1, 0, 0, 0, 0, 0, 0],
            "one question, no records"
        );
        assert_eq!(truncated(&[1, 2, 3]), [1, 2, 3], "too short to touch");
    }
}
