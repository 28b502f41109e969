//! What one write of a tenant changes in an Azure DNS zone, decided from a listing: for
//! each of its names, the ownership mark first (a name is ours only with our TXT mark at
//! `_health-orchestrator.<name>`; one without it holding records, or with another owner's
//! mark, is left alone and reported), then each A and AAAA set that differs, replaced or
//! removed on the condition that it is still as listed.

use ho_engine::snapshot::TenantSnapshot;

use super::api::{body, Listed, Op};
use ho_engine::sink::ownership::{mark_text, owner_in, OWNER_PREFIX, OWNER_TTL};

/// A tenant's write.
#[derive(Debug, Default)]
pub struct Planned {
    /// The sets to put and delete, the mark first.
    pub ops: Vec<Op>,
    /// Names left alone because they are someone else's.
    pub foreign: Vec<String>,
}

/// The changes that make `listing` publish `snapshot`, as owner `owner`.
pub fn for_tenant(listing: &[Listed], snapshot: &TenantSnapshot, owner: &str) -> Planned {
    let mut planned = Planned::default();
    let ttl = snapshot.ttl.as_secs();
    for name in &snapshot.domains {
        let at = |rtype: &str, n: &str| {
            listing
                .iter()
                .find(|s| s.rtype == rtype && s.name.eq_ignore_ascii_case(n))
        };
        let mark_name = format!("{OWNER_PREFIX}{name}");
        let mark = at("TXT", &mark_name);
        let owners: Vec<&str> = mark
            .into_iter()
            .flat_map(|s| s.data.iter())
            .filter_map(|d| owner_in(d))
            .collect();
        let mine = owners.contains(&owner);
        let held = ["A", "AAAA", "CNAME"].iter().any(|t| at(t, name).is_some());
        if !mine && (held || !owners.is_empty()) {
            planned.foreign.push(name.clone());
            continue;
        }
        if !mine {
            planned.ops.push(Op::Put {
                rtype: "TXT".into(),
                name: mark_name,
                body: body("TXT", u64::from(OWNER_TTL), &[mark_text(owner)]),
                etag: None,
            });
        }
        for (rtype, v6) in [("A", false), ("AAAA", true)] {
            let mut data: Vec<String> = snapshot
                .addresses
                .iter()
                .filter(|a| a.address.is_ipv6() == v6)
                .map(|a| a.address.to_string())
                .collect();
            data.sort();
            let old = at(rtype, name);
            match old {
                Some(o) if o.ttl == ttl && o.data == data => {}
                Some(o) if data.is_empty() => planned.ops.push(Op::Delete {
                    rtype: rtype.into(),
                    name: name.clone(),
                    etag: o.etag.clone(),
                }),
                None if data.is_empty() => {}
                _ => planned.ops.push(Op::Put {
                    rtype: rtype.into(),
                    name: name.clone(),
                    body: body(rtype, ttl, &data),
                    etag: old.map(|o| o.etag.clone()),
                }),
            }
        }
    }
    planned
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan_tests::snapshot;

    fn listed(name: &str, rtype: &str, data: &[&str], etag: &str) -> Listed {
        Listed {
            name: name.into(),
            rtype: rtype.into(),
            ttl: 60,
            data: data.iter().map(|d| (*d).to_owned()).collect(),
            etag: etag.into(),
        }
    }

    #[test]
    fn a_new_name_is_claimed_then_filled_each_set_created_only_if_absent() {
        let p = for_tenant(&[], &snapshot(&["192.0.2.1", "2001:db8::1"]), "eu-1");
        let shape: Vec<(&str, &str, Option<&str>)> = p
            .ops
            .iter()
            .map(|op| match op {
                Op::Put {
                    rtype, name, etag, ..
                } => (rtype.as_str(), name.as_str(), etag.as_deref()),
                Op::Delete { .. } => panic!("nothing to delete"),
            })
            .collect();
        assert_eq!(
            shape,
            [
                ("TXT", "_health-orchestrator.api.example.com", None),
                ("A", "api.example.com", None),
                ("AAAA", "api.example.com", None)
            ]
        );
    }

    #[test]
    fn changed_sets_are_replaced_or_removed_on_their_etag_and_foreign_names_left_alone() {
        let mark = listed(
            "_health-orchestrator.api.example.com",
            "TXT",
            &["heritage=health-orchestrator,owner=eu-1"],
            "m",
        );
        let zone = [
            mark.clone(),
            listed("api.example.com", "A", &["192.0.2.1", "192.0.2.2"], "a1"),
            listed("api.example.com", "AAAA", &["2001:db8::1"], "q1"),
        ];
        let p = for_tenant(&zone, &snapshot(&["192.0.2.1"]), "eu-1");
        assert!(
            matches!(&p.ops[0], Op::Put { rtype, etag: Some(e), .. } if rtype == "A" && e == "a1")
        );
        assert!(
            matches!(&p.ops[1], Op::Delete { rtype, etag, .. } if rtype == "AAAA" && etag == "q1")
        );
        let same = for_tenant(&zone[..2], &snapshot(&["192.0.2.2", "192.0.2.1"]), "eu-1");
        assert!(same.ops.is_empty());
        let theirs = for_tenant(
            &[listed("api.example.com", "A", &["192.0.2.9"], "x")],
            &snapshot(&["192.0.2.1"]),
            "eu-1",
        );
        assert_eq!(theirs.foreign, ["api.example.com"]);
        assert!(theirs.ops.is_empty());
    }
}
