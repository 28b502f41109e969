//! `Retry-After` (RFC 9110, section 10.2.3) in both its forms, and the hold it puts on every
//! request of a sink to the provider that sent it: after a 429 or 503 naming a time, no
//! request of any tenant goes to that provider before it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

/// The longest hold honoured: a provider naming a later time (or a date far off by a wrong
/// clock) is asked again after this long rather than left alone for hours.
pub const MAX_HOLD: Duration = Duration::from_secs(600);

/// How long `value` asks to wait, read at `now`: delta-seconds (`120`) or an HTTP-date
/// (`Wed, 21 Oct 2015 07:28:00 GMT`, and the two obsolete date forms); a date already past
/// is no wait. `None` for anything else (the header is then ignored, as RFC 9110 allows).
pub fn parse(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds).min(MAX_HOLD));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or_default().min(MAX_HOLD))
}

/// Per provider (the URL's authority, `host:port`), the instant before which no request is
/// sent to it. Shared by every clone of a sink's HTTP client, so the tenant whose request was
/// refused and every other tenant of the sink wait alike.
#[derive(Debug, Clone, Default)]
pub struct Holds(Arc<Mutex<HashMap<String, Instant>>>);

impl Holds {
    /// No request to `authority` before `until` (a later hold already there stays).
    pub fn hold(&self, authority: &str, until: Instant) {
        let mut holds = self.0.lock().expect("not poisoned");
        let at = holds.entry(authority.to_owned()).or_insert(until);
        *at = (*at).max(until);
    }

    /// The instant `authority` is held until, if still ahead of `now`.
    pub fn until(&self, authority: &str, now: Instant) -> Option<Instant> {
        let mut holds = self.0.lock().expect("not poisoned");
        match holds.get(authority) {
            Some(&at) if at > now => Some(at),
            Some(_) => {
                holds.remove(authority);
                None
            }
            None => None,
        }
    }

    /// Waits until `authority` is not held (a hold set while waiting is waited for too).
    pub async fn wait(&self, authority: &str) {
        while let Some(at) = self.until(authority, Instant::now()) {
            tokio::time::sleep_until(at).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_are_read() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(parse(" 3 ", now), Some(Duration::from_secs(3)));
        let forms = [
            "Sun, 06 Nov 1994 08:49:39 GMT",
            "Sunday, 06-Nov-94 08:49:39 GMT",
            "Sun Nov  6 08:49:39 1994",
        ];
        for form in forms {
            assert_eq!(parse(form, now), Some(Duration::from_secs(2)), "{form}");
        }
        assert_eq!(
            parse("Sun, 06 Nov 1994 08:49:30 GMT", now),
            Some(Duration::ZERO),
            "a date past is no wait"
        );
        assert_eq!(parse("99999", now), Some(MAX_HOLD));
        assert_eq!(parse("soon", now), None);
        assert_eq!(parse("-1", now), None);
    }

    #[test]
    fn a_hold_is_per_provider_and_only_lengthens() {
        let holds = Holds::default();
        let t0 = Instant::now();
        holds.hold("a:1", t0 + Duration::from_secs(2));
        holds.hold("a:1", t0 + Duration::from_secs(1));
        assert_eq!(holds.until("a:1", t0), Some(t0 + Duration::from_secs(2)));
        assert_eq!(holds.until("b:1", t0), None);
        assert_eq!(holds.until("a:1", t0 + Duration::from_secs(2)), None);
    }
}
