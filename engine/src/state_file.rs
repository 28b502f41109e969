//! Files under `state_dir` (operator drains, the heartbeat board): read whole as JSON, a
//! missing file meaning "nothing kept yet", written atomically (temporary file, fsync,
//! rename) so a crash leaves the old file or the new one, never half of either.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

/// Why a state file could not be used; names the file.
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
    #[error("{} is not a {what} file: {reason}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What it should hold (`drain`, `heartbeat`).
        what: &'static str,
        /// What the parser said.
        reason: String,
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

/// The `what` file at `path` (`drain`, `heartbeat`), `None` when there is none yet.
pub fn read<T: DeserializeOwned>(
    path: &Path,
    what: &'static str,
) -> Result<Option<T>, StateFileError> {
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
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| StateFileError::Malformed {
            path: path.to_owned(),
            what,
            reason: e.to_string(),
        })
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

/// [`write`] of `value` as JSON.
pub fn write_json(path: &Path, value: &impl Serialize, sync: bool) -> Result<(), StateFileError> {
    write(
        path,
        &serde_json::to_vec_pretty(value).expect("serializable"),
        sync,
    )
}
