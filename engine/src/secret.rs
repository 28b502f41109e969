//! Secrets (API keys, HMAC keys, header values and tokens read from files): read once,
//! never printed: `<redacted>` wherever one would be (logs, `/status`, debug output).

use std::fmt;
use std::path::Path;

/// Why a secret could not be loaded; names the file or variable, never the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SecretError {
    /// The file could not be read.
    #[error("cannot read secret file {path}: {reason}")]
    Unreadable {
        /// The file.
        path: String,
        /// The system's reason.
        reason: String,
    },
    /// The environment variable is not set (or not Unicode).
    #[error("environment variable {0} is not set")]
    Unset(String),
    /// Neither a file nor a variable was configured.
    #[error("no secret source configured")]
    NoSource,
    /// The source holds nothing but a line break.
    #[error("the secret is empty")]
    Empty,
}

/// A secret value whose `Debug`, `Display` and serialized form are `<redacted>`. Compared
/// and hashed like any value, so a new secret in a check makes a new probe target at reload.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value read elsewhere (a header file, a token file).
    pub fn new(value: String) -> Secret {
        Secret(value)
    }

    /// Reads the secret from `file` (trailing newline removed) or from the variable `env`.
    pub fn load(file: Option<&Path>, env: Option<&str>) -> Result<Secret, SecretError> {
        let value = match (file, env) {
            (Some(path), _) => {
                std::fs::read_to_string(path).map_err(|e| SecretError::Unreadable {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })?
            }
            (None, Some(var)) => {
                std::env::var(var).map_err(|_| SecretError::Unset(var.to_owned()))?
            }
            (None, None) => return Err(SecretError::NoSource),
        };
        let value = value.trim_end_matches(['\n', '\r']).to_owned();
        if value.is_empty() {
            return Err(SecretError::Empty);
        }
        Ok(Secret(value))
    }

    /// The value, for the one place that must send or use it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// What is printed in place of a secret.
const REDACTED: &str = "<redacted>";

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl serde::Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(REDACTED)
    }
}

/// Compares in time independent of where the inputs differ, so a token cannot be guessed
/// byte by byte from answer times.
pub fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Lower-case hex of `bytes`: how signatures and nonces travel in text (the webhook's
/// signature header, the ring's handshake).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_prints_and_trims_the_newline() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("key");
        std::fs::write(&file, "s3cret\n").unwrap();
        let s = Secret::load(Some(&file), None).unwrap();
        assert_eq!(s.expose(), "s3cret");
        assert_eq!(format!("{s} {s:?}"), "<redacted> <redacted>");
        assert_eq!(serde_json::to_string(&s).unwrap(), "\"<redacted>\"");
        assert!(Secret::load(Some(&dir.path().join("missing")), None)
            .unwrap_err()
            .to_string()
            .contains("missing"));
        std::fs::write(&file, "\n").unwrap();
        assert_eq!(
            Secret::load(Some(&file), None).unwrap_err().to_string(),
            "the secret is empty"
        );
    }
}
