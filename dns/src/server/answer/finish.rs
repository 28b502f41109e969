//! The last stage: the response encoded, truncated (TC, answers dropped) when larger than
//! the client takes, marked with whether the client proved its address (a valid cookie),
//! and signed when the query was.

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;

use super::begin::Begun;
use super::Reply;
use crate::server::cookies::CookieCheck;
use crate::server::packet_cache::Variation;

/// The reply to a query that went through the stages: encoded and limited, `proven` with a
/// valid cookie when `cookie_counts`, signed when the query was.
pub(super) fn signed(mut query: Begun, cookie_counts: bool) -> Option<Reply> {
    let mut reply = finish(&mut query.response, query.qtype, query.limit)?;
    reply.proven_client = cookie_counts && query.cookie == CookieCheck::Valid;
    if let Some(signed) = query.signed {
        reply.bytes = signed
            .sign(vec![reply.bytes], ho_engine::clock::unix_now())?
            .pop()?;
    }
    Some(reply)
}

/// An answer that is not kept (an error made before the question was looked at).
pub(super) fn per_query(reply: Reply) -> (Reply, Variation) {
    (reply, Variation::PerQuery)
}

/// Encodes `response`, truncated (TC, answers dropped) when it exceeds `limit`.
pub(super) fn finish(
    response: &mut Message,
    qtype: &'static str,
    limit: Option<usize>,
) -> Option<Reply> {
    let rcode = rcode_label(response.metadata.response_code);
    let mut bytes = response.to_vec().ok()?;
    if limit.is_some_and(|l| bytes.len() > l) {
        bytes = response.truncate().to_vec().ok()?;
    }
    Some(Reply {
        bytes,
        qtype,
        rcode,
        proven_client: false,
    })
}

pub(super) fn type_label(t: RecordType) -> &'static str {
    match t {
        RecordType::A => "A",
        RecordType::AAAA => "AAAA",
        RecordType::ANY => "ANY",
        RecordType::SOA => "SOA",
        RecordType::NS => "NS",
        RecordType::TXT => "TXT",
        RecordType::MX => "MX",
        RecordType::CNAME => "CNAME",
        RecordType::HTTPS => "HTTPS",
        RecordType::SRV => "SRV",
        RecordType::AXFR => "AXFR",
        RecordType::IXFR => "IXFR",
        RecordType::DNSKEY => "DNSKEY",
        RecordType::DS => "DS",
        _ => "other",
    }
}

pub(super) fn rcode_label(r: ResponseCode) -> &'static str {
    match r {
        ResponseCode::NoError => "NOERROR",
        ResponseCode::NXDomain => "NXDOMAIN",
        ResponseCode::ServFail => "SERVFAIL",
        ResponseCode::Refused => "REFUSED",
        ResponseCode::FormErr => "FORMERR",
        ResponseCode::NotImp => "NOTIMP",
        ResponseCode::BADVERS => "BADVERS",
        ResponseCode::NotAuth => "NOTAUTH",
        _ => "other",
    }
}
