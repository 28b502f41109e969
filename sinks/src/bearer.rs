//! Bearer tokens of cloud APIs (Google, Azure): the token answer every one of their token
//! endpoints gives (`access_token`, `expires_in` as a number or, from Azure's instance
//! metadata service, a string), kept until a minute before it expires.

use std::time::Duration;

use ho_engine::sink::SinkError;
use hyper::StatusCode;
use serde::Deserialize;
use tokio::time::Instant;

use crate::http::{error_for, Answer};

/// A token is renewed this long before it expires.
const RENEW_BEFORE: Duration = Duration::from_secs(60);

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    #[serde(default)]
    expires_in: Option<serde_json::Value>,
}

/// The token last given, if any.
#[derive(Default)]
pub struct BearerCache {
    current: Option<(String, Instant)>,
}

impl BearerCache {
    /// The token, while it stays valid for another minute.
    pub fn valid(&self) -> Option<String> {
        self.current
            .as_ref()
            .filter(|(_, until)| Instant::now() + RENEW_BEFORE < *until)
            .map(|(t, _)| t.clone())
    }

    /// Keeps the token of a token endpoint's answer `body` (`what` names the exchange in
    /// errors) and returns it; a missing lifetime counts as an hour.
    pub fn keep(&mut self, body: &[u8], what: &str) -> Result<String, SinkError> {
        let answer: TokenAnswer = serde_json::from_slice(body)
            .map_err(|e| SinkError::retriable(format!("{what}: unexpected answer: {e}")))?;
        let seconds = match &answer.expires_in {
            Some(serde_json::Value::Number(n)) => n.as_u64(),
            Some(serde_json::Value::String(s)) => s.parse().ok(),
            _ => None,
        }
        .unwrap_or(3600);
        let until = Instant::now() + Duration::from_secs(seconds);
        self.current = Some((answer.access_token.clone(), until));
        Ok(answer.access_token)
    }

    /// Forgets the token (the API refused it).
    pub fn forget(&mut self) {
        self.current = None;
    }
}

/// The error for a request a cloud API refused by its status: a refused token is retried
/// with a new one (`forget` drops it); a role the identity lacks (`role`) or names that do
/// not exist (`missing`) are the operator's to fix, not retried; other statuses by the
/// common policy ([`error_for`]). `detail` is the API's own error text.
pub fn refusal(
    answer: &Answer,
    what: &str,
    detail: &str,
    forget: impl FnOnce(),
    [role, missing]: [&str; 2],
) -> SinkError {
    let message = format!("{what}: HTTP {}: {detail}", answer.status.as_u16());
    match answer.status {
        StatusCode::UNAUTHORIZED => {
            forget();
            SinkError::retriable(format!(
                "{message} (the token was refused; asking for a new one)"
            ))
        }
        StatusCode::FORBIDDEN => SinkError::permanent(format!("{message} ({role})")),
        StatusCode::NOT_FOUND => SinkError::permanent(format!("{message} ({missing})")),
        _ => error_for(answer, what, detail),
    }
}

/// `value` percent-encoded for a form body (`application/x-www-form-urlencoded`).
pub fn form_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetimes_as_numbers_or_strings_and_form_values_encoded() {
        let mut cache = BearerCache::default();
        assert!(cache.valid().is_none());
        let t = cache
            .keep(br#"{"access_token": "a", "expires_in": "3599"}"#, "x")
            .unwrap();
        assert_eq!((t.as_str(), cache.valid().as_deref()), ("a", Some("a")));
        cache
            .keep(br#"{"access_token": "b", "expires_in": 30}"#, "x")
            .unwrap();
        assert_eq!(
            cache.valid(),
            None,
            "under a minute left: renewed before use"
        );
        assert!(cache.keep(b"{}", "x").is_err());
        assert_eq!(form_encode("a b/c+d=é~"), "a%20b%2Fc%2Bd%3D%C3%A9~");
    }
}
