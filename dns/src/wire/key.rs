//! A TSIG key (RFC 8945) as the config names it (`tsig`, `transfer.tsig`, `reports.tsig`):
//! its settings and checks, and the signer read from its secret file.

use std::path::PathBuf;

use hickory_proto::rr::rdata::tsig::TsigAlgorithm;
use hickory_proto::rr::{Name, TSigner};
use ho_config::names::normalize_domain;
use ho_engine::secret::Secret;
use ho_engine::sink::kind::Problems;
use schemars::JsonSchema;
use serde::Deserialize;

/// Seconds of clock difference the server accepts on our signatures (BIND's and RFC
/// 8945's recommendation).
const TSIG_FUDGE: u16 = 300;

/// A TSIG key (RFC 8945).
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TsigConfig {
    /// The key's name, as in the server's `key "NAME" { ... }`.
    pub name: String,
    /// `hmac-sha256` (tsig-keygen's default), `hmac-sha384` or `hmac-sha512`.
    #[serde(default = "default_algorithm")]
    pub algorithm: String,
    /// File holding the base64 secret: the bare secret, or a BIND `key` statement as
    /// `tsig-keygen` prints it. Read at load and reload, never logged.
    pub secret_file: PathBuf,
}

fn default_algorithm() -> String {
    "hmac-sha256".into()
}

impl TsigConfig {
    /// Normalises the key's name and algorithm; problems are reported under `at`
    /// (`tsig`, `transfer.tsig`).
    pub fn check(&mut self, at: &str, p: &mut Problems<'_>) {
        match normalize_domain(&self.name) {
            Ok(name) => self.name = name,
            Err(e) => p.at(&format!("{at}.name"), e),
        }
        self.algorithm.make_ascii_lowercase();
        if !ALGORITHMS.contains(&self.algorithm.as_str()) {
            p.at(
                &format!("{at}.algorithm"),
                format!(
                    "\"{}\" is not supported (one of {}; tsig-keygen makes hmac-sha256 keys)",
                    self.algorithm,
                    ALGORITHMS.join(", ")
                ),
            );
        }
    }

    /// Reads the secret, as a start would.
    pub fn preflight(&self, at: &str, p: &mut Problems<'_>) {
        if let Err(e) = load_signer(self) {
            p.at(&format!("{at}.secret_file"), e.to_string());
        }
    }
}

/// TSIG algorithms the signer implements.
pub const ALGORITHMS: [&str; 3] = ["hmac-sha256", "hmac-sha384", "hmac-sha512"];

/// The key in `tsig.secret_file`: a bare base64 secret, or the `secret "..."` of a BIND key
/// statement. Errors name the file, never the content.
pub fn load_signer(tsig: &TsigConfig) -> Result<TSigner, KeyError> {
    let text = Secret::load(Some(&tsig.secret_file), None).map_err(KeyError::Secret)?;
    let text = text.expose();
    let encoded = match text.split_once("secret") {
        Some((_, rest)) => rest.split('"').nth(1).unwrap_or(""),
        None => text.trim(),
    };
    let key = data_encoding::BASE64
        .decode(encoded.as_bytes())
        .map_err(|_| KeyError::NotBase64(tsig.secret_file.clone()))?;
    let algorithm = match tsig.algorithm.as_str() {
        "hmac-sha384" => TsigAlgorithm::HmacSha384,
        "hmac-sha512" => TsigAlgorithm::HmacSha512,
        _ => TsigAlgorithm::HmacSha256,
    };
    let name =
        Name::from_ascii(format!("{}.", tsig.name)).map_err(|e| KeyError::Name(e.to_string()))?;
    TSigner::new(key, algorithm, name, TSIG_FUDGE).map_err(|e| KeyError::Signer(e.to_string()))
}

/// Why a TSIG key cannot be used; names the file or field, never the secret.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The secret file cannot be read.
    #[error("tsig.secret_file: {0}")]
    Secret(ho_engine::secret::SecretError),
    /// The file holds no base64 secret.
    #[error("tsig.secret_file {}: the secret is not base64 (expected a bare secret or a BIND key statement as tsig-keygen prints it)", .0.display())]
    NotBase64(PathBuf),
    /// The key's name is not a DNS name.
    #[error("tsig.name: {0}")]
    Name(String),
    /// The signer refused the key.
    #[error("tsig: {0}")]
    Signer(String),
}
