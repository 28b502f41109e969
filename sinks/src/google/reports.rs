//! The clusters' reports (`[multi_cluster]`) in a Cloud DNS zone: one TXT record set per
//! cluster and tenant, replaced in one change.

use ho_engine::multi_cluster::report::{from_presentation, to_presentation};
use ho_engine::sink::reports::Rrset;

use super::api::{rrset, Change, Listed, Routing};
use super::CloudDns;
use crate::rounds::reports::HoldsReports;

/// TTL of report records: read through the API, not by resolvers.
const REPORT_TTL: u64 = 60;

impl HoldsReports for CloudDns {
    type Set = Listed;
    type Change = Change;

    /// A TXT set's name and texts.
    fn txt(set: &Listed) -> Option<(String, Vec<String>)> {
        let texts = set.data.iter().map(|d| from_presentation(d)).collect();
        (set.rtype == "TXT").then(|| (set.name.clone(), texts))
    }

    /// The change that makes `zone` hold `reports`: each set that differs deleted as listed
    /// and added anew.
    fn report_change(&self, zone: &[Listed], reports: &[Rrset]) -> Option<Change> {
        let mut change = Change::default();
        for Rrset { name, texts } in reports {
            let mut data: Vec<String> = texts.iter().map(|t| to_presentation(t)).collect();
            data.sort();
            let old = at(zone, name).next();
            if old.is_some_and(|o| o.data == data && o.ttl == REPORT_TTL) {
                continue;
            }
            change.deletions.extend(old.map(|o| o.raw.clone()));
            change
                .additions
                .push(rrset(name, "TXT", REPORT_TTL, &data, Routing::Plain));
        }
        (!change.is_empty()).then_some(change)
    }

    /// The change deleting the TXT set `name`.
    fn removal(&self, zone: &[Listed], name: &str) -> Option<Change> {
        let change = Change {
            deletions: at(zone, name).map(|s| s.raw.clone()).collect(),
            additions: Vec::new(),
        };
        (!change.is_empty()).then_some(change)
    }
}

fn at<'a>(zone: &'a [Listed], name: &'a str) -> impl Iterator<Item = &'a Listed> {
    zone.iter()
        .filter(move |s| s.rtype == "TXT" && s.name.eq_ignore_ascii_case(name))
}
