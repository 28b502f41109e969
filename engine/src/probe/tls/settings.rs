//! The keys every kind over TLS reads (https, grpcs): whom to trust, which certificate to
//! present (mutual TLS), and how close to its expiry a server's certificate may be.

use std::path::PathBuf;
use std::time::Duration;

use ho_config::TlsCheck;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::probe::registry::Problems;

/// The TLS keys of a check.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct TlsSettings {
    /// Accept any certificate. Opt-in because it hides a broken certificate.
    pub insecure: Option<bool>,
    /// PEM file of CA certificates to trust instead of the system roots.
    pub ca_file: Option<PathBuf>,
    /// A server certificate that expires sooner than this fails the probe with reason
    /// `cert_expiring` (`"14d"`), so a forgotten renewal shows before clients see it. The
    /// expiry is also exported per target (`health_orchestrator_probe_cert_not_after_seconds`).
    #[serde(default, with = "humantime_serde::option")]
    #[schemars(with = "Option<String>")]
    pub min_cert_validity: Option<Duration>,
    /// PEM certificate chain presented to the server (mutual TLS), with `client_key`.
    pub client_cert: Option<PathBuf>,
    /// PEM private key of `client_cert`.
    pub client_key: Option<PathBuf>,
}

/// The TLS side of a check, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct TlsProbe {
    /// Whom to trust and what to present.
    pub trust: TlsCheck,
    /// Least validity left on the server's certificate.
    pub min_cert_validity: Option<Duration>,
}

impl TlsSettings {
    /// The TLS side, checked.
    pub(in crate::probe) fn resolve(self, problems: &mut Problems<'_>) -> TlsProbe {
        let insecure = self.insecure.unwrap_or(false);
        if insecure && self.ca_file.is_some() {
            problems.push(
                "insecure",
                "insecure = true ignores ca_file; set one or the other",
            );
        }
        match (&self.client_cert, &self.client_key) {
            (Some(_), None) => problems.push("client_key", "missing: client_cert needs its key"),
            (None, Some(_)) => {
                problems.push("client_cert", "missing: client_key needs its certificate")
            }
            _ => {}
        }
        if self.min_cert_validity.is_some_and(|d| d.is_zero()) {
            problems.push("min_cert_validity", "must be greater than 0");
        }
        TlsProbe {
            trust: TlsCheck {
                insecure,
                ca_file: self.ca_file,
                client_cert: self.client_cert,
                client_key: self.client_key,
            },
            min_cert_validity: self.min_cert_validity,
        }
    }
}
