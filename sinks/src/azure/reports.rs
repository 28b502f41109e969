//! The clusters' reports (`[multi_cluster]`) in an Azure DNS zone: one TXT record set per
//! cluster and tenant, each replaced by one conditional `PUT`.

use ho_engine::sink::reports::Rrset;

use super::api::{body, Listed, Op};
use super::AzureDns;
use crate::rounds::reports::HoldsReports;

/// TTL of report records: read through the API, not by resolvers.
const REPORT_TTL: u64 = 60;

impl HoldsReports for AzureDns {
    type Set = Listed;
    type Change = Vec<Op>;

    /// A TXT set's name and texts.
    fn txt(set: &Listed) -> Option<(String, Vec<String>)> {
        (set.rtype == "TXT").then(|| (set.name.clone(), set.data.clone()))
    }

    /// The writes that make `zone` hold `reports`: each set that differs put on its etag.
    fn report_change(&self, zone: &[Listed], reports: &[Rrset]) -> Option<Vec<Op>> {
        let mut ops = Vec::new();
        for Rrset { name, texts } in reports {
            let mut data = texts.clone();
            data.sort();
            let old = at(zone, name);
            if old.is_some_and(|o| o.data == data && o.ttl == REPORT_TTL) {
                continue;
            }
            ops.push(Op::Put {
                rtype: "TXT".into(),
                name: name.clone(),
                body: body("TXT", REPORT_TTL, &data),
                etag: old.map(|o| o.etag.clone()),
            });
        }
        (!ops.is_empty()).then_some(ops)
    }

    /// The delete of the TXT set `name` as listed.
    fn removal(&self, zone: &[Listed], name: &str) -> Option<Vec<Op>> {
        let old = at(zone, name)?;
        Some(vec![Op::Delete {
            rtype: "TXT".into(),
            name: name.to_owned(),
            etag: old.etag.clone(),
        }])
    }
}

fn at<'a>(zone: &'a [Listed], name: &str) -> Option<&'a Listed> {
    zone.iter()
        .find(|s| s.rtype == "TXT" && s.name.eq_ignore_ascii_case(name))
}
