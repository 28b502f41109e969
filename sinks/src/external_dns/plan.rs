//! What one write of a tenant changes among a provider's record sets, decided from a
//! listing. Names are guarded with external-dns's own TXT registry, so this sink and an
//! external-dns deployment (another owner id) share a zone without touching each other's
//! names: a record set of type T at `name` is owned through the TXT record `t-name`
//! (`a-api.example.com`), whose text is
//! `"heritage=external-dns,external-dns/owner=<owner>,external-dns/resource=<resource>"`.
//! A name is ours only with our owner's mark; a name holding addresses or a CNAME without
//! it, or marked by another owner (in the new format or the old one, a TXT at the name
//! itself), is left alone and reported.

use std::net::IpAddr;

use ho_engine::snapshot::TenantSnapshot;

use super::api::{Changes, Endpoint};

/// The record types this sink writes, with the address family each carries.
pub const TYPES: [(&str, bool); 2] = [("A", false), ("AAAA", true)];

/// Whose a name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// Marked ours.
    Mine,
    /// Unmarked and holding no addresses or CNAME: ours to claim.
    Free,
    /// Someone else's.
    Foreign,
}

/// This sink's place in external-dns's TXT registry.
#[derive(Debug, Clone)]
pub struct Registry {
    /// The owner id its marks carry (`--txt-owner-id`).
    pub owner: String,
    /// What stands for a wildcard's `*` in its marks' names, as external-dns's
    /// `--txt-wildcard-replacement`: `a-*.apps...` is refused by most providers.
    pub wildcard: Option<String>,
}

impl Registry {
    /// The registry's TXT name for record type `record_type` at `name` (external-dns's new
    /// format without a prefix: the type, lower case, and a dash before the first label,
    /// a wildcard's `*` replaced).
    pub fn mark_name(&self, record_type: &str, name: &str) -> String {
        let name = match (name.strip_prefix("*."), &self.wildcard) {
            (Some(parent), Some(stand_in)) => format!("{stand_in}.{parent}"),
            _ => name.to_owned(),
        };
        format!("{}-{name}", record_type.to_ascii_lowercase())
    }
}

/// The registry's TXT text for `owner`, quoted as external-dns writes it.
pub fn mark_text(owner: &str, tenant: &str) -> String {
    format!(
        "\"heritage=external-dns,external-dns/owner={owner},external-dns/resource=health-orchestrator/{tenant}\""
    )
}

/// The owner a registry TXT text names, if it is one (`heritage=external-dns`).
pub fn owner_in(text: &str) -> Option<&str> {
    let text = text.trim().trim_matches('"');
    let mut heritage = false;
    let mut owner = None;
    for pair in text.split(',') {
        match pair.split_once('=') {
            Some(("heritage", "external-dns")) => heritage = true,
            Some(("external-dns/owner", o)) => owner = Some(o),
            _ => {}
        }
    }
    heritage.then_some(owner.unwrap_or(""))
}

/// Whose `name` is in `listed`, for `registry`'s owner.
pub fn owner_of(listed: &[Endpoint], name: &str, registry: &Registry) -> Owner {
    let owner = registry.owner.as_str();
    let mut mark_names: Vec<String> = ["A", "AAAA", "CNAME"]
        .iter()
        .map(|t| registry.mark_name(t, name))
        .collect();
    mark_names.push(name.to_owned());
    let owners: Vec<&str> = listed
        .iter()
        .filter(|e| mark_names.iter().any(|m| e.is(m, "TXT")))
        .flat_map(|e| e.targets.iter().filter_map(|t| owner_in(t)))
        .collect();
    if owners.iter().any(|o| *o != owner) {
        return Owner::Foreign;
    }
    if !owners.is_empty() {
        return Owner::Mine;
    }
    let held = ["A", "AAAA", "CNAME"]
        .iter()
        .any(|t| listed.iter().any(|e| e.is(name, t)));
    if held {
        Owner::Foreign
    } else {
        Owner::Free
    }
}

/// A tenant's part of a round, before the provider adjusts it.
#[derive(Debug, Default)]
pub struct Wanted {
    /// The names it may write (ours, or free to claim).
    pub names: Vec<String>,
    /// The names left alone because they are someone else's.
    pub foreign: Vec<String>,
    /// The address record sets it wants (empty families left out).
    pub records: Vec<Endpoint>,
    /// Marks to create for the names it claims.
    pub marks: Vec<Endpoint>,
}

/// What `snapshot` wants of `listed`, as `registry`'s owner.
pub fn wanted(listed: &[Endpoint], snapshot: &TenantSnapshot, registry: &Registry) -> Wanted {
    let ttl = u32::try_from(snapshot.ttl.as_secs()).unwrap_or(u32::MAX);
    let mut wanted = Wanted::default();
    for name in &snapshot.domains {
        match owner_of(listed, name, registry) {
            Owner::Foreign => {
                wanted.foreign.push(name.clone());
                continue;
            }
            Owner::Free => wanted.marks.extend(TYPES.iter().map(|(t, _)| {
                Endpoint::new(
                    &registry.mark_name(t, name),
                    "TXT",
                    vec![mark_text(&registry.owner, &snapshot.tenant)],
                    0,
                )
            })),
            Owner::Mine => {}
        }
        wanted.names.push(name.clone());
        for (record_type, v6) in TYPES {
            let mut targets: Vec<IpAddr> = snapshot
                .addresses
                .iter()
                .map(|a| a.address)
                .filter(|a| a.is_ipv6() == v6)
                .collect();
            targets.sort();
            if !targets.is_empty() {
                let targets = targets.iter().map(IpAddr::to_string).collect();
                wanted
                    .records
                    .push(Endpoint::new(name, record_type, targets, ttl));
            }
        }
    }
    wanted
}

/// The changes that make `listed` hold `records` (as the provider adjusted them) and
/// `marks` at `names`: a set that differs is replaced, a missing one created, a set of ours
/// no longer wanted deleted.
pub fn changes(
    listed: &[Endpoint],
    names: &[String],
    records: &[Endpoint],
    marks: &[Endpoint],
) -> Changes {
    let mut out = Changes::default();
    for name in names {
        for (record_type, _) in TYPES {
            let current = listed.iter().find(|e| e.is(name, record_type));
            let desired = records.iter().find(|e| e.is(name, record_type));
            match (current, desired) {
                (None, Some(d)) => out.create.push(d.clone()),
                (Some(c), Some(d)) if !d.serves_as(c) => {
                    out.update_old.push(c.clone());
                    out.update_new.push(d.clone());
                }
                (Some(c), None) => out.delete.push(c.clone()),
                _ => {}
            }
        }
    }
    out.create.extend(
        marks
            .iter()
            .filter(|m| !listed.iter().any(|e| e.is(&m.dns_name, "TXT")))
            .cloned(),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan_tests::snapshot;

    fn plan(listed: &[Endpoint], addresses: &[&str], owner: &str) -> (Changes, Vec<String>) {
        let registry = Registry {
            owner: owner.to_owned(),
            wildcard: None,
        };
        let w = wanted(listed, &snapshot(addresses), &registry);
        (changes(listed, &w.names, &w.records, &w.marks), w.foreign)
    }

    fn txt(name: &str, text: &str) -> Endpoint {
        Endpoint::new(name, "TXT", vec![text.into()], 0)
    }

    #[test]
    fn a_free_name_is_claimed_with_external_dns_marks_and_filled_in_one_change() {
        let (c, foreign) = plan(&[], &["192.0.2.1", "2001:db8::1"], "eu-1");
        assert!(foreign.is_empty());
        let created: Vec<(&str, &str, &str)> = c
            .create
            .iter()
            .map(|e| {
                (
                    e.dns_name.as_str(),
                    e.record_type.as_str(),
                    e.targets[0].as_str(),
                )
            })
            .collect();
        let mark = "\"heritage=external-dns,external-dns/owner=eu-1,external-dns/resource=health-orchestrator/t\"";
        assert_eq!(
            created,
            [
                ("api.example.com", "A", "192.0.2.1"),
                ("api.example.com", "AAAA", "2001:db8::1"),
                ("a-api.example.com", "TXT", mark),
                ("aaaa-api.example.com", "TXT", mark),
            ]
        );
    }

    #[test]
    fn what_differs_is_replaced_and_a_family_gone_is_deleted() {
        let mark = txt("a-api.example.com", &mark_text("eu-1", "t"));
        let a = Endpoint::new("api.example.com", "A", vec!["192.0.2.1".into()], 60);
        let aaaa = Endpoint::new("API.example.com.", "AAAA", vec!["2001:db8::1".into()], 60);
        let listed = [mark.clone(), a.clone(), aaaa.clone()];
        let (c, _) = plan(&listed, &["192.0.2.2"], "eu-1");
        assert_eq!(c.update_old, std::slice::from_ref(&a));
        assert_eq!(c.update_new[0].targets, ["192.0.2.2"]);
        assert_eq!(c.delete, [aaaa], "no v6 address is left");
        assert!(c.create.is_empty(), "the name is marked already");
        let (same, _) = plan(&listed[..2], &["192.0.2.1"], "eu-1");
        assert!(same.is_empty(), "{same:?}");
    }

    #[test]
    fn names_of_others_are_left_alone_whatever_the_format_of_their_mark() {
        let a = Endpoint::new("api.example.com", "A", vec!["192.0.2.1".into()], 60);
        let (c, foreign) = plan(std::slice::from_ref(&a), &["192.0.2.9"], "eu-1");
        assert_eq!(foreign, ["api.example.com"], "addresses without a mark");
        assert!(c.is_empty());
        let theirs = txt("a-api.example.com", &mark_text("external-dns", "ingress/x"));
        let (_, foreign) = plan(&[theirs], &["192.0.2.9"], "eu-1");
        assert_eq!(foreign, ["api.example.com"], "another owner's mark");
        let old_format = txt(
            "api.example.com",
            "\"heritage=external-dns,external-dns/owner=default\"",
        );
        let (_, foreign) = plan(&[old_format], &["192.0.2.9"], "eu-1");
        assert_eq!(foreign, ["api.example.com"], "a mark in the old format");
        let spf = txt("api.example.com", "\"v=spf1 -all\"");
        let (c, foreign) = plan(&[spf], &["192.0.2.9"], "eu-1");
        assert!(
            foreign.is_empty() && !c.create.is_empty(),
            "SPF is not a mark"
        );
    }

    #[test]
    fn registry_texts_are_read_as_external_dns_writes_them() {
        assert_eq!(owner_in(&mark_text("eu-1", "t")), Some("eu-1"));
        assert_eq!(
            owner_in("heritage=external-dns,external-dns/owner=default,external-dns/resource=service/ns/x"),
            Some("default")
        );
        assert_eq!(owner_in("\"v=spf1 -all\""), None);
        let plain = Registry {
            owner: "eu-1".into(),
            wildcard: None,
        };
        assert_eq!(
            plain.mark_name("AAAA", "api.example.com"),
            "aaaa-api.example.com"
        );
    }

    /// A wildcard's marks are named as external-dns names them with
    /// `--txt-wildcard-replacement`, so one deployment's marks are the other's.
    #[test]
    fn a_wildcards_marks_carry_the_replacement() {
        let registry = Registry {
            owner: "eu-1".into(),
            wildcard: Some("wildcard".into()),
        };
        assert_eq!(
            registry.mark_name("A", "*.apps.example.com"),
            "a-wildcard.apps.example.com"
        );
        assert_eq!(
            registry.mark_name("A", "api.example.com"),
            "a-api.example.com"
        );
    }
}
