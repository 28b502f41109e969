//! The ledger on disk: one append-only file per name under `<state_dir>/ledger/names/`,
//! each record one change of the name's condition (varint: the milliseconds since the
//! previous record, shifted left 3, or'ed with the condition's code). Why one file per
//! name: the question asked is "this name over 90 days", which then reads one small file
//! (a name changing once an hour keeps about 3.5 bytes a change, 120 KB over 400 days);
//! appends are a few per second at most, and a torn append loses that record only.

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::book::{Change, Condition};

/// First bytes of every name file: the format's version.
const MAGIC: &[u8; 4] = b"HOL1";

/// A ledger file that cannot be read or written.
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
    alive: PathBuf,
    /// Each name's latest record, once read or written: the base of its next delta.
    last: HashMap<String, (u64, Condition)>,
}

impl Store {
    /// The store under `dir` (created when missing).
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        let names = dir.join("names");
        fs::create_dir_all(&names).map_err(at(&names))?;
        Ok(Store {
            names,
            alive: dir.join("alive"),
            last: HashMap::new(),
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

    /// A name's changes, oldest first (none without a file). A record cut short by a
    /// crash mid-append is left out.
    pub fn read(&self, name: &str) -> Result<Vec<(u64, Condition)>, StoreError> {
        let path = self.path(name);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(at(&path)(e)),
        };
        let Some(body) = bytes.strip_prefix(MAGIC) else {
            let e = io::Error::new(io::ErrorKind::InvalidData, "not a ledger file (HOL1)");
            return Err(at(&path)(e));
        };
        Ok(decode(body).0)
    }

    /// Appends `changes` (in order) to their names' files.
    pub fn append(&mut self, changes: &[Change]) -> Result<(), StoreError> {
        let mut by_name: Vec<(&str, Vec<(u64, Condition)>)> = Vec::new();
        for c in changes {
            match by_name.iter_mut().find(|(n, _)| *n == c.name) {
                Some((_, list)) => list.push((c.at, c.condition)),
                None => by_name.push((&c.name, vec![(c.at, c.condition)])),
            }
        }
        for (name, list) in by_name {
            self.append_one(name, &list)?;
        }
        Ok(())
    }

    fn append_one(&mut self, name: &str, list: &[(u64, Condition)]) -> Result<(), StoreError> {
        let path = self.path(name);
        let mut last = match self.last.get(name) {
            Some(l) => Some(*l),
            None => self.tail(name)?,
        };
        let mut bytes = Vec::new();
        if last.is_none() && !path.exists() {
            bytes.extend_from_slice(MAGIC);
        }
        for &(t, c) in list {
            let base = last.map_or(0, |(b, _)| b);
            let t = t.max(base);
            put_varint(&mut bytes, ((t - base) << 3) | u64::from(c.code()));
            last = Some((t, c));
        }
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(at(&path))?;
        file.write_all(&bytes).map_err(at(&path))?;
        if let Some(l) = last {
            self.last.insert(name.to_owned(), l);
        }
        Ok(())
    }

    /// A name's latest record, read from its file; a record cut short is cut off the
    /// file so the next append starts clean.
    fn tail(&mut self, name: &str) -> Result<Option<(u64, Condition)>, StoreError> {
        let path = self.path(name);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(at(&path)(e)),
        };
        let body = bytes.strip_prefix(MAGIC).unwrap_or_default();
        let (changes, used) = decode(body);
        if used < body.len() {
            let file = OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(at(&path))?;
            file.set_len((MAGIC.len() + used) as u64)
                .map_err(at(&path))?;
        }
        Ok(changes.last().copied())
    }

    /// Drops what is older than `before` from every file: the condition at `before` is
    /// kept as the first record, so the window's start is still known. Each file is
    /// replaced whole (written aside, then renamed).
    pub fn prune(&mut self, before: u64) -> Result<(), StoreError> {
        for name in self.names()? {
            let changes = self.read(&name)?;
            let cut = changes.partition_point(|(t, _)| *t < before);
            if cut == 0 {
                continue;
            }
            let mut kept = vec![(before, changes[cut - 1].1)];
            kept.extend_from_slice(&changes[cut..]);
            let mut bytes = MAGIC.to_vec();
            let mut base = 0;
            for &(t, c) in &kept {
                put_varint(&mut bytes, ((t - base) << 3) | u64::from(c.code()));
                base = t;
            }
            let path = self.path(&name);
            let aside = path.with_extension("new");
            fs::write(&aside, &bytes).map_err(at(&aside))?;
            fs::rename(&aside, &path).map_err(at(&path))?;
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

/// The records of a file's body, and the bytes they took (less than the body when the
/// last record was cut short or a byte is not a condition).
fn decode(body: &[u8]) -> (Vec<(u64, Condition)>, usize) {
    let mut out = Vec::new();
    let mut t = 0u64;
    let mut pos = 0;
    while let Some((value, len)) = get_varint(&body[pos..]) {
        let Some(c) = Condition::of_code((value & 7) as u8) else {
            break;
        };
        t += value >> 3;
        out.push((t, c));
        pos += len;
    }
    (out, pos)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
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

    #[test]
    fn a_foreign_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        fs::write(dir.path().join("names/x.example.com"), b"junk").unwrap();
        let err = store.read("x.example.com").unwrap_err().to_string();
        assert!(
            err.contains("names/x.example.com") && err.contains("HOL1"),
            "{err}"
        );
    }
}
