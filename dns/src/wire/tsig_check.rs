//! TSIG (RFC 8945) on the server side: a signed request is verified with the key it
//! names (`transfer.tsig` or `reports.tsig`), and every message answering it is signed,
//! each after the first chained to the one before (5.3.1), as a zone transfer's many
//! messages are.

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::rdata::tsig::{make_tsig_record, TsigError, TSIG};
use hickory_proto::rr::{Record, TSigResponseContext, TSigner};
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder};

/// What a request's TSIG said.
pub enum Check {
    /// No TSIG.
    Unsigned,
    /// Signed with our key, within its time window: answers get signed.
    Signed(Signed),
    /// Signed, but not acceptably: this (NOTAUTH) answer, and nothing else.
    Refused(Vec<u8>),
}

/// A verified request: what its answers are signed with.
pub struct Signed {
    signer: TSigner,
    request_mac: Vec<u8>,
    id: u16,
}

/// Checks the TSIG of `request` (parsed as `query`) against the one of `keys` it names, at
/// `now` (Unix seconds).
pub fn check(keys: &[&TSigner], request: &[u8], query: &Message, now: u64) -> Check {
    let Some(tsig) = query.signature() else {
        return Check::Unsigned;
    };
    let id = query.metadata.id;
    let refuse = |context: TSigResponseContext| {
        let mut response = Message::response(id, query.metadata.op_code);
        response.queries.clone_from(&query.queries);
        response.metadata.response_code = ResponseCode::NotAuth;
        let bytes = response.to_vec().unwrap_or_default();
        Check::Refused(
            context
                .sign(&bytes)
                .ok()
                .and_then(|r| append(bytes.clone(), &r))
                .unwrap_or(bytes),
        )
    };
    let named = keys
        .iter()
        .find(|k| *k.signer_name() == tsig.name && *k.algorithm() == tsig.data.algorithm);
    let Some(&key) = named else {
        return refuse(TSigResponseContext::unknown_key(id, now, tsig.name.clone()));
    };
    match key.verify_message_byte(request, None, true) {
        Err(_) => refuse(TSigResponseContext::bad_signature(id, now, key.clone())),
        Ok((mac, _, window)) if !window.contains(&now) => refuse(TSigResponseContext::new(
            id,
            now,
            key.clone(),
            mac,
            Some(TsigError::BadTime),
        )),
        Ok((mac, _, _)) => Check::Signed(Signed {
            signer: key.clone(),
            request_mac: mac,
            id,
        }),
    }
}

impl Signed {
    /// The name of the key the request was signed with.
    pub fn key_name(&self) -> &hickory_proto::rr::Name {
        self.signer.signer_name()
    }

    /// `messages` (in the order they are sent), each with its TSIG; `None` if one could
    /// not be signed.
    pub fn sign(&self, messages: Vec<Vec<u8>>, now: u64) -> Option<Vec<Vec<u8>>> {
        let mut previous: Option<Vec<u8>> = None;
        let mut signed = Vec::with_capacity(messages.len());
        for message in messages {
            let record = match &previous {
                None => *TSigResponseContext::new(
                    self.id,
                    now,
                    self.signer.clone(),
                    self.request_mac.clone(),
                    None,
                )
                .sign(&message)
                .ok()?,
                Some(prior) => self.subsequent(prior, &message, now)?,
            };
            previous = Some(record.data.mac.clone());
            signed.push(append(message, &record)?);
        }
        Some(signed)
    }

    /// The TSIG of a message after the first (RFC 8945 5.3.1): the MAC covers the prior
    /// MAC, the message and the timers only.
    fn subsequent(&self, prior: &[u8], message: &[u8], now: u64) -> Option<Record<TSIG>> {
        let mut tbs = Vec::with_capacity(prior.len() + message.len() + 10);
        tbs.extend_from_slice(&u16::try_from(prior.len()).ok()?.to_be_bytes());
        tbs.extend_from_slice(prior);
        tbs.extend_from_slice(message);
        tbs.extend_from_slice(&now.to_be_bytes()[2..]);
        tbs.extend_from_slice(&self.signer.fudge().to_be_bytes());
        let mac = self.signer.sign(&tbs).ok()?;
        let tsig = TSIG::new(
            self.signer.algorithm().clone(),
            now,
            self.signer.fudge(),
            mac,
            self.id,
            None,
            Vec::new(),
        );
        Some(make_tsig_record(self.signer.signer_name().clone(), tsig))
    }
}

/// `message` with `record` added at the end of its additional section.
fn append(mut message: Vec<u8>, record: &Record<TSIG>) -> Option<Vec<u8>> {
    let mut encoded = Vec::with_capacity(128);
    record.emit(&mut BinEncoder::new(&mut encoded)).ok()?;
    let count = u16::from_be_bytes([*message.get(10)?, *message.get(11)?]);
    message[10..12].copy_from_slice(&count.checked_add(1)?.to_be_bytes());
    message.extend_from_slice(&encoded);
    Some(message)
}
