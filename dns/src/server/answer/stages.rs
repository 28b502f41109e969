//! The stages of an answer in order: [`begin`](super::begin), then an update, a report
//! question or a lookup, then [`finish`](super::finish). What varies between queries of
//! the same bytes is said with the answer, for the packet cache.

use std::net::IpAddr;

use hickory_proto::op::OpCode;

use super::finish::{self, per_query};
use super::{Authority, Reply};
use crate::server::packet_cache::Variation;

impl Authority {
    /// The answer to `request` made from the records, with rotation `turn`, and how it
    /// varies between queries of the same bytes: the stages in order.
    pub(super) fn make_answer(
        &self,
        request: &[u8],
        client: IpAddr,
        udp: bool,
        turn: usize,
    ) -> Option<(Reply, Variation)> {
        let mut query = match self.begin(request, client, udp) {
            Ok(query) => query,
            Err(done) => return done,
        };
        if query.query.metadata.op_code == OpCode::Update {
            self.update(&mut query);
            return finish::signed(query, false).map(per_query);
        }
        if let Some(asked) = self.asks_for_reports(query.question().name()) {
            self.answer_reports(&mut query, asked, client);
            return finish::signed(query, false).map(per_query);
        }
        let variation = self.look_up(&mut query, client, turn);
        // A signed answer carries its signing time: never kept.
        let kept = query.signed.is_none();
        let reply = finish::signed(query, true)?;
        Some(if kept {
            (reply, variation)
        } else {
            per_query(reply)
        })
    }
}
