//! Why DNSSEC keys cannot be read, made or used; the text is what `run`, `check-config` and
//! `dnssec` print.

use std::path::PathBuf;

/// Why the keys of a zone cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum DnssecError {
    /// A directory or file that cannot be read, created or written.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// `read`, `create` or `write`.
        action: &'static str,
        /// The directory or file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A key file whose content is refused (the file named, never its secret).
    #[error("{}: {reason}", path.display())]
    KeyFile {
        /// The `.key` or `.private` file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Zones with no key that signs now.
    #[error("{} has no key that signs now for zone {} (make one with `health-orchestrator dnssec keygen --zone ZONE --out {}`)", dir.display(), zones.join(", "), dir.display())]
    Unsigned {
        /// The key directory.
        dir: PathBuf,
        /// The zones without a signing key.
        zones: Vec<String>,
    },
    /// A key time that is not BIND's `YYYYMMDDHHMMSS`.
    #[error(transparent)]
    Time(#[from] TimeError),
    /// What the cryptography refused: an algorithm not supported, a key that cannot be made,
    /// a DS that cannot be computed, a zone that is not a DNS name.
    #[error("{0}")]
    Crypto(String),
}

/// A key time that is not BIND's `YYYYMMDDHHMMSS`.
#[derive(Debug, thiserror::Error)]
#[error("\"{value}\" is not a time{}", match detail { Some(d) => format!(": {d}"), None => " (YYYYMMDDHHMMSS)".to_owned() })]
pub struct TimeError {
    /// The value as written.
    pub value: String,
    /// Why a 14-digit value is still not a time.
    pub detail: Option<String>,
}
