//! What one name needs, as RFC 2136 prerequisites and updates, given what the server holds
//! there. Pure: no sockets, so every ownership and diff rule is a unit test.

use std::net::IpAddr;

use hickory_proto::rr::rdata::{A, AAAA, CNAME, TXT};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};

use ho_engine::sink::ownership::{mark_text, owner_in, OWNER_TTL};

/// An address rrset as read from the server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rrset {
    /// Its TTL.
    pub ttl: u32,
    /// Its addresses, sorted.
    pub values: Vec<IpAddr>,
}

/// A CNAME as read from the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alias {
    /// Its TTL.
    pub ttl: u32,
    /// The name it points at, fully qualified.
    pub target: Name,
}

/// What the server holds at one name and at its mark's name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Current {
    /// The A rrset (empty: none).
    pub v4: Rrset,
    /// The AAAA rrset (empty: none).
    pub v6: Rrset,
    /// The CNAME, if the name holds one.
    pub cname: Option<Alias>,
    /// TXT strings at `_health-orchestrator.<name>`.
    pub marks: Vec<String>,
}

/// What one name should hold: addresses, or (an `answer = "cname"` tenant below the
/// zone's apex) one CNAME, never both (RFC 1034 3.6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wanted<'a> {
    /// These addresses (none: no address records).
    Addresses(&'a [IpAddr]),
    /// A CNAME to this host name, fully qualified.
    Cname(&'a Name),
}

/// What to do at one name.
#[derive(Debug, PartialEq)]
pub enum NamePlan {
    /// It already holds what is wanted.
    Unchanged,
    /// It is not ours: left alone, for this reason.
    Foreign(String),
    /// Prerequisites (RFC 2136 section 2.4: "still as read") and updates (section 2.5).
    Change {
        /// Must all hold, or the server changes nothing.
        prerequisites: Vec<Record>,
        /// Applied together if they do.
        updates: Vec<Record>,
    },
}

/// The plan for `name` (fully qualified) to hold `wanted` with `ttl`, as `owner_id`.
///
/// Within the update a CNAME leaving goes first and one arriving goes last, after the
/// address rrsets it replaces are deleted: a server applies the updates in order
/// (RFC 2136 3.4.2) and ignores a CNAME added beside other data (3.4.2.2).
pub fn plan_name(
    name: &Name,
    mark_name: &Name,
    current: &Current,
    wanted: Wanted<'_>,
    ttl: u32,
    owner_id: &str,
) -> NamePlan {
    let ours = match whose(name, mark_name, current, owner_id) {
        Ok(ours) => ours,
        Err(why) => return NamePlan::Foreign(why),
    };
    let (addresses, cname): (&[IpAddr], Option<&Name>) = match wanted {
        Wanted::Addresses(addresses) => (addresses, None),
        Wanted::Cname(target) => (&[], Some(target)),
    };
    let mut prerequisites = Vec::new();
    let mut updates = Vec::new();
    if ours {
        // The mark still ours: nobody took the name over since it was read.
        prerequisites.push(mark_record(mark_name, 0, owner_id));
    } else {
        if addresses.is_empty() && cname.is_none() {
            return NamePlan::Unchanged;
        }
        // Claiming a free name: it must still be free when the update lands.
        prerequisites.push(absent(mark_name, RecordType::TXT));
        updates.push(mark_record(mark_name, OWNER_TTL, owner_id));
    }
    let mut changed = !ours;
    let cname_same = same_cname(current, cname, ttl);
    // The CNAME as read is pinned; one leaving goes first.
    match &current.cname {
        Some(read) => prerequisites.push(alias(name, 0, &read.target)),
        None => prerequisites.push(absent(name, RecordType::CNAME)),
    }
    if current.cname.is_some() && !cname_same {
        updates.push(delete_rrset(name, RecordType::CNAME));
    }
    for (rtype, read) in [
        (RecordType::A, &current.v4),
        (RecordType::AAAA, &current.v6),
    ] {
        let family = FamilyUpdate { name, rtype, ttl };
        changed |= family.plan(read, addresses, &mut prerequisites, &mut updates);
    }
    if !cname_same {
        updates.extend(cname.map(|target| alias(name, ttl, target)));
        changed = true;
    }
    if changed {
        NamePlan::Change {
            prerequisites,
            updates,
        }
    } else {
        NamePlan::Unchanged
    }
}

/// Whether the CNAME as read is the one wanted (`cname` with `ttl`), or both are absent.
fn same_cname(current: &Current, cname: Option<&Name>, ttl: u32) -> bool {
    match (&current.cname, cname) {
        (Some(read), Some(target)) => read.target == *target && read.ttl == ttl,
        (None, None) => true,
        _ => false,
    }
}

/// Whether `name` as `current` holds it is ours (true) or free (false) for `owner_id`;
/// why not, when another owner's mark or unmarked records are there.
fn whose(name: &Name, mark_name: &Name, current: &Current, owner_id: &str) -> Result<bool, String> {
    let owners: Vec<&str> = current.marks.iter().filter_map(|m| owner_in(m)).collect();
    if owners.contains(&owner_id) {
        return Ok(true);
    }
    if let Some(other) = owners.first() {
        return Err(format!("{name} is marked for owner \"{other}\""));
    }
    let has_data =
        !current.v4.values.is_empty() || !current.v6.values.is_empty() || current.cname.is_some();
    if !current.marks.is_empty() || has_data {
        return Err(format!(
            "{name} holds records without this orchestrator's ownership mark ({mark_name} TXT)"
        ));
    }
    Ok(false)
}

/// One address family of one name, as an update sees it.
struct FamilyUpdate<'a> {
    name: &'a Name,
    rtype: RecordType,
    ttl: u32,
}

impl FamilyUpdate<'_> {
    /// Adds the prerequisites that pin what was `read` (so a concurrent change makes the
    /// update fail instead of being overwritten) and, when it differs from the `wanted`
    /// addresses of this family, the updates that replace it; true when it differs.
    fn plan(
        &self,
        read: &Rrset,
        wanted: &[IpAddr],
        prerequisites: &mut Vec<Record>,
        updates: &mut Vec<Record>,
    ) -> bool {
        let (name, rtype, ttl) = (self.name, self.rtype, self.ttl);
        let mut want: Vec<IpAddr> = wanted
            .iter()
            .copied()
            .filter(|a| a.is_ipv4() == (rtype == RecordType::A))
            .collect();
        want.sort();
        want.dedup();
        if read.values.is_empty() {
            prerequisites.push(absent(name, rtype));
        } else {
            prerequisites.extend(read.values.iter().map(|a| address(name, 0, *a)));
        }
        let same = read.values == want && (want.is_empty() || read.ttl == ttl);
        if !same {
            if !read.values.is_empty() {
                updates.push(delete_rrset(name, rtype));
            }
            updates.extend(want.iter().map(|a| address(name, ttl, *a)));
        }
        !same
    }
}

fn address(name: &Name, ttl: u32, ip: IpAddr) -> Record {
    let data = match ip {
        IpAddr::V4(v4) => RData::A(A(v4)),
        IpAddr::V6(v6) => RData::AAAA(AAAA(v6)),
    };
    Record::from_rdata(name.clone(), ttl, data)
}

fn alias(name: &Name, ttl: u32, target: &Name) -> Record {
    Record::from_rdata(name.clone(), ttl, RData::CNAME(CNAME(target.clone())))
}

fn mark_record(mark_name: &Name, ttl: u32, owner_id: &str) -> Record {
    Record::from_rdata(
        mark_name.clone(),
        ttl,
        RData::TXT(TXT::new(vec![mark_text(owner_id)])),
    )
}

/// Prerequisite "RRset does not exist" (class NONE, no data).
fn absent(name: &Name, rtype: RecordType) -> Record {
    let mut r = Record::update0(name.clone(), 0, rtype);
    r.dns_class = DNSClass::NONE;
    r
}

/// Update "delete an RRset" (class ANY, no data).
fn delete_rrset(name: &Name, rtype: RecordType) -> Record {
    let mut r = Record::update0(name.clone(), 0, rtype);
    r.dns_class = DNSClass::ANY;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> (Name, Name) {
        (
            Name::from_ascii("api.example.org.").unwrap(),
            Name::from_ascii("_health-orchestrator.api.example.org.").unwrap(),
        )
    }

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|a| a.parse().unwrap()).collect()
    }

    fn ours(v4: &[&str]) -> Current {
        Current {
            v4: Rrset {
                ttl: 30,
                values: ips(v4),
            },
            marks: vec![mark_text("me")],
            ..Current::default()
        }
    }

    #[test]
    fn a_free_name_is_claimed_with_its_mark_in_the_same_update() {
        let (n, m) = names();
        let NamePlan::Change {
            prerequisites,
            updates,
        } = plan_name(
            &n,
            &m,
            &Current::default(),
            Wanted::Addresses(&ips(&["10.0.0.1"])),
            30,
            "me",
        )
        else {
            panic!("a change")
        };
        assert_eq!(prerequisites.len(), 4, "mark, CNAME, A and AAAA absent");
        assert!(prerequisites.iter().all(|r| r.dns_class == DNSClass::NONE));
        assert_eq!(updates.len(), 2, "the mark and one A record");
        assert!(matches!(&updates[0].data, RData::TXT(_)));
        assert_eq!(updates[1].ttl, 30);
    }

    #[test]
    fn an_owned_name_is_replaced_only_where_it_differs_with_the_read_as_prerequisite() {
        let (n, m) = names();
        assert_eq!(
            plan_name(
                &n,
                &m,
                &ours(&["10.0.0.1"]),
                Wanted::Addresses(&ips(&["10.0.0.1"])),
                30,
                "me"
            ),
            NamePlan::Unchanged
        );
        let NamePlan::Change {
            prerequisites,
            updates,
        } = plan_name(
            &n,
            &m,
            &ours(&["10.0.0.1", "10.0.0.2"]),
            Wanted::Addresses(&ips(&["10.0.0.1"])),
            30,
            "me",
        )
        else {
            panic!("a change")
        };
        // mark as read, CNAME absent, both A values as read, AAAA absent
        assert_eq!(prerequisites.len(), 5);
        assert!(prerequisites[0].dns_class == DNSClass::IN && prerequisites[0].ttl == 0);
        assert_eq!(prerequisites[1].dns_class, DNSClass::NONE);
        assert!(prerequisites[2..4]
            .iter()
            .all(|r| r.dns_class == DNSClass::IN && r.ttl == 0));
        assert_eq!(updates.len(), 2, "delete the A rrset, add the one address");
        assert_eq!(updates[0].dns_class, DNSClass::ANY);
        let ttl_change = plan_name(
            &n,
            &m,
            &ours(&["10.0.0.1"]),
            Wanted::Addresses(&ips(&["10.0.0.1"])),
            60,
            "me",
        );
        assert!(
            matches!(ttl_change, NamePlan::Change { .. }),
            "a new TTL rewrites the rrset"
        );
    }

    #[test]
    fn names_without_our_mark_are_never_touched() {
        let (n, m) = names();
        let unmarked = Current {
            v4: Rrset {
                ttl: 30,
                values: ips(&["192.0.2.1"]),
            },
            ..Current::default()
        };
        assert!(matches!(
            plan_name(&n, &m, &unmarked, Wanted::Addresses(&ips(&["10.0.0.1"])), 30, "me"),
            NamePlan::Foreign(r) if r.contains("without this orchestrator's ownership mark")
        ));
        let other = Current {
            marks: vec![mark_text("eu-2")],
            ..Current::default()
        };
        assert!(matches!(
            plan_name(&n, &m, &other, Wanted::Addresses(&ips(&["10.0.0.1"])), 30, "me"),
            NamePlan::Foreign(r) if r.contains("\"eu-2\"")
        ));
    }

    #[test]
    fn an_owned_name_emptied_keeps_its_mark_and_loses_its_addresses() {
        let (n, m) = names();
        let NamePlan::Change { updates, .. } = plan_name(
            &n,
            &m,
            &ours(&["10.0.0.1"]),
            Wanted::Addresses(&[]),
            30,
            "me",
        ) else {
            panic!("a change")
        };
        assert_eq!(updates.len(), 1);
        assert_eq!(updates[0].dns_class, DNSClass::ANY);
    }

    /// A name read holding a CNAME to `target`, with the marks of `owners`.
    fn aliased(target: Name, ttl: u32, owners: &[&str]) -> Current {
        Current {
            cname: Some(Alias { ttl, target }),
            marks: owners.iter().map(|o| mark_text(o)).collect(),
            ..Current::default()
        }
    }

    fn lb(host: &str) -> Name {
        Name::from_ascii(host).unwrap()
    }

    #[test]
    fn addresses_give_way_to_a_cname_deleted_before_it_is_added() {
        let (n, m) = names();
        let target = lb("lb-east.lb.test.");
        let NamePlan::Change { updates, .. } = plan_name(
            &n,
            &m,
            &ours(&["10.0.0.1"]),
            Wanted::Cname(&target),
            30,
            "me",
        ) else {
            panic!("a change")
        };
        assert_eq!(updates.len(), 2, "delete the A rrset, add the CNAME");
        assert_eq!(
            (updates[0].record_type(), updates[0].dns_class),
            (RecordType::A, DNSClass::ANY)
        );
        assert_eq!(updates[1].data, RData::CNAME(CNAME(target.clone())));
        let now = aliased(target.clone(), 30, &["me"]);
        assert_eq!(
            plan_name(&n, &m, &now, Wanted::Cname(&target), 30, "me"),
            NamePlan::Unchanged
        );
    }

    #[test]
    fn a_cname_moves_or_gives_way_to_addresses_pinned_as_read() {
        let (n, m) = names();
        let now = aliased(lb("lb-east.lb.test."), 30, &["me"]);
        let west = lb("lb-west.lb.test.");
        let NamePlan::Change {
            prerequisites,
            updates,
        } = plan_name(&n, &m, &now, Wanted::Cname(&west), 30, "me")
        else {
            panic!("a change")
        };
        assert!(
            prerequisites
                .iter()
                .any(|r| r.record_type() == RecordType::CNAME && r.dns_class == DNSClass::IN),
            "the CNAME as read is a prerequisite"
        );
        assert_eq!(updates.len(), 2, "delete the CNAME, add the new one");
        assert_eq!(updates[0].dns_class, DNSClass::ANY);
        assert_eq!(updates[1].data, RData::CNAME(CNAME(west)));
        let NamePlan::Change { updates, .. } = plan_name(
            &n,
            &m,
            &now,
            Wanted::Addresses(&ips(&["10.0.0.1"])),
            30,
            "me",
        ) else {
            panic!("a change")
        };
        assert_eq!(
            updates.len(),
            2,
            "delete the CNAME first, then add the A record"
        );
        assert_eq!(
            (updates[0].record_type(), updates[0].dns_class),
            (RecordType::CNAME, DNSClass::ANY)
        );
        assert_eq!(updates[1].record_type(), RecordType::A);
    }

    #[test]
    fn an_unmarked_cname_is_someone_elses() {
        let (n, m) = names();
        let theirs = aliased(lb("elsewhere.example.net."), 300, &[]);
        assert!(matches!(
            plan_name(
                &n,
                &m,
                &theirs,
                Wanted::Addresses(&ips(&["10.0.0.1"])),
                30,
                "me"
            ),
            NamePlan::Foreign(_)
        ));
    }
}
