//! The clusters' reports (`[multi_cluster]`) through an external-dns provider: one TXT
//! record set per cluster and tenant, created, replaced or deleted whole.

use ho_engine::multi_cluster::report::{from_presentation, to_presentation};
use ho_engine::sink::reports::Rrset;

use super::api::{Changes, Endpoint};
use super::Webhook;
use crate::rounds::reports::HoldsReports;

/// TTL of report records: read through the provider, not by resolvers.
const REPORT_TTL: u32 = 60;

impl HoldsReports for Webhook {
    type Set = Endpoint;
    type Change = Changes;

    /// A simple TXT set's name (lower case) and texts.
    fn txt(e: &Endpoint) -> Option<(String, Vec<String>)> {
        let name = e.dns_name.trim_end_matches('.').to_ascii_lowercase();
        let texts = e.targets.iter().map(|t| from_presentation(t)).collect();
        (e.record_type == "TXT" && e.set_identifier.is_empty()).then_some((name, texts))
    }

    /// The changes that make `listed` hold `reports`: missing sets created, others replaced.
    fn report_change(&self, listed: &[Endpoint], reports: &[Rrset]) -> Option<Changes> {
        let mut changes = Changes::default();
        for Rrset { name, texts } in reports {
            let targets = texts.iter().map(|t| to_presentation(t)).collect();
            let wanted = Endpoint::new(name, "TXT", targets, REPORT_TTL);
            match listed.iter().find(|e| e.is(name, "TXT")) {
                None => changes.create.push(wanted),
                Some(current) if !wanted.serves_as(current) => {
                    changes.update_old.push(current.clone());
                    changes.update_new.push(wanted);
                }
                Some(_) => {}
            }
        }
        (!changes.is_empty()).then_some(changes)
    }

    /// The delete of the TXT set `name`.
    fn removal(&self, listed: &[Endpoint], name: &str) -> Option<Changes> {
        let changes = Changes {
            delete: listed
                .iter()
                .filter(|e| e.is(name, "TXT"))
                .cloned()
                .collect(),
            ..Default::default()
        };
        (!changes.is_empty()).then_some(changes)
    }
}
