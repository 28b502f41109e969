//! The stage for reports other clusters ask for (`reports`): a report name is answered from
//! the shelf to a query signed with the reports key, refused to anyone else, and never
//! looked up in the zones.

use std::net::IpAddr;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{Name, RecordType, TSigner};
use ho_engine::multi_cluster::report::REPORT_LABEL;

use super::begin::Begun;
use super::Authority;
use crate::server::names::key_of;
use crate::server::reports::report_question;

/// The report suffix and the cluster label a query asks for.
pub(super) type Asked = (String, Option<String>);

impl Authority {
    /// The report suffix and cluster label `qname` asks for, when this server holds
    /// reports (`reports`) and it is a report name.
    pub(super) fn asks_for_reports(&self, qname: &Name) -> Option<Asked> {
        self.report_key.as_ref()?;
        // Every query passes here on a server with reports: look at the labels before
        // making the lower-case key.
        let label = REPORT_LABEL.as_bytes();
        if !qname.iter().any(|l| l.eq_ignore_ascii_case(label)) {
            return None;
        }
        let key = key_of(qname);
        report_question(&key).map(|(suffix, cluster)| (suffix, cluster.map(str::to_owned)))
    }

    /// Answers a report question from the shelf when the query is signed with the reports
    /// key; REFUSED otherwise.
    pub(super) fn answer_reports(
        &self,
        query: &mut Begun,
        (suffix, cluster): Asked,
        client: IpAddr,
    ) {
        let key = self.report_key.as_ref().map(TSigner::signer_name);
        let signed_by = query.signed.as_ref().map(|s| s.key_name());
        if signed_by.is_none() || signed_by != key {
            query.response.metadata.response_code = ResponseCode::Refused;
            return;
        }
        query.response.metadata.authoritative = true;
        let question = &query.query.queries[0];
        if matches!(question.query_type(), RecordType::TXT | RecordType::ANY) {
            match self
                .shelf
                .answer(question.name(), &suffix, cluster.as_deref(), client)
            {
                Some(records) => query.response.answers = records,
                None => query.response.metadata.response_code = ResponseCode::ServFail,
            }
        }
    }
}
