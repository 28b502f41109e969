//! The first stage of an answer: the message parsed (FORMERR for garbage that looks like a
//! query), its TSIG signature checked (NOTAUTH when it does not hold), EDNS negotiated
//! (BADVERS for a version we do not speak), cookies checked and answered (FORMERR when
//! malformed), and exactly one standard query asked. What fails here is answered at once
//! and never kept.

use std::net::IpAddr;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};

use super::finish::{finish, per_query, type_label};
use super::{Authority, Reply};
use crate::server::cookies::CookieCheck;
use crate::server::packet_cache::Variation;
use crate::wire::tsig_check::{self as tsig, Check, Signed};

/// A query past the first stage, and the response the later stages fill.
pub(super) struct Begun {
    /// The query.
    pub(super) query: Message,
    /// The response so far: id, flags, question, EDNS and cookie answered.
    pub(super) response: Message,
    /// The query type's metrics label.
    pub(super) qtype: &'static str,
    /// The most bytes the client takes (UDP only).
    pub(super) limit: Option<usize>,
    /// The query carried a valid server cookie.
    pub(super) cookie: CookieCheck,
    /// The query was signed with our key: so is the answer.
    pub(super) signed: Option<Signed>,
}

impl Begun {
    /// The one question (the stage made sure there is exactly one).
    pub(super) fn question(&self) -> &Query {
        &self.query.queries[0]
    }
}

/// An answer made before the question was looked at, or none at all.
type Early = Option<(Reply, Variation)>;

impl Authority {
    /// The first stage of answering `request` from `client` (`udp`: the size is limited).
    pub(super) fn begin(&self, request: &[u8], client: IpAddr, udp: bool) -> Result<Begun, Early> {
        let query = match Message::from_vec(request) {
            Ok(q) => q,
            Err(_) if request.len() >= 12 && request[2] & 0x80 == 0 => {
                let id = u16::from_be_bytes([request[0], request[1]]);
                let mut m = Message::error_msg(id, OpCode::Query, ResponseCode::FormErr);
                return Err(finish(&mut m, "invalid", None).map(per_query));
            }
            Err(_) => return Err(None),
        };
        if query.metadata.message_type != MessageType::Query {
            return Err(None);
        }
        let signed = self.signature(request, &query)?;
        let mut response = Message::response(query.metadata.id, query.metadata.op_code);
        response.metadata.recursion_desired = query.metadata.recursion_desired;
        response.metadata.checking_disabled = query.metadata.checking_disabled;
        response.queries.clone_from(&query.queries);
        let qtype = query
            .queries
            .first()
            .map_or("none", |q| type_label(q.query_type()));
        let Some(limit) = self.negotiate_edns(&query, &mut response) else {
            response.metadata.response_code = ResponseCode::BADVERS;
            return Err(finish(&mut response, qtype, None).map(per_query));
        };
        let cookie = self.cookies.answer(&query, &mut response, client);
        let limit = udp.then_some(usize::from(limit));
        let refused = if cookie == CookieCheck::Malformed {
            None
        } else if query.metadata.op_code != OpCode::Query
            && !(query.metadata.op_code == OpCode::Update && self.acme.is_some())
        {
            Some(ResponseCode::NotImp)
        } else if query.queries.len() != 1 {
            Some(ResponseCode::FormErr)
        } else {
            return Ok(Begun {
                query,
                response,
                qtype,
                limit,
                cookie,
                signed,
            });
        };
        if let Some(code) = refused {
            response.metadata.response_code = code;
        }
        Err(finish(&mut response, qtype, limit).map(per_query))
    }

    /// The signature a signed query (a secondary's SOA check, a peer's report query) holds,
    /// for a signed answer; NOTAUTH when it does not hold.
    fn signature(&self, request: &[u8], query: &Message) -> Result<Option<Signed>, Early> {
        if query.signature().is_none() {
            return Ok(None);
        }
        match tsig::check(&self.keys(), request, query, ho_engine::clock::unix_now()) {
            Check::Refused(bytes) => {
                let reply = Reply {
                    bytes,
                    qtype: "other",
                    rcode: "NOTAUTH",
                    proven_client: false,
                };
                Err(Some(per_query(reply)))
            }
            Check::Signed(s) => Ok(Some(s)),
            Check::Unsigned => Ok(None),
        }
    }

    /// Answers EDNS with ours and returns the UDP payload size both sides allow (512
    /// without EDNS); `None` for an EDNS version we do not speak (BADVERS).
    fn negotiate_edns(&self, query: &Message, response: &mut Message) -> Option<u16> {
        let Some(edns) = &query.edns else {
            return Some(512);
        };
        let mut ours = Edns::new();
        ours.set_max_payload(self.max_udp_payload);
        ours.set_version(0);
        // RFC 3225: the DO bit is copied into the response.
        ours.set_dnssec_ok(edns.flags().dnssec_ok);
        response.set_edns(ours);
        (edns.version() == 0).then(|| edns.max_payload().clamp(512, self.max_udp_payload))
    }
}
