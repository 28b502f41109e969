//! The clusters' reports (`[multi_cluster]`) in a Cloudflare zone: the TXT records of one
//! name per cluster and tenant, replaced in one batch.

use ho_engine::multi_cluster::report::{from_presentation, to_presentation};
use ho_engine::sink::reports::Rrset;

use super::api::{Batch, DnsRecord, Id, NewRecord};
use super::Cloudflare;
use crate::rounds::reports::HoldsReports;

/// TTL of report records: read through the API, not by resolvers.
const REPORT_TTL: u32 = 60;

impl HoldsReports for Cloudflare {
    type Set = DnsRecord;
    type Change = Batch;

    /// A TXT record's name (lower case) and text.
    fn txt(record: &DnsRecord) -> Option<(String, Vec<String>)> {
        let text = from_presentation(&record.content);
        (record.rtype == "TXT").then(|| (record.name.to_ascii_lowercase(), vec![text]))
    }

    /// The batch that makes `zone` hold `reports`: records of other texts or TTLs deleted,
    /// missing texts created.
    fn report_change(&self, zone: &[DnsRecord], reports: &[Rrset]) -> Option<Batch> {
        let mut batch = Batch::default();
        for Rrset { name, texts } in reports {
            let mut wanted: Vec<&String> = texts.iter().collect();
            for record in at(zone, name) {
                let text = from_presentation(&record.content);
                match wanted.iter().position(|w| **w == text) {
                    Some(i) if record.ttl == REPORT_TTL => {
                        wanted.swap_remove(i);
                    }
                    _ => batch.deletes.push(Id {
                        id: record.id.clone(),
                    }),
                }
            }
            batch.posts.extend(wanted.into_iter().map(|t| NewRecord {
                rtype: "TXT",
                name: name.clone(),
                content: to_presentation(t),
                ttl: REPORT_TTL,
                proxied: false,
            }));
        }
        (!batch.is_empty()).then_some(batch)
    }

    /// The batch deleting every TXT record at `name`.
    fn removal(&self, zone: &[DnsRecord], name: &str) -> Option<Batch> {
        let batch = Batch {
            deletes: (at(zone, name).map(|r| Id { id: r.id.clone() })).collect(),
            posts: Vec::new(),
        };
        (!batch.is_empty()).then_some(batch)
    }
}

fn at<'a>(zone: &'a [DnsRecord], name: &'a str) -> impl Iterator<Item = &'a DnsRecord> {
    zone.iter()
        .filter(move |r| r.rtype == "TXT" && r.name.eq_ignore_ascii_case(name))
}
