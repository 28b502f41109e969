//! Files under `state_dir` (operator drains, the heartbeat board, last accepted resources,
//! peers' reports): JSON with the `version` of their format, a missing file meaning
//! "nothing kept yet", written atomically (temporary file, fsync, rename) so a crash leaves
//! the old file or the new one, never half of either.
//!
//! Upgrades and downgrades: a file of an older format (the first had no `version`) is
//! read and migrated, and written in the current format at its next save; a file of a newer
//! format than this build reads, or one that does not parse, is an error naming the file,
//! what it holds and the way out (run the newer version again, or move the file aside and
//! start without what it held) — never a guess, since starting without drains would
//! publish endpoints an operator took out.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// Whether this user can write under `dir`: in it, or where it would be created (its
/// nearest existing ancestor). A file is made and removed there; nothing else is left.
/// `check-config` asks this of every folder `run` writes into (`state_dir`, a hosts_file
/// sink's `dir`), so a folder that cannot be made is said before the start, not retried.
pub fn writable(dir: &Path) -> Result<(), NotWritable> {
    // A relative path's last ancestor is "", the working folder.
    let existing = dir
        .ancestors()
        .map(|d| {
            if d.as_os_str().is_empty() {
                Path::new(".")
            } else {
                d
            }
        })
        .find(|d| d.exists())
        .unwrap_or(dir);
    if !existing.is_dir() {
        return Err(NotWritable::NotAFolder(existing.to_path_buf()));
    }
    let probe = existing.join(format!(".check-config-{}", std::process::id()));
    std::fs::write(&probe, b"")
        .and_then(|()| std::fs::remove_file(&probe))
        .map_err(|e| NotWritable::Refused(existing.to_path_buf(), e))
}

/// Why a folder `run` writes into cannot be written: said before the start.
#[derive(Debug, thiserror::Error)]
pub enum NotWritable {
    /// The path, or its nearest existing ancestor, is something other than a folder.
    #[error("{} is not a folder", .0.display())]
    NotAFolder(std::path::PathBuf),
    /// The folder refused a file (permissions, a read-only or full file system).
    #[error("cannot write in {}: {}", .0.display(), .1)]
    Refused(std::path::PathBuf, std::io::Error),
}

/// A state file's content and its format.
pub trait StateFormat: Serialize + DeserializeOwned {
    /// What the file holds, as an error names it (`drain`).
    const WHAT: &'static str;
    /// What starting without the file loses, as the way out says.
    const LOSS: &'static str;
    /// The format this build writes; 1 is the first, which had no `version` field.
    const VERSION: u64;

    /// An older format's content (`version` < [`Self::VERSION`]) as the current one.
    fn migrate(version: u64, content: Value) -> Result<Value, String> {
        let _ = version;
        Ok(content)
    }
}

/// Why a state file could not be used; names the file and the way out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateFileError {
    /// The file exists but cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
    /// The file does not hold what it should.
    #[error("{p} is not a {what} file ({reason}); move it aside (mv {p} {p}.broken) to start without it: {loss}", p = path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What it should hold (`drain`, `heartbeat`).
        what: &'static str,
        /// What the parser said.
        reason: String,
        /// What starting without it loses.
        loss: &'static str,
    },
    /// The file was written by a newer version, in a format this one does not read.
    #[error("{} was written by a newer version (its {what} format is {found}; this version reads up to {supported}): run that version again, or move the file aside to start without it: {loss}", path.display())]
    Newer {
        /// The file.
        path: PathBuf,
        /// What it holds.
        what: &'static str,
        /// Its format.
        found: u64,
        /// The newest format this build reads.
        supported: u64,
        /// What starting without it loses.
        loss: &'static str,
    },
    /// The file (or its temporary twin) cannot be written.
    #[error("cannot write {}: {source}", path.display())]
    Unwritable {
        /// The file.
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
}

/// The file at `path`, `None` when there is none yet; an older format is migrated.
pub fn read<T: StateFormat>(path: &Path) -> Result<Option<T>, StateFileError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(StateFileError::Unreadable {
                path: path.to_owned(),
                source,
            })
        }
    };
    decode(path, &bytes).map(Some)
}

/// The content of the file `path` holding `bytes` (read elsewhere: a copy another replica
/// shared); an older format is migrated.
pub fn decode<T: StateFormat>(path: &Path, bytes: &[u8]) -> Result<T, StateFileError> {
    let malformed = |reason: String| StateFileError::Malformed {
        path: path.to_owned(),
        what: T::WHAT,
        reason,
        loss: T::LOSS,
    };
    let mut content: Value = serde_json::from_slice(bytes).map_err(|e| malformed(e.to_string()))?;
    let version = match content.get("version") {
        None => 1,
        Some(v) => v
            .as_u64()
            .ok_or_else(|| malformed(format!("version {v} is not a number")))?,
    };
    if version > T::VERSION {
        return Err(StateFileError::Newer {
            path: path.to_owned(),
            what: T::WHAT,
            found: version,
            supported: T::VERSION,
            loss: T::LOSS,
        });
    }
    if let Some(fields) = content.as_object_mut() {
        fields.remove("version");
    }
    if version < T::VERSION {
        content = T::migrate(version, content).map_err(malformed)?;
    }
    serde_json::from_value(content).map_err(|e| malformed(e.to_string()))
}

/// An exclusive lock on the file beside `path` (`<path>.lock`) that every process changing
/// `path` from what it read takes first (replicas sharing a `state_dir`), held until the
/// returned file is dropped.
pub fn lock(path: &Path) -> std::io::Result<std::fs::File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut name = path.as_os_str().to_owned();
    name.push(".lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(PathBuf::from(name))?;
    file.lock()?;
    Ok(file)
}

/// `value` as the file's bytes: its fields and the format's `version`.
pub fn encode<T: StateFormat>(value: &T) -> Vec<u8> {
    let mut content = serde_json::to_value(value).expect("serializable");
    if let Some(fields) = content.as_object_mut() {
        fields.insert("version".into(), T::VERSION.into());
    }
    serde_json::to_vec_pretty(&content).expect("serializable")
}

/// Replaces the file at `path` with `body`, atomically; `sync`: flushed to the disk
/// before it replaces the old one (what an operator set), else left to the kernel (what
/// is rewritten every second anyway).
pub fn write(path: &Path, body: &[u8], sync: bool) -> Result<(), StateFileError> {
    let dir = path.parent().expect("a file under state_dir");
    let name = path.file_name().expect("a file").to_string_lossy();
    let tmp = dir.join(format!(".{name}.tmp"));
    let write = || -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(body)?;
        if sync {
            file.sync_all()?;
        }
        std::fs::rename(&tmp, path)?;
        if sync {
            if let Ok(d) = std::fs::File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    };
    write().map_err(|source| StateFileError::Unwritable {
        path: path.to_owned(),
        source,
    })
}

/// [`write`] of `value` in its format.
pub fn write_state<T: StateFormat>(
    path: &Path,
    value: &T,
    sync: bool,
) -> Result<(), StateFileError> {
    write(path, &encode(value), sync)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Kept {
        items: Vec<String>,
    }

    impl StateFormat for Kept {
        const WHAT: &'static str = "kept";
        const LOSS: &'static str = "the items in it are then lost";
        const VERSION: u64 = 3;

        fn migrate(version: u64, mut content: Value) -> Result<Value, String> {
            // Version 2 named the field `list`; version 1 was a bare list.
            if version == 1 {
                content = serde_json::json!({ "list": content });
            }
            let list = content.get_mut("list").map(Value::take).ok_or("no list")?;
            Ok(serde_json::json!({ "items": list }))
        }
    }

    #[test]
    fn a_file_round_trips_and_older_formats_are_migrated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kept.json");
        assert_eq!(read::<Kept>(&path).unwrap(), None);
        let kept = Kept {
            items: vec!["a".into()],
        };
        write_state(&path, &kept, true).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"version\": 3"), "{text}");
        assert_eq!(read::<Kept>(&path).unwrap(), Some(kept));
        for older in [r#"["a"]"#, r#"{"version": 2, "list": ["a"]}"#] {
            std::fs::write(&path, older).unwrap();
            let migrated = read::<Kept>(&path).unwrap().unwrap();
            assert_eq!(migrated.items, ["a"], "{older}");
        }
    }

    #[test]
    fn a_newer_or_broken_file_is_an_error_naming_it_and_the_way_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kept.json");
        std::fs::write(&path, r#"{"version": 4, "items": []}"#).unwrap();
        let newer = read::<Kept>(&path).unwrap_err().to_string();
        assert!(
            newer.contains(
                "written by a newer version (its kept format is 4; this version reads up to 3)"
            ),
            "{newer}"
        );
        assert!(newer.contains(&path.display().to_string()), "{newer}");
        assert!(newer.ends_with("the items in it are then lost"), "{newer}");
        for broken in [
            "{not json",
            r#"{"version": "x"}"#,
            r#"{"version": 3, "items": 7}"#,
        ] {
            std::fs::write(&path, broken).unwrap();
            let message = read::<Kept>(&path).unwrap_err().to_string();
            assert!(
                message.contains("is not a kept file"),
                "{broken}: {message}"
            );
            assert!(
                message.contains(".broken) to start without it"),
                "{message}"
            );
        }
    }
}
