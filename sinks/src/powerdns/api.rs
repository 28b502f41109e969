//! The parts of the PowerDNS Authoritative API's JSON this sink reads and writes.

use serde::{Deserialize, Serialize};

/// Account name on ownership comments.
pub const ACCOUNT: &str = "health-orchestrator";

/// `GET .../zones/{zone}` (only the fields used).
#[derive(Debug, Deserialize)]
pub struct Zone {
    /// Every rrset of the zone.
    #[serde(default)]
    pub rrsets: Vec<RrSet>,
}

/// An rrset, as read and as sent in a PATCH.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RrSet {
    /// Owner name, fully qualified with the trailing dot.
    pub name: String,
    /// Record type.
    #[serde(rename = "type")]
    pub rtype: String,
    /// TTL in seconds (absent on DELETE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<u64>,
    /// `REPLACE` or `DELETE` (only in PATCH bodies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changetype: Option<String>,
    /// Records.
    #[serde(default)]
    pub records: Vec<Record>,
    /// Comments; ours marks ownership.
    #[serde(default)]
    pub comments: Vec<Comment>,
}

impl RrSet {
    /// A DELETE change.
    pub fn delete(name: &str, rtype: &str) -> RrSet {
        RrSet {
            name: name.into(),
            rtype: rtype.into(),
            ttl: None,
            changetype: Some("DELETE".into()),
            records: Vec::new(),
            comments: Vec::new(),
        }
    }

    /// Enabled record contents, sorted.
    pub fn contents(&self) -> Vec<String> {
        let mut c: Vec<String> = self
            .records
            .iter()
            .filter(|r| !r.disabled)
            .map(|r| r.content.clone())
            .collect();
        c.sort();
        c
    }
}

/// One record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    /// Record data (the address).
    pub content: String,
    /// Disabled records are not served.
    #[serde(default)]
    pub disabled: bool,
}

/// An rrset comment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Comment {
    /// Text.
    pub content: String,
    /// Who wrote it.
    #[serde(default)]
    pub account: String,
}

/// PATCH body.
#[derive(Debug, Serialize)]
pub struct PatchBody {
    /// Changed rrsets.
    pub rrsets: Vec<RrSet>,
}

/// One of the server's settings (`GET .../servers/{id}/config`).
#[derive(Debug, Deserialize)]
pub struct ConfigSetting {
    /// Its name, e.g. `enable-lua-record-updates`.
    pub name: String,
    /// Its value as text (`yes`, `no`, ...).
    #[serde(default)]
    pub value: String,
}

/// The `error` field of a PowerDNS error answer, or empty.
pub fn error_text(body: &[u8]) -> String {
    #[derive(Deserialize)]
    struct ApiError {
        error: String,
    }
    serde_json::from_slice::<ApiError>(body)
        .map(|e| e.error)
        .unwrap_or_default()
}
