//! Why a Kuadrant record has no stand-ins, and why a listener record a round no longer
//! makes is kept refused rather than withdrawn: each said, word for word as below, in the
//! record's status (or, for a listener's record, its policy's), and kept out of admission
//! as the record's refusal.

use std::sync::Arc;

use ho_import::kuadrant::{NotAFailover, ObjectKey, TranslateError};

/// Why a record has no stand-ins; it keeps its last accepted answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Refusal {
    /// Its namespace's documents do not translate.
    #[error("{0}")]
    Untranslated(Arc<TranslateError>),
    /// The translation publishes nothing of it, for the reason it gives.
    #[error("{0}")]
    Unpublished(String),
    /// A DNSHealthCheckProbe naming one of its addresses cannot be read.
    #[error("{why}")]
    ByProbe {
        /// The probe.
        probe: ObjectKey,
        /// The translation's reason, which names the probe's address and its fault.
        why: String,
    },
    /// It has no address to publish.
    #[error("DNSRecord {record} has no A or AAAA endpoint to publish")]
    NoEndpoint {
        /// The record.
        record: String,
    },
    /// The translation names a tenant of it that it does not hold.
    #[error("the translation has no tenant {tenant}")]
    NoTenant {
        /// The tenant named.
        tenant: String,
    },
    /// A tenant of it makes no `DNSFailover`.
    #[error("{0}")]
    NotAFailover(Arc<NotAFailover>),
    /// A host name it is given does not resolve, so it never reaches the engine.
    #[error("host name {host} does not resolve through the operator's [resolver]: {why}")]
    Unresolved {
        /// The host name.
        host: String,
        /// What the resolver said.
        why: String,
    },
    /// A listener record this round did not make, kept while what it depends on is refused.
    #[error("{0}")]
    Kept(#[from] Kept),
}

/// Why a listener record a round did not make is kept rather than withdrawn.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Kept {
    /// Its namespace's documents do not translate.
    #[error("the namespace's Kuadrant resources do not translate: {0}")]
    Untranslated(Arc<TranslateError>),
    /// The policy that governs it is invalid.
    #[error("DNSPolicy {policy} is invalid: {why}")]
    PolicyInvalid {
        /// The policy.
        policy: String,
        /// Why the translation says it is invalid.
        why: String,
    },
    /// Its Gateway has lost its addresses (neither an IP address nor a host name).
    #[error("Gateway {gateway} has no IP address in its status")]
    NoAddress {
        /// The Gateway.
        gateway: String,
    },
    /// The policy that governs it has no outcome yet.
    #[error("DNSPolicy {policy} is not translated yet")]
    NotTranslated {
        /// The policy.
        policy: String,
    },
}
