//! The ownership mark of zone-writing sinks (Route53, RFC 2136, Cloudflare, Cloud DNS,
//! Azure DNS): a name is ours only with
//! the TXT record `_health-orchestrator.<name>` = `heritage=health-orchestrator,owner=<owner_id>`
//! (how external-dns guards names). Records at a name without it, or with another owner's,
//! are never changed or deleted.

/// Prefix of the mark's name. A separate name keeps the mark out of the way of TXT records
/// users keep at the name itself (SPF, site checks).
pub const OWNER_PREFIX: &str = "_health-orchestrator.";

/// TTL of marks, seconds; they never change while the name is managed.
pub const OWNER_TTL: u32 = 300;

/// The mark's text (unquoted) for `owner_id`.
pub fn mark_text(owner_id: &str) -> String {
    format!("heritage=health-orchestrator,owner={owner_id}")
}

/// A tenant's result once its names are planned: an error naming the `foreign` names left
/// alone (someone else's), else changed or not.
pub fn outcome(foreign: &[String], changes: bool) -> Result<super::Applied, super::SinkError> {
    use super::{Applied, SinkError};
    if !foreign.is_empty() {
        return Err(SinkError::permanent(format!(
            "left alone because they hold records without this orchestrator's ownership mark (TXT {OWNER_PREFIX}<name>) or with another owner's: {}",
            foreign.join(", ")
        )));
    }
    Ok(if changes {
        Applied::Changed
    } else {
        Applied::Unchanged
    })
}

/// The owner a TXT value names (quoted or not), if it is one of our marks.
pub fn owner_in(value: &str) -> Option<&str> {
    value
        .trim_matches('"')
        .strip_prefix("heritage=health-orchestrator,owner=")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_round_trip_and_other_txt_is_not_a_mark() {
        assert_eq!(
            owner_in(&format!("\"{}\"", mark_text("eu-1"))),
            Some("eu-1")
        );
        assert_eq!(owner_in(&mark_text("eu-1")), Some("eu-1"));
        assert_eq!(owner_in("\"v=spf1 -all\""), None);
    }
}
