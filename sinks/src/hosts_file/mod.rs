//! `kind = "hosts_file"`: one file per tenant, `<dir>/<tenant>.hosts`, replaced atomically.
//!
//! A reader (CoreDNS `hosts` with `reload`, dnsmasq) never sees a half-written file: the new
//! content goes to a hidden temporary file in the same directory, is flushed to disk, and
//! renamed over the old one. A file that already holds the desired content is not touched,
//! so readers don't reload for nothing.

pub mod config;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ho_engine::sink::{Applied, Sink, SinkError, SinkFuture};
use ho_engine::snapshot::TenantSnapshot;

use ho_engine::sink::hosts_format::render;

/// Writes hosts files into one directory.
pub struct HostsFileSink {
    dir: PathBuf,
}

impl HostsFileSink {
    /// A sink writing into `dir` (created on first write if missing).
    pub fn new(dir: PathBuf) -> HostsFileSink {
        HostsFileSink { dir }
    }

    /// The file of the tenant whose `hosts_key` is `key`.
    pub fn path_of(&self, key: &str) -> PathBuf {
        self.dir.join(key)
    }
}

impl Sink for HostsFileSink {
    fn kind(&self) -> &'static str {
        "hosts_file"
    }

    fn apply(&self, snapshot: Arc<TenantSnapshot>) -> SinkFuture {
        let dir = self.dir.clone();
        let path = self.path_of(&snapshot.hosts_key);
        Box::pin(async move {
            let content = render(&snapshot);
            tokio::task::spawn_blocking(move || replace_if_changed(&dir, &path, &content))
                .await
                .map_err(|e| SinkError::retriable(format!("hosts file writer task failed: {e}")))?
        })
    }
}

/// Replaces `path` with `content` unless it already holds exactly that.
fn replace_if_changed(dir: &Path, path: &Path, content: &str) -> Result<Applied, SinkError> {
    let io = |what: &str, p: &Path, e: std::io::Error| {
        SinkError::retriable(format!("{what} {}: {e}", p.display()))
    };
    match std::fs::read(path) {
        Ok(current) if current == content.as_bytes() => return Ok(Applied::Unchanged),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("cannot read", path, e)),
    }
    std::fs::create_dir_all(dir).map_err(|e| io("cannot create directory", dir, e))?;
    let name = path
        .file_name()
        .expect("path_of always has a file name")
        .to_string_lossy();
    let tmp = dir.join(format!(".{name}.tmp"));
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(content.as_bytes())?;
        file.sync_all()
    };
    if let Err(e) = write() {
        let _ = std::fs::remove_file(&tmp);
        return Err(io("cannot write", &tmp, e));
    }
    std::fs::rename(&tmp, path).map_err(|e| io("cannot rename into", path, e))?;
    // Make the rename itself durable, so a crash does not bring back the old file.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(Applied::Changed)
}

#[cfg(test)]
mod tests;
