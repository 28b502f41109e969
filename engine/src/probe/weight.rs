//! Weights a target reports about itself (`reported_weight`): PowerDNS reading a numeric
//! health answer as the record's weight, HAProxy's agent-check. An http or https check reads
//! the number from the body, a header or a JSON value of a healthy answer; a feed from each
//! entry's `"weight"`. The number is clamped to `min`..`max` and moves the weight in effect
//! only when it differs from it by more than `band` percent, so a gateway reporting its load
//! every second does not rewrite DNS every second. A healthy answer without a readable
//! weight falls back to the configured weight.

use std::sync::atomic::{AtomicU32, Ordering};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::registry::Problems;

/// `reported_weight = { from, name, min, max, band }` as written.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WeightSettings {
    /// http/https: `"body"` (the body is the number), `"header"` (the header `name`),
    /// `"json"` (the value at JSON Pointer `name`); feed: `"feed"` (each entry's
    /// `"weight"`, the default).
    pub from: Option<String>,
    /// The header (`from = "header"`) or JSON Pointer (`from = "json"`) holding it.
    pub name: Option<String>,
    /// The least weight published (default 1: a healthy gateway keeps some traffic).
    pub min: Option<u32>,
    /// The most weight published (default 255, Route53's largest).
    pub max: Option<u32>,
    /// Percent a reported weight must move from the one in effect to replace it (default
    /// 10; 0: every change).
    pub band: Option<u32>,
}

/// Where the weight is read.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub enum WeightSource {
    /// The body is the number.
    Body,
    /// This response header is.
    Header(String),
    /// The value at this JSON Pointer of the body is.
    Json(String),
    /// A feed entry's `"weight"`.
    Feed,
}

/// A reported weight, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct ReportedWeight {
    /// Where it is read.
    pub source: WeightSource,
    /// Clamped to at least this.
    pub min: u32,
    /// And at most this.
    pub max: u32,
    /// Percent a new weight must move to count.
    pub band: u32,
}

impl WeightSettings {
    /// Resolves the settings for a kind reading from `sources` (the first is the default).
    pub(super) fn resolve(
        self,
        sources: &[&str],
        problems: &mut Problems<'_>,
    ) -> Option<ReportedWeight> {
        let from = self.from.as_deref().unwrap_or(sources[0]);
        let source = weight_source(from, self.name, sources, problems)?;
        let (min, max) = (self.min.unwrap_or(1), self.max.unwrap_or(255));
        if min > max {
            problems.push(
                "reported_weight.min",
                format!("{min} is more than max {max}"),
            );
        }
        let band = self.band.unwrap_or(10);
        if band >= 100 {
            problems.push("reported_weight.band", "must be below 100 (percent)");
        }
        Some(ReportedWeight {
            source,
            min,
            max,
            band,
        })
    }
}

/// Where the weight is read from: `from` (one of `sources`) and, for a header or a JSON
/// document, the `name` that holds it.
fn weight_source(
    from: &str,
    name: Option<String>,
    sources: &[&str],
    problems: &mut Problems<'_>,
) -> Option<WeightSource> {
    let name = name.filter(|n| !n.is_empty());
    let source = match (from, name) {
        (f, _) if !sources.contains(&f) => {
            problems.push(
                "reported_weight.from",
                format!("\"{f}\" is not one of {}", sources.join(", ")),
            );
            return None;
        }
        ("header", Some(name)) => {
            if hyper::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                problems.push(
                    "reported_weight.name",
                    format!("\"{name}\" is not a header name"),
                );
            }
            WeightSource::Header(name)
        }
        ("json", Some(name)) => {
            if !name.starts_with('/') {
                problems.push(
                    "reported_weight.name",
                    "a JSON Pointer starts with '/' (\"/weight\", \"/load/0\")",
                );
            }
            WeightSource::Json(name)
        }
        ("header" | "json", None) => {
            problems.push(
                "reported_weight.name",
                format!("missing: the {from} holding the weight"),
            );
            return None;
        }
        (_, Some(_)) => {
            problems.push(
                "reported_weight.name",
                format!("not used with from = \"{from}\""),
            );
            return None;
        }
        ("body", None) => WeightSource::Body,
        (_, None) => WeightSource::Feed,
    };
    Some(source)
}

impl ReportedWeight {
    /// Whether the body must be read and kept for the weight.
    pub(super) fn needs_body(&self) -> bool {
        matches!(self.source, WeightSource::Body | WeightSource::Json(_))
    }

    /// The number in a healthy HTTP answer: `head` is the response head, `body` what was
    /// read of the body.
    pub(super) fn read_http(&self, head: &[u8], body: &[u8]) -> Option<f64> {
        match &self.source {
            WeightSource::Body => number(std::str::from_utf8(body).ok()?),
            WeightSource::Header(name) => {
                let mut headers = [httparse::EMPTY_HEADER; 100];
                let mut response = httparse::Response::new(&mut headers);
                response.parse(head).ok()?;
                let value = response
                    .headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case(name))?
                    .value;
                number(std::str::from_utf8(value).ok()?)
            }
            WeightSource::Json(pointer) => {
                let doc: serde_json::Value = serde_json::from_slice(body).ok()?;
                match doc.pointer(pointer)? {
                    serde_json::Value::Number(n) => n.as_f64(),
                    serde_json::Value::String(s) => number(s),
                    _ => None,
                }
            }
            WeightSource::Feed => None,
        }
    }
}

/// A weight written as text (`"30"`, `" 12.5\n"`): finite and not negative.
pub(super) fn number(text: &str) -> Option<f64> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && *n >= 0.0)
}

/// The weight in effect for one target: what it last reported, moved only past the band.
/// Kept in the target's own record, not in the prepared check its targets share.
#[derive(Default)]
pub(super) struct Damper {
    /// The weight in effect plus one (0: none yet).
    in_effect: AtomicU32,
}

impl Damper {
    /// The weight to report for a reported `raw` read as `weight` says: clamped, and the
    /// one in effect unless `raw` moved past the band from it.
    pub(super) fn admit(&self, weight: &ReportedWeight, raw: f64) -> u32 {
        let w = weight;
        // One below `u32::MAX` at most, so the weight plus one fits (no provider takes
        // weights near it).
        let max = w.max.min(u32::MAX - 1);
        let clamped = raw.round().clamp(f64::from(w.min.min(max)), f64::from(max)) as u32;
        let current = self.in_effect.load(Ordering::Relaxed);
        if let Some(current) = current.checked_sub(1) {
            let moved = u64::from(current.abs_diff(clamped)) * 100;
            if moved <= u64::from(w.band) * u64::from(current) {
                return current;
            }
        }
        self.in_effect.store(clamped + 1, Ordering::Relaxed);
        clamped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reported(source: WeightSource, band: u32) -> ReportedWeight {
        ReportedWeight {
            source,
            min: 1,
            max: 100,
            band,
        }
    }

    #[test]
    fn the_weight_moves_only_past_the_band_and_within_the_bounds() {
        let (w, d) = (reported(WeightSource::Body, 10), Damper::default());
        assert_eq!(d.admit(&w, 50.0), 50, "the first is taken");
        assert_eq!(d.admit(&w, 54.0), 50, "8 % from 50: inside the band");
        assert_eq!(d.admit(&w, 45.4), 50, "9.2 % (45): inside");
        assert_eq!(d.admit(&w, 56.0), 56, "12 %: past it");
        assert_eq!(d.admit(&w, 1e9), 100, "clamped to max");
        assert_eq!(d.admit(&w, 0.0), 1, "and to min");
        let (w, every) = (reported(WeightSource::Body, 0), Damper::default());
        assert_eq!(every.admit(&w, 50.0), 50);
        assert_eq!(every.admit(&w, 51.0), 51, "band 0: every change");
    }

    #[test]
    fn weights_are_read_from_a_body_a_header_or_a_json_value() {
        let head = b"HTTP/1.1 200 OK\r\nX-Weight: 42\r\nContent-Length: 2\r\n\r\n";
        let body = reported(WeightSource::Body, 10);
        assert_eq!(body.read_http(head, b" 17\n"), Some(17.0));
        assert_eq!(body.read_http(head, b"ok"), None);
        assert_eq!(body.read_http(head, b"-3"), None, "negative");
        let header = reported(WeightSource::Header("x-weight".into()), 10);
        assert_eq!(header.read_http(head, b""), Some(42.0));
        let json = reported(WeightSource::Json("/load/weight".into()), 10);
        assert_eq!(json.read_http(head, br#"{"load":{"weight":7}}"#), Some(7.0));
        assert_eq!(
            json.read_http(head, br#"{"load":{"weight":"8"}}"#),
            Some(8.0)
        );
        assert_eq!(json.read_http(head, br#"{"load":{}}"#), None);
        assert!(body.needs_body() && json.needs_body() && !header.needs_body());
    }
}
