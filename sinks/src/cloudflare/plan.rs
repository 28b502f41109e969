//! What one write of a tenant changes in a Cloudflare zone, decided from a listing: for each
//! of its names, the ownership mark first (a name is ours only with our TXT mark at
//! `_health-orchestrator.<name>`; one without it holding records, or with another owner's
//! mark, is left alone and reported), then the A, AAAA and CNAME records that differ. An
//! `answer = "cname"` tenant's names, the zone's apex included, hold one CNAME to the first
//! healthy host (`TenantSnapshot::cname`): Cloudflare flattens a CNAME at the apex into the
//! target's addresses (RFC 1912 2.4 forbids a CNAME there; Cloudflare answers A/AAAA).

use std::net::IpAddr;

use ho_engine::snapshot::TenantSnapshot;

use super::api::{Batch, DnsRecord, Id, NewRecord};
use ho_engine::sink::ownership::{mark_text, owner_in, OWNER_PREFIX, OWNER_TTL};

/// A tenant's write.
#[derive(Debug, Default)]
pub struct Planned {
    /// The records to delete and create.
    pub batch: Batch,
    /// Names left alone because they are someone else's.
    pub foreign: Vec<String>,
}

/// The changes that make `zone` (a listing) publish `snapshot`, as owner `owner`.
pub fn for_tenant(zone: &[DnsRecord], snapshot: &TenantSnapshot, owner: &str) -> Planned {
    let mut planned = Planned::default();
    let ttl = u32::try_from(snapshot.ttl.as_secs()).unwrap_or(u32::MAX);
    for name in &snapshot.domains {
        let at = |rtype, n| records_at(zone, rtype, n);
        let mark_name = format!("{OWNER_PREFIX}{name}");
        let owners: Vec<&str> = at("TXT", &mark_name)
            .filter_map(|r| owner_in(&r.content))
            .collect();
        let mine = owners.contains(&owner);
        let held = ["A", "AAAA", "CNAME"]
            .iter()
            .any(|t| at(t, name).next().is_some());
        if !mine && (held || !owners.is_empty()) {
            planned.foreign.push(name.clone());
            continue;
        }
        if !mine {
            planned.batch.posts.push(NewRecord {
                rtype: "TXT",
                name: mark_name.clone(),
                content: format!("\"{}\"", mark_text(owner)),
                ttl: OWNER_TTL,
                proxied: false,
            });
        }
        let cname = snapshot.cname();
        cname_changes(&mut planned.batch, at("CNAME", name), name, ttl, cname);
        for (rtype, v6) in [("A", false), ("AAAA", true)] {
            let wanted = snapshot.addresses.iter().map(|a| a.address);
            let wanted: Vec<IpAddr> = wanted
                .filter(|a| a.is_ipv6() == v6 && cname.is_none())
                .collect();
            let records = at(rtype, name);
            address_changes(&mut planned.batch, records, rtype, name, ttl, wanted);
        }
    }
    planned
}

/// Into `batch`: the delete of a CNAME at `name` that does not point at `host` with `ttl`,
/// and the post of that CNAME when none does. A batch deletes before it posts, so the
/// addresses a CNAME replaces go in the same batch (Cloudflare refuses a CNAME beside them,
/// 81053).
fn cname_changes<'a>(
    batch: &mut Batch,
    records: impl Iterator<Item = &'a DnsRecord>,
    name: &str,
    ttl: u32,
    host: Option<&str>,
) {
    let mut held = false;
    for record in records {
        let same = host.is_some_and(|h| {
            record.ttl == ttl && record.content.trim_end_matches('.').eq_ignore_ascii_case(h)
        });
        if same && !held {
            held = true;
        } else {
            batch.deletes.push(Id {
                id: record.id.clone(),
            });
        }
    }
    if let Some(host) = host.filter(|_| !held) {
        batch.posts.push(NewRecord {
            rtype: "CNAME",
            name: name.to_owned(),
            content: host.to_owned(),
            ttl,
            proxied: false,
        });
    }
}

/// Into `batch`: deletes of the `rtype` records at `name` that are not `wanted` at `ttl`,
/// posts of the `wanted` addresses no record holds.
fn address_changes<'a>(
    batch: &mut Batch,
    records: impl Iterator<Item = &'a DnsRecord>,
    rtype: &'static str,
    name: &str,
    ttl: u32,
    mut wanted: Vec<IpAddr>,
) {
    for record in records {
        let kept = record.ttl == ttl
            && record
                .content
                .parse::<IpAddr>()
                .ok()
                .and_then(|a| wanted.iter().position(|w| *w == a))
                .map(|i| wanted.swap_remove(i))
                .is_some();
        if !kept {
            batch.deletes.push(Id {
                id: record.id.clone(),
            });
        }
    }
    batch.posts.extend(wanted.into_iter().map(|a| NewRecord {
        rtype,
        name: name.to_owned(),
        content: a.to_string(),
        ttl,
        proxied: false,
    }));
}

/// The records of type `rtype` at `name` (names compared without case).
fn records_at<'a>(
    zone: &'a [DnsRecord],
    rtype: &'a str,
    name: &'a str,
) -> impl Iterator<Item = &'a DnsRecord> + 'a {
    zone.iter()
        .filter(move |r| r.rtype == rtype && r.name.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan_tests::snapshot;
    use ho_engine::snapshot::PublishedAddress;

    fn record(id: &str, rtype: &str, name: &str, content: &str, ttl: u32) -> DnsRecord {
        DnsRecord {
            id: id.into(),
            rtype: rtype.into(),
            name: name.into(),
            content: content.into(),
            ttl,
        }
    }

    /// Owner `eu-1`'s mark at `api.example.com`.
    fn eu1_mark() -> DnsRecord {
        record(
            "m",
            "TXT",
            "_health-orchestrator.api.example.com",
            "\"heritage=health-orchestrator,owner=eu-1\"",
            300,
        )
    }

    /// The (type, content) of every record `p` posts, in order.
    fn posted(p: &Planned) -> Vec<(&str, &str)> {
        let posts = p.batch.posts.iter();
        posts.map(|r| (r.rtype, r.content.as_str())).collect()
    }

    #[test]
    fn a_new_name_is_claimed_and_filled_in_one_batch() {
        let p = for_tenant(&[], &snapshot(&["192.0.2.1", "2001:db8::1"]), "eu-1");
        assert!(p.foreign.is_empty());
        let posts = posted(&p);
        assert_eq!(
            posts,
            [
                ("TXT", "\"heritage=health-orchestrator,owner=eu-1\""),
                ("A", "192.0.2.1"),
                ("AAAA", "2001:db8::1")
            ]
        );
    }

    #[test]
    fn only_what_differs_changes_and_foreign_names_are_left_alone() {
        let mark = eu1_mark();
        let zone = [
            mark.clone(),
            record("1", "A", "api.example.com", "192.0.2.1", 60),
            record("2", "A", "api.example.com", "192.0.2.2", 60),
            record("3", "A", "API.example.com", "192.0.2.3", 300),
        ];
        let p = for_tenant(&zone, &snapshot(&["192.0.2.1", "192.0.2.3"]), "eu-1");
        let deletes: Vec<&str> = p.batch.deletes.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(
            deletes,
            ["2", "3"],
            "a stale address, and one with another TTL"
        );
        let posts: Vec<&str> = p.batch.posts.iter().map(|r| r.content.as_str()).collect();
        assert_eq!(posts, ["192.0.2.3"]);
        let unchanged = for_tenant(&zone[..2], &snapshot(&["192.0.2.1"]), "eu-1");
        assert!(unchanged.batch.is_empty());

        let unmarked = [record("1", "A", "api.example.com", "192.0.2.1", 60)];
        let p = for_tenant(&unmarked, &snapshot(&["192.0.2.9"]), "eu-1");
        assert_eq!(p.foreign, ["api.example.com"]);
        assert!(p.batch.is_empty());
        let theirs = for_tenant(&[mark], &snapshot(&["192.0.2.9"]), "us-1");
        assert_eq!(theirs.foreign, ["api.example.com"], "another owner's mark");
    }

    #[test]
    fn a_cname_replaces_addresses_in_one_batch_and_moves_with_the_host() {
        let mark = eu1_mark();
        let cname_to = |host: &str| {
            let mut s = snapshot(&[]);
            s.answer = ho_engine::snapshot::Answer::Cname;
            s.addresses = vec![PublishedAddress::of_host(
                host,
                "192.0.2.1".parse().unwrap(),
                0,
                1,
            )];
            s
        };
        let zone = [
            mark.clone(),
            record("1", "A", "api.example.com", "192.0.2.1", 60),
        ];
        let p = for_tenant(&zone, &cname_to("lb-east.example.net"), "eu-1");
        let deletes: Vec<&str> = p.batch.deletes.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(deletes, ["1"], "the address gives way");
        let posts = posted(&p);
        assert_eq!(posts, [("CNAME", "lb-east.example.net")]);

        let now = [
            mark.clone(),
            record("2", "CNAME", "api.example.com", "lb-east.example.net", 60),
        ];
        assert!(for_tenant(&now, &cname_to("lb-east.example.net"), "eu-1")
            .batch
            .is_empty());
        let moved = for_tenant(&now, &cname_to("lb-west.example.net"), "eu-1");
        assert_eq!(moved.batch.deletes.len(), 1);
        assert_eq!(moved.batch.posts[0].content, "lb-west.example.net");
        let back = for_tenant(&now, &snapshot(&["192.0.2.1"]), "eu-1");
        assert_eq!(
            back.batch.deletes.len(),
            1,
            "addresses again: the CNAME goes"
        );
        assert_eq!(back.batch.posts[0].rtype, "A");
    }
}
