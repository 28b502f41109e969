//! The journal fed: after every change of the published records (a snapshot, an ACME
//! update), each zone's content at the new serial, as a secondary will transfer it.

use std::collections::BTreeSet;

use super::journal::{Data, ZoneRecord};
use super::Transfers;
use crate::server::acme::{self, Acme};
use crate::server::names::key_of;
use crate::server::records::{Entry, Records};
use crate::server::zones::Zone;

impl Transfers {
    /// Notes each zone's content at the current serial (a zone with a name awaiting its
    /// first snapshot is not noted: it is not transferred); the zones whose content changed.
    pub fn remember<'z>(
        &self,
        zones: &'z [Zone],
        records: &Records,
        challenges: Option<&Acme>,
    ) -> Vec<&'z Zone> {
        let mut contents: Vec<Option<BTreeSet<ZoneRecord>>> =
            vec![Some(Default::default()); zones.len()];
        for (name, texts) in challenges.map(Acme::all).iter().flatten() {
            let zone = zones.iter().position(|z| name.ends_with(&z.dot_apex));
            if let Some(Some(content)) = zone.map(|i| &mut contents[i]) {
                content.extend(texts.iter().map(|text| ZoneRecord {
                    name: name.clone(),
                    ttl: acme::TTL,
                    data: Data::Text(text.clone()),
                }));
            }
        }
        for (name, entry) in records.entries() {
            let Some(i) = zones.iter().position(|z| z.holds(name)) else {
                continue;
            };
            match (entry, &mut contents[i]) {
                (Entry::Pending, slot) => *slot = None,
                (Entry::Ready(set), Some(content)) => {
                    let record = |data| ZoneRecord {
                        name: name.to_owned(),
                        ttl: set.ttl,
                        data,
                    };
                    match set.hosts.first() {
                        Some(host) if name != zones[i].apex => {
                            content.insert(record(Data::Cname(key_of(&host.name))));
                        }
                        _ => content.extend(
                            set.v4
                                .iter()
                                .chain(&set.v6)
                                .map(|t| record(Data::Address(t.ip))),
                        ),
                    }
                }
                (Entry::Ready(_), None) => {}
            }
        }
        zones
            .iter()
            .zip(contents)
            .filter_map(|(zone, content)| {
                let changed = self.journal.record(&zone.apex, records.serial(), content?);
                changed.then_some(zone)
            })
            .collect()
    }
}
