//! The ledger on disk: one append-only file per name under `<state_dir>/ledger/names/`
//! (the bytes: [`super::format`]). Why one file per name: the question asked is "this name
//! over 90 days", which then reads one small file (a name changing once an hour keeps 4
//! bytes a change, about 70 KB over 25 months); appends are a few per second at most, and
//! a torn append loses that record only.
//!
//! A file that is not a ledger file is moved aside (to `ledger/aside/`, named with the
//! time) and its name starts again; a file of a newer format is left alone and its name not
//! recorded. Neither stops the ledger, let alone the engine: each is a [`Trouble`] the
//! ledger reports.

use std::collections::{BTreeSet, HashMap};
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::book::{Change, Condition};
use super::format::{self, Records, Unreadable};

/// A ledger file or folder that cannot be read or written.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct StoreError {
    /// The file or folder.
    pub path: PathBuf,
    /// Why.
    pub source: io::Error,
}

fn at(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| StoreError {
        path: path.to_owned(),
        source,
    }
}

/// An append that did not reach the disk: the error and the changes still to write.
#[derive(Debug)]
pub struct Unwritten {
    /// The first failure.
    pub error: StoreError,
    /// The changes not written, in order.
    pub changes: Vec<Change>,
}

/// A file the store could not use as it is, as reported to operators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trouble {
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub why: Unreadable,
    /// Where it was moved (`None`: left where it is).
    pub moved_to: Option<PathBuf>,
}

impl std::fmt::Display for Trouble {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} is {}", self.path.display(), self.why)?;
        match &self.moved_to {
            Some(to) => write!(
                f,
                "; moved aside to {}, the name's history starts again",
                to.display()
            ),
            None => f.write_str("; left alone, and the name is not recorded by this version"),
        }
    }
}

/// The note of who recorded last, and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    /// Until when (unix milliseconds).
    pub at: u64,
    /// The replica's identity.
    pub by: String,
}

/// The ledger's files.
pub struct Store {
    names: PathBuf,
    aside: PathBuf,
    alive: PathBuf,
    /// Each name's latest record, once read or written: the base of its next delta.
    last: HashMap<String, (u64, Condition)>,
    /// Names whose file a newer version wrote: not appended to.
    newer: BTreeSet<String>,
    /// Files found unusable since the last [`Store::troubles`].
    troubles: Vec<Trouble>,
}

impl Store {
    /// The store under `dir` (created when missing).
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        let names = dir.join("names");
        fs::create_dir_all(&names).map_err(at(&names))?;
        Ok(Store {
            names,
            aside: dir.join("aside"),
            alive: dir.join("alive"),
            last: HashMap::new(),
            newer: BTreeSet::new(),
            troubles: Vec::new(),
        })
    }

    fn path(&self, name: &str) -> PathBuf {
        let plain = name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-._*".contains(&b))
            && !name.starts_with('.');
        if plain {
            self.names.join(name)
        } else {
            let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
            self.names.join(format!("%{hex}"))
        }
    }

    /// Every name with a file.
    pub fn names(&self) -> Result<Vec<String>, StoreError> {
        let mut out = Vec::new();
        for entry in fs::read_dir(&self.names).map_err(at(&self.names))? {
            let file = entry.map_err(at(&self.names))?.file_name();
            let file = file.to_string_lossy();
            match file.strip_prefix('%') {
                Some(hex) => {
                    let bytes: Option<Vec<u8>> = (0..hex.len())
                        .step_by(2)
                        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
                        .collect();
                    if let Some(name) = bytes.and_then(|b| String::from_utf8(b).ok()) {
                        out.push(name);
                    }
                }
                None if !file.ends_with(".new") => out.push(file.into_owned()),
                None => {}
            }
        }
        out.sort();
        Ok(out)
    }

    /// A name's changes, oldest first (none without a file, or with a file this version
    /// cannot use, which becomes a [`Trouble`]).
    pub fn read(&mut self, name: &str) -> Result<Records, StoreError> {
        Ok(self.load(name)?.map(|p| p.records).unwrap_or_default())
    }

    /// A name's file as parsed; `None` when there is none or it is unusable (moved aside
    /// when foreign, left alone when newer).
    fn load(&mut self, name: &str) -> Result<Option<format::Parsed>, StoreError> {
        let path = self.path(name);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(at(&path)(e)),
        };
        match format::parse(&bytes) {
            Ok(parsed) => Ok(Some(parsed)),
            Err(why @ Unreadable::Newer(_)) => {
                if self.newer.insert(name.to_owned()) {
                    self.note(Trouble {
                        path,
                        why,
                        moved_to: None,
                    });
                }
                Ok(None)
            }
            Err(why) => {
                let moved_to = self.set_aside(&path)?;
                self.note(Trouble {
                    path,
                    why,
                    moved_to: Some(moved_to),
                });
                Ok(None)
            }
        }
    }

    /// Moves `path` into the aside folder, named with the time.
    fn set_aside(&self, path: &Path) -> Result<PathBuf, StoreError> {
        fs::create_dir_all(&self.aside).map_err(at(&self.aside))?;
        let file = path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let stamp = crate::clock::unix_millis(std::time::SystemTime::now());
        let to = self.aside.join(format!("{file}.{stamp}"));
        fs::rename(path, &to).map_err(at(path))?;
        Ok(to)
    }

    fn note(&mut self, trouble: Trouble) {
        tracing::error!("availability ledger: {trouble}");
        self.troubles.push(trouble);
    }

    /// The files found unusable since the last call.
    pub fn troubles(&mut self) -> Vec<Trouble> {
        std::mem::take(&mut self.troubles)
    }

    /// Appends `changes` (in order) to their names' files. A name whose file a newer
    /// version wrote is skipped; a name that fails keeps its changes in the [`Unwritten`],
    /// and the other names are written all the same.
    pub fn append(&mut self, changes: &[Change]) -> Result<(), Unwritten> {
        let mut by_name: Vec<(&str, Vec<(u64, Condition)>)> = Vec::new();
        for c in changes {
            match by_name.iter_mut().find(|(n, _)| *n == c.name) {
                Some((_, list)) => list.push((c.at, c.condition)),
                None => by_name.push((&c.name, vec![(c.at, c.condition)])),
            }
        }
        let mut first = None;
        let mut failed = BTreeSet::new();
        for (name, list) in by_name {
            if let Err(e) = self.append_one(name, &list) {
                failed.insert(name.to_owned());
                first.get_or_insert(e);
            }
        }
        match first {
            None => Ok(()),
            Some(error) => Err(Unwritten {
                error,
                changes: changes
                    .iter()
                    .filter(|c| failed.contains(&c.name))
                    .cloned()
                    .collect(),
            }),
        }
    }

    fn append_one(&mut self, name: &str, list: &[(u64, Condition)]) -> Result<(), StoreError> {
        let last = match self.last.get(name) {
            Some(l) => Some(*l),
            None => self.tail(name)?,
        };
        if self.newer.contains(name) {
            return Ok(());
        }
        let path = self.path(name);
        let mut bytes = Vec::new();
        if last.is_none() && fs::metadata(&path).map_or(true, |m| m.len() == 0) {
            bytes.extend_from_slice(format::MAGIC);
        }
        let written = format::append(&mut bytes, last.map(|(t, _)| t), list);
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(at(&path))?;
        file.write_all(&bytes).map_err(at(&path))?;
        if let Some(l) = written {
            self.last.insert(name.to_owned(), l);
        }
        Ok(())
    }

    /// A name's latest record, read from its file, which is made ready for appends: a
    /// record cut short is cut off, a file of the first format is rewritten in the current
    /// one.
    fn tail(&mut self, name: &str) -> Result<Option<(u64, Condition)>, StoreError> {
        let path = self.path(name);
        let Some(parsed) = self.load(name)? else {
            return Ok(None);
        };
        if !parsed.current {
            self.replace(&path, &parsed.records)?;
        } else if parsed.used > 0
            && (parsed.used as u64) < fs::metadata(&path).map_err(at(&path))?.len()
        {
            let file = OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(at(&path))?;
            file.set_len(parsed.used as u64).map_err(at(&path))?;
        }
        Ok(parsed.records.last().copied())
    }

    /// Replaces `path` whole with `records` (written aside, then renamed).
    fn replace(&self, path: &Path, records: &[(u64, Condition)]) -> Result<(), StoreError> {
        let aside = path.with_extension("new");
        fs::write(&aside, format::encode(records)).map_err(at(&aside))?;
        fs::rename(&aside, path).map_err(at(path))
    }

    /// Drops what is older than `before` from every file: the condition at `before` is
    /// kept as the first record, so the window's start is still known.
    pub fn prune(&mut self, before: u64) -> Result<(), StoreError> {
        for name in self.names()? {
            let changes = self.read(&name)?;
            let cut = changes.partition_point(|(t, _)| *t < before);
            if cut == 0 || self.newer.contains(&name) {
                continue;
            }
            let mut kept = vec![(before, changes[cut - 1].1)];
            kept.extend_from_slice(&changes[cut..]);
            self.replace(&self.path(&name), &kept)?;
            self.last
                .insert(name, *kept.last().expect("one kept at least"));
        }
        Ok(())
    }

    /// Notes that replica `by` was recording up to `now`: after a stop, the time from the
    /// last such note to the next start is not known, and a standby that finds another
    /// replica's recent note defers to it.
    pub fn mark_alive(&self, now: u64, by: &str) -> Result<(), StoreError> {
        let mut bytes = now.to_le_bytes().to_vec();
        bytes.extend_from_slice(by.as_bytes());
        fs::write(&self.alive, bytes).map_err(at(&self.alive))
    }

    /// The last [`Store::mark_alive`], if any (`by` is empty in a note written before
    /// notes named the replica).
    pub fn alive(&self) -> Option<Mark> {
        let bytes = fs::read(&self.alive).ok()?;
        Some(Mark {
            at: u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?),
            by: String::from_utf8_lossy(&bytes[8..]).into_owned(),
        })
    }

    /// Forgets each name's latest record, so the next append reads it from the file
    /// again: another replica may have appended since (one folder mounted by several,
    /// while this one was not the writer).
    pub fn forget_tails(&mut self) {
        self.last.clear();
    }

    /// Bytes on disk in all.
    pub fn size(&self) -> u64 {
        fs::read_dir(&self.names)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::super::book::Served;
    use super::*;

    fn change(name: &str, at: u64, served: Served) -> Change {
        Change {
            name: name.into(),
            tenant: "t".into(),
            at,
            condition: Condition {
                served,
                maintenance: false,
            },
        }
    }

    #[test]
    fn appends_survive_a_reopen_a_torn_record_and_pruning() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        let t0 = 1_790_000_000_000;
        store
            .append(&[
                change("a.example.com", t0, Served::Answered),
                change("*.apps.example.com", t0, Served::Answered),
                change("a.example.com", t0 + 4_000, Served::DeadAddress),
            ])
            .unwrap();
        // A crash mid-append leaves half a record.
        let path = dir.path().join("names/a.example.com");
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[0x80]).unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        store
            .append(&[change("a.example.com", t0 + 4_250, Served::Answered)])
            .unwrap();
        let read = store.read("a.example.com").unwrap();
        let times: Vec<u64> = read.iter().map(|(t, _)| t - t0).collect();
        assert_eq!(times, [0, 4_000, 4_250]);
        assert_eq!(read[1].1.served, Served::DeadAddress);
        assert_eq!(
            store.names().unwrap(),
            ["*.apps.example.com", "a.example.com"]
        );
        store.prune(t0 + 4_100).unwrap();
        let read = store.read("a.example.com").unwrap();
        assert_eq!(
            read,
            [
                (
                    t0 + 4_100,
                    Condition {
                        served: Served::DeadAddress,
                        maintenance: false
                    }
                ),
                (
                    t0 + 4_250,
                    Condition {
                        served: Served::Answered,
                        maintenance: false
                    }
                )
            ]
        );
        store
            .append(&[change("a.example.com", t0 + 5_000, Served::Unanswered)])
            .unwrap();
        assert_eq!(store.read("a.example.com").unwrap().len(), 3);
        store.mark_alive(t0 + 6_000, "ho-0").unwrap();
        let mark = Mark {
            at: t0 + 6_000,
            by: "ho-0".into(),
        };
        assert_eq!(store.alive(), Some(mark));
    }

    /// A foreign file is moved aside and its name starts again, a newer version's file is
    /// left alone and not appended to, a first-format file is rewritten in the current one
    /// at its next append, an empty one is a name with no history yet: each but the last
    /// reported once as a trouble, none an error.
    #[test]
    fn unusable_files_are_set_aside_or_left_alone_and_old_ones_upgraded() {
        let dir = tempfile::tempdir().unwrap();
        let names = dir.path().join("names");
        let mut store = Store::open(dir.path()).unwrap();
        fs::write(names.join("junk.example.com"), b"junk").unwrap();
        fs::write(names.join("newer.example.com"), b"HOL9\x05").unwrap();
        fs::write(names.join("empty.example.com"), b"").unwrap();
        // HOL1: at 1,000 ms answered (code 1), 2,000 ms later dead address (code 2).
        fs::write(
            names.join("old.example.com"),
            [b"HOL1".as_slice(), &[0xc1, 0x3e, 0x82, 0x7d]].concat(),
        )
        .unwrap();

        assert_eq!(store.read("junk.example.com").unwrap(), []);
        assert!(!names.join("junk.example.com").exists());
        let troubles = store.troubles();
        assert_eq!(troubles.len(), 1, "{troubles:?}");
        let moved = troubles[0].moved_to.clone().unwrap();
        assert_eq!(fs::read(&moved).unwrap(), b"junk", "kept aside, as it was");
        assert!(
            troubles[0].to_string().contains("not a ledger file"),
            "{}",
            troubles[0]
        );

        let t0 = 1_790_000_000_000;
        let all = ["junk", "newer", "empty", "old"]
            .map(|n| change(&format!("{n}.example.com"), t0, Served::Answered));
        store.append(&all).unwrap();
        assert_eq!(
            fs::read(names.join("newer.example.com")).unwrap(),
            b"HOL9\x05",
            "left alone"
        );
        let troubles = store.troubles();
        assert_eq!(troubles.len(), 1, "{troubles:?}");
        assert!(
            troubles[0].moved_to.is_none() && troubles[0].to_string().contains("newer version")
        );
        for name in ["junk.example.com", "empty.example.com"] {
            assert_eq!(
                store.read(name).unwrap(),
                [(t0, all[0].condition)],
                "{name}"
            );
        }
        let old = store.read("old.example.com").unwrap();
        let dead = Condition {
            served: Served::DeadAddress,
            maintenance: false,
        };
        assert_eq!(
            old,
            [
                (1_000, all[0].condition),
                (3_000, dead),
                (t0, all[0].condition)
            ]
        );
        assert!(fs::read(names.join("old.example.com"))
            .unwrap()
            .starts_with(b"HOL2"));
        assert!(store.troubles().is_empty(), "each reported once");
    }
}
