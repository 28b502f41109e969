//! Why a kind could not build its writer. The config check has judged the settings by then,
//! so what is left is what only building meets: a secret that cannot be read, a TLS file, a
//! kubeconfig, credentials that do not go together.

use crate::secret::SecretError;
use crate::tls_client::TlsError;

/// Why a sink's writer could not be built; the text is what `run` prints after `sinks.NAME:`.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A secret (API key, token, client secret) could not be read.
    #[error("{field}: {source}")]
    Secret {
        /// What the secret is, as the config names it (e.g. `api key`).
        field: &'static str,
        /// Why it could not be read.
        #[source]
        source: SecretError,
    },
    /// The TLS settings (CA file, client certificate) are unusable.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// A setting that only the kind's own parser refuses (a URL, a header, a zone name).
    #[error("{field}: {reason}")]
    Setting {
        /// The setting, as the config or the error names it (e.g. `url https://x`).
        field: String,
        /// Why it is refused.
        reason: String,
    },
    /// Credentials that are missing or do not go together.
    #[error("{0}")]
    Credentials(String),
    /// The back end's own client could not be set up (a kubeconfig, a key file); the source
    /// is that client's typed error.
    #[error("{0}")]
    Client(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl SetupError {
    /// A secret that could not be read, named `field`.
    pub fn secret(field: &'static str) -> impl FnOnce(SecretError) -> SetupError {
        move |source| SetupError::Secret { field, source }
    }

    /// The back end's client could not be set up.
    pub fn client(e: impl std::error::Error + Send + Sync + 'static) -> SetupError {
        SetupError::Client(Box::new(e))
    }
}
