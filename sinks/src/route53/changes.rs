//! From the zone as listed and the record sets tenants want, the changes to send: ownership
//! rules first, then a diff per name, then packing into as few `ChangeResourceRecordSets`
//! batches as Route53's limits allow. Pure, so every rule is unit-tested.

use std::collections::BTreeMap;

use super::records::{owner_record, RecordSet, WEIGHTED_LABEL};
use ho_engine::sink::ownership::{owner_in, OWNER_PREFIX};

/// Route53 limit: `ResourceRecord` elements in one request.
pub const MAX_BATCH_RECORDS: usize = 1000;
/// Route53 limit: characters of `Value` elements in one request.
pub const MAX_BATCH_CHARS: usize = 32_000;

/// One change. Deletes name the listed record set by index, because Route53 deletes only
/// on an exact match of what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordChange {
    /// Delete `zone[index]`.
    Delete(usize),
    /// Create this record set; refused by Route53 if it exists (used where the name was
    /// free when listed, so a concurrent writer makes the whole batch fail, not overwrite).
    Create(RecordSet),
    /// Create or replace the record set with this name, type and set identifier (used at
    /// names we own).
    Upsert(RecordSet),
}

/// What one tenant needs.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct TenantChanges {
    /// One group per name: deletes first, then creates. A group goes into one batch when it
    /// fits, so Route53 applies it atomically (no moment without records).
    pub groups: Vec<Vec<RecordChange>>,
    /// Names left alone, with why.
    pub refused: Vec<String>,
}

/// Decides the changes for one tenant's `desired` names in `zone`.
///
/// A name is ours only with our ownership record `_health-orchestrator.<name>` TXT. A name
/// with A/AAAA/CNAME records but no ownership record, or another owner's, is never touched, even
/// when the tenant wants it. A free name is claimed with the ownership record in the same
/// batch as its first records.
pub fn for_tenant(
    zone: &[RecordSet],
    desired: &BTreeMap<String, Vec<RecordSet>>,
    owner_id: &str,
) -> TenantChanges {
    let mut by_name: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, r) in zone.iter().enumerate() {
        by_name.entry(r.name.as_str()).or_default().push(i);
    }
    let mut out = TenantChanges::default();
    // A location's weighted names before the names whose aliases point at them, so an alias
    // is never created before its target.
    let weighted = |n: &&String| n.contains(&format!(".{WEIGHTED_LABEL}."));
    let order = desired
        .iter()
        .filter(|(n, _)| weighted(n))
        .chain(desired.iter().filter(|(n, _)| !weighted(n)));
    for (name, want) in order {
        let at = |n: &str| by_name.get(n).map_or(&[][..], Vec::as_slice);
        let managed: Vec<usize> = at(name)
            .iter()
            .copied()
            .filter(|&i| matches!(zone[i].rtype.as_str(), "A" | "AAAA" | "CNAME"))
            .collect();
        let owner_name = format!("{OWNER_PREFIX}{name}");
        let owners: Vec<&str> = at(&owner_name)
            .iter()
            .filter(|&&i| zone[i].rtype == "TXT")
            .flat_map(|&i| zone[i].values.iter().filter_map(|v| owner_in(v)))
            .collect();
        let mut group = Vec::new();
        match owners.as_slice() {
            [] if !managed.is_empty() => {
                out.refused.push(format!(
                    "{name} has A/AAAA/CNAME records without an ownership record ({owner_name} TXT); left alone"
                ));
                continue;
            }
            [] if want.is_empty() => continue,
            [] => group.push(RecordChange::Create(owner_record(name, owner_id))),
            [one] if *one == owner_id => {}
            others => {
                out.refused.push(format!(
                    "{name} is owned by {} (per {owner_name} TXT), not by {owner_id}; left alone",
                    others.join(", ")
                ));
                continue;
            }
        }
        let claimed = !group.is_empty();
        group.extend(changes_of_name(zone, &managed, want, claimed));
        if !group.is_empty() {
            out.groups.push(group);
        }
    }
    out
}

/// The changes that make one owned name's `managed` record sets (indices into `zone`)
/// match `want`: deletes first, then creates and upserts. `claimed`: the name is claimed
/// in this batch, so nothing of ours exists there yet to upsert over.
fn changes_of_name(
    zone: &[RecordSet],
    managed: &[usize],
    want: &[RecordSet],
    claimed: bool,
) -> Vec<RecordChange> {
    let stale: Vec<usize> = managed
        .iter()
        .copied()
        .filter(|&i| !want.contains(&zone[i]))
        .collect();
    let mut writes = Vec::new();
    let mut upserted = Vec::new();
    for w in want
        .iter()
        .filter(|w| !managed.iter().any(|&i| &zone[i] == *w))
    {
        let same_key = |i: &&usize| zone[**i].rtype == w.rtype && zone[**i].set_id == w.set_id;
        match stale.iter().find(same_key) {
            // New values or TTL under the same key and routing: an UPSERT replaces the
            // set in place (and does not depend on the listed values still matching,
            // which another cluster writing the same name may have changed).
            Some(&i) if zone[i].routing == w.routing && !claimed => {
                upserted.push(i);
                writes.push(RecordChange::Upsert(w.clone()));
            }
            // Its routing changed: Route53's documented way is DELETE then CREATE in
            // one batch.
            Some(_) => writes.push(RecordChange::Create(w.clone())),
            None if claimed => writes.push(RecordChange::Create(w.clone())),
            None => writes.push(RecordChange::Upsert(w.clone())),
        }
    }
    let mut group: Vec<RecordChange> = stale
        .into_iter()
        .filter(|i| !upserted.contains(i))
        .map(RecordChange::Delete)
        .collect();
    group.extend(writes);
    group
}

/// The size of a change against the batch limits: (records, value characters).
pub fn cost(change: &RecordChange, zone: &[RecordSet]) -> (usize, usize) {
    let (set, times) = match change {
        RecordChange::Delete(i) => (&zone[*i], 1),
        RecordChange::Create(r) => (r, 1),
        // Route53 counts an UPSERT's records and characters twice.
        RecordChange::Upsert(r) => (r, 2),
    };
    (
        times * set.values.len(),
        times * set.values.iter().map(String::len).sum::<usize>(),
    )
}

/// Packs groups of changes into batches within the limits, in order; `cost` sizes one
/// change. Groups stay whole when they fit in a batch of their own; a group larger than a
/// whole batch is split (its deletes come first).
pub fn pack<T>(groups: Vec<Vec<T>>, cost: impl Fn(&T) -> (usize, usize)) -> Vec<Vec<T>> {
    let mut batches: Vec<Vec<T>> = Vec::new();
    let mut current: Vec<T> = Vec::new();
    let (mut records, mut chars) = (0, 0);
    let fits = |r: usize, c: usize| r <= MAX_BATCH_RECORDS && c <= MAX_BATCH_CHARS;
    for group in groups {
        let (gr, gc) = group
            .iter()
            .map(&cost)
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        if !fits(records + gr, chars + gc) && !current.is_empty() {
            batches.push(std::mem::take(&mut current));
            (records, chars) = (0, 0);
        }
        if fits(gr, gc) {
            current.extend(group);
            (records, chars) = (records + gr, chars + gc);
            continue;
        }
        for change in group {
            let (r, c) = cost(&change);
            if !fits(records + r, chars + c) && !current.is_empty() {
                batches.push(std::mem::take(&mut current));
                (records, chars) = (0, 0);
            }
            current.push(change);
            (records, chars) = (records + r, chars + c);
        }
    }
    if !current.is_empty() {
        batches.push(current);
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::super::records::{Alias, Routing};
    use super::*;

    fn a(name: &str, id: &str, value: &str) -> RecordSet {
        RecordSet {
            name: name.into(),
            rtype: "A".into(),
            set_id: Some(id.into()),
            routing: Routing::MultiValue,
            ttl: 30,
            values: vec![value.into()],
            alias: None,
        }
    }

    fn want(name: &str, sets: Vec<RecordSet>) -> BTreeMap<String, Vec<RecordSet>> {
        BTreeMap::from([(name.to_string(), sets)])
    }

    #[test]
    fn a_free_name_is_claimed_with_its_first_records() {
        let c = for_tenant(&[], &want("w.", vec![a("w.", "gw-1", "10.0.0.1")]), "me");
        assert_eq!(
            c.groups,
            vec![vec![
                RecordChange::Create(owner_record("w.", "me")),
                RecordChange::Create(a("w.", "gw-1", "10.0.0.1"))
            ]]
        );
        assert!(c.refused.is_empty());
    }

    /// An alias must find its target: a location's weighted name is written before the
    /// tenant's name whose alias points at it, whatever their order by name.
    #[test]
    fn weighted_names_are_written_before_the_names_aliasing_them() {
        let tree = "ie._weighted.api.";
        let mut alias = a("api.", "IE", "");
        (alias.values, alias.alias) = (Vec::new(), Some(Alias::here(tree)));
        let mut desired = want("api.", vec![alias]);
        desired.insert(tree.into(), vec![a(tree, "gw-1", "10.0.0.1")]);
        let c = for_tenant(&[], &desired, "me");
        let first_names: Vec<&str> = c
            .groups
            .iter()
            .map(|g| match &g[0] {
                RecordChange::Create(r) => r.name.as_str(),
                other => panic!("a claim first: {other:?}"),
            })
            .collect();
        assert_eq!(
            first_names,
            [
                "_health-orchestrator.ie._weighted.api.",
                "_health-orchestrator.api."
            ]
        );
    }

    #[test]
    fn an_owned_name_gets_only_the_difference_deletes_first() {
        let zone = vec![
            owner_record("w.", "me"),
            a("w.", "gw-1", "10.0.0.1"),
            a("w.", "gw-2", "10.0.0.2"),
        ];
        let c = for_tenant(
            &zone,
            &want(
                "w.",
                vec![a("w.", "gw-1", "10.0.0.1"), a("w.", "gw-3", "10.0.0.3")],
            ),
            "me",
        );
        assert_eq!(
            c.groups,
            vec![vec![
                RecordChange::Delete(2),
                RecordChange::Upsert(a("w.", "gw-3", "10.0.0.3"))
            ]]
        );
        let same = for_tenant(&zone, &want("w.", zone[1..].to_vec()), "me");
        assert_eq!(same, TenantChanges::default());
    }

    #[test]
    fn new_values_under_the_same_key_and_routing_are_upserted_in_place() {
        let zone = vec![owner_record("w.", "me"), a("w.", "gw-1", "10.0.0.1")];
        let moved = a("w.", "gw-1", "10.0.0.9");
        let c = for_tenant(&zone, &want("w.", vec![moved.clone()]), "me");
        assert_eq!(c.groups, vec![vec![RecordChange::Upsert(moved)]]);
    }

    #[test]
    fn a_record_set_whose_routing_changes_is_deleted_then_created() {
        let zone = vec![owner_record("w.", "me"), a("w.", "gw-1", "10.0.0.1")];
        let mut weighted = a("w.", "gw-1", "10.0.0.1");
        weighted.routing = Routing::Weighted(5);
        let c = for_tenant(&zone, &want("w.", vec![weighted.clone()]), "me");
        assert_eq!(
            c.groups,
            vec![vec![
                RecordChange::Delete(1),
                RecordChange::Create(weighted.clone())
            ]]
        );
        assert_eq!(cost(&RecordChange::Upsert(weighted), &zone), (2, 16));
    }

    #[test]
    fn records_without_an_owner_record_are_never_touched() {
        let zone = vec![a("w.", "theirs", "192.0.2.1")];
        let c = for_tenant(&zone, &want("w.", vec![a("w.", "gw-1", "10.0.0.1")]), "me");
        assert!(c.groups.is_empty());
        assert_eq!(
            c.refused,
            vec!["w. has A/AAAA/CNAME records without an ownership record (_health-orchestrator.w. TXT); left alone"]
        );
        let emptied = for_tenant(&zone, &want("w.", vec![]), "me");
        assert!(emptied.groups.is_empty());
    }

    #[test]
    fn another_owners_name_is_never_touched() {
        let zone = vec![owner_record("w.", "other"), a("w.", "gw-1", "10.0.0.1")];
        let c = for_tenant(&zone, &want("w.", vec![]), "me");
        assert!(c.groups.is_empty());
        assert!(c.refused[0].contains("owned by other"), "{:?}", c.refused);
    }

    #[test]
    fn an_owned_name_emptied_keeps_its_owner_record() {
        let zone = vec![owner_record("w.", "me"), a("w.", "gw-1", "10.0.0.1")];
        let c = for_tenant(&zone, &want("w.", vec![]), "me");
        assert_eq!(c.groups, vec![vec![RecordChange::Delete(1)]]);
    }

    #[test]
    fn packing_respects_the_record_limit_and_keeps_groups_whole() {
        let zone = Vec::new();
        let group = |n: usize| -> Vec<RecordChange> {
            (0..n)
                .map(|i| RecordChange::Create(a("w.", &i.to_string(), "10.0.0.1")))
                .collect()
        };
        let batches = pack(vec![group(600), group(300), group(200)], |c| cost(c, &zone));
        assert_eq!(
            batches.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![900, 200]
        );
        let split = pack(vec![group(10), group(2500)], |c| cost(c, &zone));
        assert_eq!(
            split.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![10, 1000, 1000, 500]
        );
        assert!(pack(Vec::<Vec<RecordChange>>::new(), |c| cost(c, &zone)).is_empty());
    }

    #[test]
    fn packing_respects_the_character_limit() {
        let long = "x".repeat(255);
        let zone = Vec::new();
        let group: Vec<RecordChange> = (0..200)
            .map(|i| {
                let mut r = a("w.", &i.to_string(), "");
                r.values = vec![long.clone()];
                RecordChange::Create(r)
            })
            .collect();
        let batches = pack(vec![group], |c| cost(c, &zone));
        assert_eq!(
            batches.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![125, 75]
        );
    }
}
