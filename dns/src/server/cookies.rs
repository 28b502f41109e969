//! DNS cookies (RFC 7873), server cookies as RFC 9018 makes them interoperable.
//!
//! A client sends its own 8-byte cookie; the server answers with it and a server cookie
//! that binds the client cookie and the client's address to a secret and a time. A client
//! that presents a server cookie it was given has proven it receives answers at the
//! address it claims, which a spoofer cannot: its answers are exempt from response rate
//! limiting. A query without a cookie is answered as before (cookies are never required).
//!
//! The secret is read from `cookies.secret_file` (so every replica behind one name accepts
//! the others' cookies) or drawn at start; a server cookie is valid for an hour (RFC 9018
//! 4.3) and a new one is sent with every answer. Secrets in `accepted_secret_files` are
//! accepted but never used to make a cookie: the rollover RFC 9018 describes (a new secret
//! accepted everywhere first, then made the one in use, the old one kept accepted for an
//! hour).

use std::net::IpAddr;
use std::time::SystemTime;

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};
use siphasher::sip::SipHasher24;
use std::hash::Hasher;

use super::config::CookiesConfig;

/// The COOKIE option's code.
const COOKIE: u16 = 10;
/// Server cookies older than this are not valid (RFC 9018 4.3: one hour).
const MAX_AGE: u32 = 3600;
/// Nor those from more than five minutes in the future (clock steps between replicas).
const MAX_AHEAD: u32 = 300;

/// What a query's COOKIE option said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CookieCheck {
    /// No cookie, or only the client's (a first contact), or a server cookie not ours or
    /// too old: answered, not exempt.
    Unproven,
    /// A server cookie we made for this client recently: exempt from rate limiting.
    Valid,
    /// A COOKIE option of a length RFC 7873 does not allow: FORMERR.
    Malformed,
}

/// The server's cookie secrets: the one cookies are made with, and those also accepted.
pub struct Cookies {
    secret: [u8; 16],
    accepted: Vec<[u8; 16]>,
}

impl Cookies {
    /// Cookies made with `secret` (16 bytes: SipHash-2-4's key), accepting no other
    /// (tests; the server loads them from its config).
    #[cfg(test)]
    pub fn new(secret: [u8; 16]) -> Cookies {
        Cookies {
            secret,
            accepted: Vec::new(),
        }
    }

    /// The cookies `config` asks for: the secret of its file, else one drawn now, and the
    /// accepted ones. Errors name the file (the field path by `field`), never its content.
    pub fn load(config: &CookiesConfig) -> Result<Cookies, (String, String)> {
        let secret = match &config.secret_file {
            Some(file) => read_secret(file).map_err(|e| ("cookies.secret_file".to_owned(), e))?,
            None => {
                let mut secret = [0u8; 16];
                ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut secret)
                    .map_err(|_| {
                        (
                            "cookies".to_owned(),
                            "cannot draw a cookie secret: the system has no randomness".to_owned(),
                        )
                    })?;
                secret
            }
        };
        let mut accepted = Vec::new();
        for (i, file) in config.accepted_secret_files.iter().enumerate() {
            let field = format!("cookies.accepted_secret_files[{i}]");
            accepted.push(read_secret(file).map_err(|e| (field, e))?);
        }
        Ok(Cookies { secret, accepted })
    }

    /// Checks the COOKIE option of `query` from `client` and, when there is one, puts the
    /// client's cookie and a fresh server cookie into `response`'s EDNS.
    pub fn answer(&self, query: &Message, response: &mut Message, client: IpAddr) -> CookieCheck {
        self.answer_at(query, response, client, unix_now)
    }

    fn answer_at(
        &self,
        query: &Message,
        response: &mut Message,
        client: IpAddr,
        now: impl FnOnce() -> u32,
    ) -> CookieCheck {
        let option = query.edns.as_ref().and_then(|e| e.option(EdnsCode::Cookie));
        let Some(EdnsOption::Unknown(_, data)) = option else {
            return CookieCheck::Unproven;
        };
        // RFC 7873 5.2.2: a client cookie alone (8), or with a server cookie of 8-32.
        if data.len() != 8 && !(16..=40).contains(&data.len()) {
            response.metadata.response_code = ResponseCode::FormErr;
            return CookieCheck::Malformed;
        }
        // The clock is read only for queries that carry a cookie.
        let now = now();
        let (client_cookie, server_cookie) = data.split_at(8);
        let check = if self.valid(client_cookie, server_cookie, client, now) {
            CookieCheck::Valid
        } else {
            CookieCheck::Unproven
        };
        if let Some(edns) = response.edns.as_mut() {
            let mut cookie = client_cookie.to_vec();
            cookie.extend_from_slice(&self.server_cookie(client_cookie, client, now));
            edns.options_mut()
                .insert(EdnsOption::Unknown(COOKIE, cookie));
        }
        check
    }

    /// A fresh server cookie, made with the secret in use.
    fn server_cookie(&self, client_cookie: &[u8], client: IpAddr, time: u32) -> [u8; 16] {
        made_with(&self.secret, client_cookie, client, time)
    }

    fn valid(&self, client_cookie: &[u8], server_cookie: &[u8], client: IpAddr, now: u32) -> bool {
        let Ok(given) = <[u8; 16]>::try_from(server_cookie) else {
            return false;
        };
        let time = u32::from_be_bytes([given[4], given[5], given[6], given[7]]);
        // Serial-number arithmetic (RFC 1982), as RFC 9018 asks: the clock may wrap.
        let age = now.wrapping_sub(time);
        let fresh = age <= MAX_AGE || time.wrapping_sub(now) <= MAX_AHEAD;
        fresh
            && given[0] == 1
            && std::iter::once(&self.secret)
                .chain(&self.accepted)
                .any(|secret| made_with(secret, client_cookie, client, time) == given)
    }
}

/// RFC 9018's server cookie made with `secret`: version 1, three reserved bytes, the time,
/// and the SipHash-2-4 of the client cookie, those 8 bytes and the client's address.
fn made_with(secret: &[u8; 16], client_cookie: &[u8], client: IpAddr, time: u32) -> [u8; 16] {
    let mut cookie = [0u8; 16];
    cookie[0] = 1;
    cookie[4..8].copy_from_slice(&time.to_be_bytes());
    let mut h = SipHasher24::new_with_key(secret);
    h.write(client_cookie);
    h.write(&cookie[..8]);
    match client {
        IpAddr::V4(a) => h.write(&a.octets()),
        IpAddr::V6(a) => h.write(&a.octets()),
    }
    cookie[8..].copy_from_slice(&h.finish().to_be_bytes());
    cookie
}

/// A secret file's 16 bytes, written as 32 hex digits; errors name the file, never its
/// content.
fn read_secret(file: &std::path::Path) -> Result<[u8; 16], String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let hex = text.trim();
    let mut secret = [0u8; 16];
    let parsed = hex.len() == 32
        && secret.iter_mut().enumerate().all(|(i, byte)| {
            u8::from_str_radix(hex.get(2 * i..2 * i + 2).unwrap_or("x"), 16)
                .map(|b| *byte = b)
                .is_ok()
        });
    if !parsed {
        return Err(format!(
                "{}: must hold 32 hex digits (128 bits; e.g. `openssl rand -hex 16`), content not shown",
                file.display()
            ));
    }
    Ok(secret)
}

fn unix_now() -> u32 {
    ho_engine::clock::since_epoch(SystemTime::now()).as_secs() as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::{Edns, MessageType, OpCode};

    fn query_with(cookie: Option<Vec<u8>>) -> Message {
        let mut m = Message::query();
        let mut edns = Edns::new();
        if let Some(c) = cookie {
            edns.options_mut().insert(EdnsOption::Unknown(COOKIE, c));
        }
        m.set_edns(edns);
        m
    }

    fn response() -> Message {
        let mut m = Message::response(1, OpCode::Query);
        m.metadata.message_type = MessageType::Response;
        m.set_edns(Edns::new());
        m
    }

    fn sent(m: &Message) -> Vec<u8> {
        match m.edns.as_ref().and_then(|e| e.option(EdnsCode::Cookie)) {
            Some(EdnsOption::Unknown(_, data)) => data.clone(),
            other => panic!("no cookie sent: {other:?}"),
        }
    }

    #[test]
    fn a_server_cookie_given_proves_the_client_until_it_ages_or_moves() {
        let cookies = Cookies::new(*b"0123456789abcdef");
        let client: IpAddr = "192.0.2.1".parse().unwrap();
        let now = 1_800_000_000;
        let mut first = response();
        let check = cookies.answer_at(
            &query_with(Some(b"clientck".to_vec())),
            &mut first,
            client,
            || now,
        );
        assert_eq!(check, CookieCheck::Unproven, "a first contact");
        let given = sent(&first);
        assert_eq!(
            (given.len(), &given[..8], given[8]),
            (24, &b"clientck"[..], 1)
        );

        let again = |client: IpAddr, at: u32, cookie: &[u8]| {
            cookies.answer_at(
                &query_with(Some(cookie.to_vec())),
                &mut response(),
                client,
                || at,
            )
        };
        assert_eq!(again(client, now + 10, &given), CookieCheck::Valid);
        assert_eq!(again(client, now + 3_600, &given), CookieCheck::Valid);
        assert_eq!(
            again(client, now + 3_601, &given),
            CookieCheck::Unproven,
            "too old"
        );
        assert_eq!(
            again(client, now - 300, &given),
            CookieCheck::Valid,
            "clock behind"
        );
        assert_eq!(again(client, now - 301, &given), CookieCheck::Unproven);
        let elsewhere: IpAddr = "192.0.2.2".parse().unwrap();
        assert_eq!(
            again(elsewhere, now, &given),
            CookieCheck::Unproven,
            "another address"
        );
        let mut forged = given.clone();
        forged[23] ^= 1;
        assert_eq!(
            again(client, now, &forged),
            CookieCheck::Unproven,
            "forged hash"
        );
        let other_secret = Cookies::new(*b"fedcba9876543210");
        assert_eq!(
            other_secret.answer_at(&query_with(Some(given)), &mut response(), client, || now),
            CookieCheck::Unproven
        );
    }

    /// RFC 9018's rollover: cookies made with an accepted secret stay valid; new ones are
    /// made with the secret in use only.
    #[test]
    fn cookies_of_an_accepted_secret_stay_valid_through_a_rollover() {
        let client: IpAddr = "192.0.2.1".parse().unwrap();
        let now = 1_800_000_000;
        let old = Cookies::new(*b"old-secret-16-by");
        let mut r = response();
        old.answer_at(
            &query_with(Some(b"clientck".to_vec())),
            &mut r,
            client,
            || now,
        );
        let given = sent(&r);
        let check = |cookies: &Cookies| {
            let mut r = response();
            let check = cookies.answer_at(&query_with(Some(given.clone())), &mut r, client, || now);
            (
                check,
                sent(&r)[8..] == made_with(&cookies.secret, b"clientck", client, now),
            )
        };
        let rolled = Cookies {
            secret: *b"new-secret-16-by",
            accepted: vec![*b"old-secret-16-by"],
        };
        assert_eq!(
            check(&rolled),
            (CookieCheck::Valid, true),
            "old accepted, new made"
        );
        let dropped = Cookies::new(*b"new-secret-16-by");
        assert_eq!(check(&dropped), (CookieCheck::Unproven, true));
    }

    #[test]
    fn no_cookie_is_answered_as_before_and_a_bad_length_is_formerr() {
        let cookies = Cookies::new([7; 16]);
        let client: IpAddr = "2001:db8::1".parse().unwrap();
        let mut plain = response();
        assert_eq!(
            cookies.answer(&query_with(None), &mut plain, client),
            CookieCheck::Unproven
        );
        assert!(plain
            .edns
            .as_ref()
            .unwrap()
            .option(EdnsCode::Cookie)
            .is_none());
        for len in [0, 7, 9, 15, 41] {
            let mut r = response();
            let check = cookies.answer(&query_with(Some(vec![1; len])), &mut r, client);
            assert_eq!(check, CookieCheck::Malformed, "{len} bytes");
            assert_eq!(r.metadata.response_code, ResponseCode::FormErr);
        }
    }
}
