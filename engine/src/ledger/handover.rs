//! A replica starting to record into its ledger folder: the time nobody recorded, and
//! what this replica saw meanwhile.

use std::collections::HashMap;

use super::book::{Change, Condition};
use super::store::{Mark, Store, StoreError};
use super::UNRECORDED;

/// This replica started recording: when nobody recorded from the folder's last mark
/// until this replica `started` (a stop, a writer gone without a successor), that time is
/// marked unknown; then each name gets what this replica saw since the file's last record
/// (kept in `recent` whether or not it recorded: the time between becoming the writer and
/// this call, a writer that stopped marking a while before its successor took over), and
/// its condition now where the file still differs. Returns the changes to append.
pub(super) fn take_over<'a>(
    store: &mut Store,
    recent: &HashMap<String, Vec<(u64, Condition)>>,
    current: impl IntoIterator<Item = (&'a str, Condition, u64)>,
    started: u64,
) -> Result<Vec<Change>, StoreError> {
    store.forget_tails();
    let gap = (store.alive().map(|m| m.at)).filter(|a| started.saturating_sub(*a) > UNRECORDED);
    let mut names: Vec<String> = store.names()?;
    names.extend(recent.keys().cloned());
    names.sort();
    names.dedup();
    let current: HashMap<&str, (Condition, u64)> = (current.into_iter())
        .map(|(n, c, since)| (n, (c, since)))
        .collect();
    let mut changes = Vec::new();
    for name in names {
        let mut last = store.read(&name)?.last().copied();
        let mut add = |at: u64, condition: Condition, last: &mut Option<(u64, Condition)>| {
            if last.map(|(_, c)| c) != Some(condition) {
                let at = at.max(last.map_or(0, |(t, _)| t));
                *last = Some((at, condition));
                changes.push(Change {
                    name: name.clone(),
                    tenant: String::new(),
                    at,
                    condition,
                });
            }
        };
        if let (Some(from), Some(_)) = (gap, last) {
            add(from, Condition::UNKNOWN, &mut last);
        }
        let after = last.map_or(0, |(t, _)| t);
        for &(at, condition) in recent.get(&name).into_iter().flatten() {
            if at > after {
                add(at, condition, &mut last);
            }
        }
        if let Some(&(condition, since)) = current.get(name.as_str()) {
            add(since, condition, &mut last);
        }
    }
    Ok(changes)
}

/// The replica other than `me` that marked the folder recently (recording into it now),
/// if any.
pub(super) fn other_recorder(mark: Option<Mark>, me: &str, now: u64) -> Option<String> {
    mark.filter(|m| m.by != me && now.saturating_sub(m.at) <= UNRECORDED)
        .map(|m| m.by)
}

#[cfg(test)]
mod tests {
    use super::super::book::Served;
    use super::*;

    const ANSWERED: Condition = Condition {
        served: Served::Answered,
        maintenance: false,
    };
    const DEAD: Condition = Condition {
        served: Served::DeadAddress,
        maintenance: false,
    };
    const NAME: &str = "shop.example.com";

    /// A folder whose last writer recorded `ANSWERED` at 5 s and marked it at 10 s.
    fn folder() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        let change = Change {
            name: NAME.into(),
            tenant: String::new(),
            at: 5_000,
            condition: ANSWERED,
        };
        store.append(&[change]).unwrap();
        store.mark_alive(10_000, "a").unwrap();
        (dir, store)
    }

    /// A replica that was following all along records what it saw after the last
    /// writer's last record: no time is lost to the handover.
    #[test]
    fn a_replica_that_was_following_continues_from_the_files_last_record() {
        let (_dir, mut store) = folder();
        let recent = HashMap::from([(
            NAME.to_owned(),
            vec![(1_000, ANSWERED), (12_000, DEAD), (14_000, ANSWERED)],
        )]);
        let changes = take_over(&mut store, &recent, [(NAME, ANSWERED, 14_000)], 0).unwrap();
        store.append(&changes).unwrap();
        assert_eq!(
            store.read(NAME).unwrap(),
            [(5_000, ANSWERED), (12_000, DEAD), (14_000, ANSWERED)]
        );
    }

    /// Started well after the last mark: the time between is unknown, then what it saw.
    #[test]
    fn time_nobody_recorded_is_unknown() {
        let (_dir, mut store) = folder();
        let recent = HashMap::from([(NAME.to_owned(), vec![(100_500, DEAD)])]);
        let changes = take_over(&mut store, &recent, [(NAME, DEAD, 100_500)], 100_000).unwrap();
        store.append(&changes).unwrap();
        assert_eq!(
            store.read(NAME).unwrap(),
            [
                (5_000, ANSWERED),
                (10_000, Condition::UNKNOWN),
                (100_500, DEAD)
            ]
        );
    }

    /// The old writer's last record says one thing, this replica's view another since
    /// before it: its view holds from that record on.
    #[test]
    fn a_view_that_differs_from_the_last_record_holds_from_it() {
        let (_dir, mut store) = folder();
        let recent = HashMap::from([(NAME.to_owned(), vec![(1_000, DEAD)])]);
        let changes = take_over(&mut store, &recent, [(NAME, DEAD, 1_000)], 0).unwrap();
        store.append(&changes).unwrap();
        assert_eq!(
            store.read(NAME).unwrap(),
            [(5_000, ANSWERED), (5_000, DEAD)]
        );
    }

    /// Another replica's mark within 30 s is someone recording; an old one, or this
    /// replica's own, is not.
    #[test]
    fn a_recent_mark_of_another_replica_is_someone_recording() {
        let mark = |at: u64, by: &str| {
            Some(Mark {
                at,
                by: by.to_owned(),
            })
        };
        assert_eq!(
            other_recorder(mark(10_000, "a"), "b", 35_000).as_deref(),
            Some("a")
        );
        assert_eq!(other_recorder(mark(10_000, "a"), "b", 45_000), None);
        assert_eq!(other_recorder(mark(10_000, "b"), "b", 11_000), None);
        assert_eq!(other_recorder(None, "b", 11_000), None);
    }
}
