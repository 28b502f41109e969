//! Zone transfers to secondaries (AXFR, IXFR over TCP): the zone's records, or what changed
//! since the serial a secondary holds, signed when the request was.

use std::net::IpAddr;

use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::{RData, Record, RecordType, TSigner};
use tracing::{debug, info};

use super::{Authority, Transfer};
use crate::server::names::key_of;
use crate::server::transfer as xfr;
use crate::server::zones::Zone;
use crate::wire::tsig_check::{self as tsig, Check};

impl Authority {
    /// The answer to `request` when it asks for a zone transfer (AXFR, IXFR) over TCP;
    /// `None` for any other request (answered by [`Authority::answer`]), or when transfers
    /// are off (then AXFR and IXFR are refused there).
    pub fn transfer(&self, request: &[u8], client: IpAddr) -> Option<Transfer> {
        let transfers = self.transfers.as_ref()?;
        let query = Message::from_vec(request).ok()?;
        let question = query.queries.first()?;
        let qtype = question.query_type();
        if query.metadata.message_type != MessageType::Query
            || !matches!(qtype, RecordType::AXFR | RecordType::IXFR)
        {
            return None;
        }
        let now = ho_engine::clock::unix_now();
        let key: Vec<&TSigner> = transfers.key().into_iter().collect();
        let signed = match tsig::check(&key, request, &query, now) {
            Check::Refused(bytes) => return Some(Transfer::Answer(vec![bytes])),
            Check::Signed(s) => Some(s),
            Check::Unsigned => None,
        };
        let send = |messages: Vec<Vec<u8>>| match &signed {
            Some(s) => s.sign(messages, now).map(Transfer::Answer),
            None => Some(Transfer::Answer(messages)),
        };
        let refuse = |code: ResponseCode| {
            let mut m = Message::response(query.metadata.id, OpCode::Query);
            m.queries.clone_from(&query.queries);
            m.metadata.response_code = code;
            send(vec![m.to_vec().ok()?])
        };
        if !transfers.allows(client, signed.is_some()) {
            info!(%client, zone = %question.name(), "zone transfer refused: not in transfer.allow, or not signed with transfer.tsig");
            return refuse(ResponseCode::Refused);
        }
        let key = key_of(question.name());
        let Some(zone) = self.zones.iter().find(|z| z.apex == key) else {
            return refuse(ResponseCode::NotAuth);
        };
        let serial = self.records.read().expect("not poisoned").serial();
        let Some(content) = transfers.journal.at(&zone.apex, serial) else {
            // A name awaits its first snapshot: the caller waits for it, then answers
            // SERVFAIL (the secondary keeps its copy) if it never comes.
            return match refuse(ResponseCode::ServFail)? {
                Transfer::Answer(m) | Transfer::NotReady(m) => Some(Transfer::NotReady(m)),
            };
        };
        let asked_from = (qtype == RecordType::IXFR)
            .then(|| ixfr_serial(&query))
            .flatten();
        let since = asked_from.map(|s| (s, transfers.journal.at(&zone.apex, s)));
        let list = self.transfer_records(zone, serial, &content, since);
        debug!(%client, zone = %zone.apex, serial, ?asked_from, records = list.len(), "zone transfer");
        send(xfr::messages(&query, &list)?)
    }

    /// The records of `zone` at `serial` (its `content`) a secondary is sent: the
    /// difference from the serial it has (`since`, with that version's content when the
    /// journal still holds it) between SOAs (IXFR, RFC 1995), the SOA alone when it is up
    /// to date, else the whole zone between SOAs (AXFR).
    fn transfer_records(
        &self,
        zone: &Zone,
        serial: u32,
        content: &xfr::journal::Content,
        since: Option<(u32, Option<xfr::journal::Content>)>,
    ) -> Vec<Record> {
        let soa = self.soa_record(zone, serial);
        let mut list = vec![soa.clone()];
        match since {
            // Up to date: the SOA alone says so.
            Some((s, _)) if s == serial => {}
            Some((s, Some(old))) => {
                let (deleted, added) = xfr::difference(&old, content);
                list.push(self.soa_record(zone, s));
                list.extend(deleted);
                list.push(soa.clone());
                list.extend(added);
                list.push(soa);
            }
            _ => {
                let mut fixed = self.ns_records(zone, &zone.name);
                fixed.extend(self.statics.of_zone(&zone.apex));
                list.extend(xfr::zone_records(&fixed, content));
                list.push(soa);
            }
        }
        list
    }
}

/// The serial an IXFR query says the secondary has (the SOA in its authority section).
fn ixfr_serial(query: &Message) -> Option<u32> {
    query.authorities.iter().find_map(|r| match &r.data {
        RData::SOA(s) => Some(s.serial),
        _ => None,
    })
}
