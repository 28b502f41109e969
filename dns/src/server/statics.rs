//! Static records in the zones the server holds (`static_records`, RFC 1035 zone-file text,
//! names relative to the first zone): the name servers' own addresses, MX, TXT (domain
//! verification), CAA, SRV, CNAME — served beside the tenants' names, signed with them
//! and part of zone transfers.
//!
//! NS records below an apex are a delegation, as in any parent zone: a question at or below
//! that name is referred to those name servers (the NS in the authority section, their
//! addresses from the static records as glue), and a tenant's name below it is not
//! answered while the delegation stands. That is how a zone handed to other servers (k8gb's
//! CoreDNS, a team's own) is moved here: the tenant is published first, and removing the
//! delegation is the cut-over (docs/coming-from.md).
//!
//! A static record never shares a name with a tenant silently: an address record or a
//! CNAME at a tenant's name, or any static name a tenant's wildcard would otherwise answer,
//! is a config error (`conflicts`); other types beside a tenant's addresses (MX, TXT, CAA
//! at a tenant's name) are what a zone holds and are served together. The apex's SOA and
//! NS are the server's own and cannot be given here.

use std::collections::{HashMap, HashSet};

use hickory_proto::rr::{Name, Record, RecordType};
use hickory_proto::serialize::txt::Parser;

use super::names::key_of;

/// Why `static_records` cannot be served; its text is what the config error says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StaticsError {
    /// The first zone is not a name relative names can hang from.
    #[error("zone {zone}: {reason}")]
    Origin {
        /// The zone.
        zone: String,
        /// What the name parser said.
        reason: String,
    },
    /// The text does not parse as a zone file.
    #[error("not zone-file text: {0}")]
    NotZoneFile(String),
    /// A record outside every zone the server holds.
    #[error("{name} {rtype} is outside the server's zones ({zones})")]
    Outside {
        /// Its owner.
        name: String,
        /// Its type.
        rtype: RecordType,
        /// The server's zones, as a list.
        zones: String,
    },
    /// The apex's SOA or NS, which the server makes itself.
    #[error("{name} {rtype}: the apex's SOA and NS are the server's own (soa, its listen names)")]
    ApexOwn {
        /// The apex.
        name: String,
        /// SOA or NS.
        rtype: RecordType,
    },
    /// A CNAME beside other records.
    #[error("{0} has a CNAME and other records: a CNAME is a name's only record")]
    CnameAndOthers(String),
}

/// The config checks collect problems as text.
impl From<StaticsError> for String {
    fn from(e: StaticsError) -> String {
        e.to_string()
    }
}

/// The static records, by owner name (lower case, no trailing dot).
#[derive(Default)]
pub struct Statics {
    by_name: HashMap<String, Vec<Record>>,
    /// Names that exist only as parents of static names.
    parents: HashSet<String>,
    /// Names below an apex that hold NS records: delegations.
    cuts: HashSet<String>,
}

impl Statics {
    /// The records of `text`, every one of them inside one of `zones` (the first is the
    /// origin of relative names); why not, naming the record.
    pub fn parse(text: &str, zones: &[String]) -> Result<Statics, StaticsError> {
        let Some(first) = zones.first() else {
            return Ok(Statics::default());
        };
        let origin = Name::from_ascii(format!("{first}.")).map_err(|e| StaticsError::Origin {
            zone: first.clone(),
            reason: e.to_string(),
        })?;
        let (_, sets) = Parser::new(text, None, Some(origin))
            .parse()
            .map_err(|e| StaticsError::NotZoneFile(e.to_string()))?;
        let mut statics = Statics::default();
        for set in sets.values() {
            let name = key_of(set.name());
            let rtype = set.record_type();
            let apex = zones.iter().find(|z| name == **z);
            let inside = zones
                .iter()
                .any(|z| name == *z || name.ends_with(&format!(".{z}")));
            if !inside {
                return Err(StaticsError::Outside {
                    name,
                    rtype,
                    zones: zones.join(", "),
                });
            }
            if rtype == RecordType::SOA || (rtype == RecordType::NS && apex.is_some()) {
                return Err(StaticsError::ApexOwn { name, rtype });
            }
            if rtype == RecordType::NS {
                statics.cuts.insert(name.clone());
            }
            let records = statics.by_name.entry(name).or_default();
            records.extend(set.records_without_rrsigs().cloned());
        }
        for (name, records) in &statics.by_name {
            let cname = records.iter().any(|r| r.record_type() == RecordType::CNAME);
            if cname && records.len() > 1 {
                return Err(StaticsError::CnameAndOthers(name.clone()));
            }
        }
        for name in statics.by_name.keys() {
            let mut rest = name.as_str();
            while let Some((_, parent)) = rest.split_once('.') {
                if !statics.by_name.contains_key(parent) {
                    statics.parents.insert(parent.to_owned());
                }
                rest = parent;
            }
        }
        Ok(statics)
    }

    /// The static records of `name`, if it has any.
    pub fn get(&self, name: &str) -> Option<&[Record]> {
        self.by_name.get(name).map(Vec::as_slice)
    }

    /// Whether `name` exists only as a parent of static names.
    pub fn is_parent(&self, name: &str) -> bool {
        self.parents.contains(name)
    }

    /// The delegation `name` is at or below, if any: the cut's name (the nearest, as a
    /// resolver follows the nearest).
    pub fn delegation(&self, name: &str) -> Option<&str> {
        if self.cuts.is_empty() {
            return None;
        }
        let mut rest = name;
        loop {
            if let Some(cut) = self.cuts.get(rest) {
                return Some(cut);
            }
            rest = rest.split_once('.')?.1;
        }
    }

    /// Whether any name is delegated.
    pub fn delegates(&self) -> bool {
        !self.cuts.is_empty()
    }

    /// Every static record of the zone at `apex` (for zone transfers).
    pub fn of_zone(&self, apex: &str) -> Vec<Record> {
        self.by_name
            .iter()
            .filter(|(name, _)| *name == apex || name.ends_with(&format!(".{apex}")))
            .flat_map(|(_, records)| records.iter().cloned())
            .collect()
    }

    /// Why a tenant publishing `domains` here cannot: an address record or a CNAME at one
    /// of its names, or a static name one of its wildcards would otherwise answer.
    pub fn conflicts(&self, domains: &[String]) -> Vec<String> {
        let mut found = Vec::new();
        for d in domains {
            if let Some(records) = self.get(d) {
                let clash = records.iter().find(|r| {
                    matches!(
                        r.record_type(),
                        RecordType::A | RecordType::AAAA | RecordType::CNAME
                    )
                });
                if let Some(r) = clash {
                    found.push(format!(
                        "\"{d}\" has a static {} record: a name answers the tenant's addresses or the static record, not both",
                        r.record_type()
                    ));
                }
            }
            if let Some(parent) = d.strip_prefix("*.") {
                let suffix = format!(".{parent}");
                let mut hidden: Vec<&str> = self
                    .by_name
                    .keys()
                    .filter(|n| n.ends_with(&suffix))
                    .map(String::as_str)
                    .collect();
                hidden.sort_unstable();
                if let Some(n) = hidden.first() {
                    found.push(format!(
                        "static name {n} would take the wildcard \"{d}\"'s answer away from that name (RFC 4592): publish it as a tenant's name, or move the static record"
                    ));
                }
            }
        }
        found
    }
}
