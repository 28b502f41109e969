//! Conditions on an HTTP answer beyond its status: a regular expression over the body
//! (`body_matches`), values in a JSON body (`body_json`, JSON Pointer paths), and how long
//! the answer may take (`max_latency`). Each failure names what it found.

use std::collections::BTreeMap;
use std::time::Duration;

use regex::bytes::Regex;
use serde_json::Value;

use crate::probe::Failure;

/// The body conditions of one target, compiled once.
pub(super) struct BodyConditions {
    matches: Option<Regex>,
    /// JSON Pointer (RFC 6901) -> the value's expected text.
    json: Vec<(String, String)>,
}

impl BodyConditions {
    /// `pattern` was compiled once by validation, so it compiles here.
    pub fn new(pattern: Option<&str>, json: &BTreeMap<String, String>) -> BodyConditions {
        BodyConditions {
            matches: pattern.map(|p| Regex::new(p).expect("validated regex")),
            json: json.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        }
    }

    /// Whether the body must be read and kept to judge it.
    pub fn need_body(&self) -> bool {
        self.matches.is_some() || !self.json.is_empty()
    }

    /// Judges `body` (its first `body_limit` bytes).
    pub fn judge(&self, body: &[u8]) -> Result<(), Failure> {
        if let Some(re) = &self.matches {
            if !re.is_match(body) {
                return Err(mismatch(format!("body does not match /{}/", re.as_str())));
            }
        }
        if self.json.is_empty() {
            return Ok(());
        }
        let doc: Value =
            serde_json::from_slice(body).map_err(|e| mismatch(format!("body is not JSON: {e}")))?;
        for (pointer, wanted) in &self.json {
            match doc.pointer(pointer) {
                Some(found) if text(found) == *wanted => {}
                Some(found) => {
                    return Err(mismatch(format!(
                        "body {pointer} is {found}, not {wanted:?}"
                    )))
                }
                None => return Err(mismatch(format!("body has no {pointer}"))),
            }
        }
        Ok(())
    }
}

/// A JSON value as a condition compares it: a string by its content, anything else as JSON
/// writes it (`3`, `true`, `null`).
fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn mismatch(detail: String) -> Failure {
    Failure::Answer {
        label: "body_mismatch",
        detail,
    }
}

/// `max_latency`: a healthy answer that took longer is a failure, `slow`.
pub(super) fn judge_latency(took: Duration, max: Option<Duration>) -> Result<(), Failure> {
    match max {
        Some(max) if took > max => Err(Failure::Answer {
            label: "slow",
            detail: format!(
                "slow: {:.1} ms, max_latency {:.1} ms",
                took.as_secs_f64() * 1000.0,
                max.as_secs_f64() * 1000.0
            ),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conditions(pattern: Option<&str>, json: &[(&str, &str)]) -> BodyConditions {
        let json = json
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        BodyConditions::new(pattern, &json)
    }

    #[test]
    fn a_regex_is_judged_on_the_body() {
        let c = conditions(Some(r#""status":\s*"(UP|OK)""#), &[]);
        assert!(c.need_body());
        assert_eq!(c.judge(br#"{"status": "UP"}"#), Ok(()));
        let e = c.judge(br#"{"status": "DOWN"}"#).unwrap_err();
        assert_eq!(e.label(), "body_mismatch");
        assert!(e.to_string().starts_with("body does not match /"), "{e}");
    }

    #[test]
    fn json_values_are_compared_as_text_at_their_pointer() {
        let c = conditions(
            None,
            &[
                ("/status", "UP"),
                ("/checks/0/ok", "true"),
                ("/replicas", "3"),
            ],
        );
        let healthy = br#"{"status":"UP","checks":[{"ok":true}],"replicas":3}"#;
        assert_eq!(c.judge(healthy), Ok(()));
        let down = br#"{"status":"DOWN","checks":[{"ok":true}],"replicas":3}"#;
        assert_eq!(
            c.judge(down).unwrap_err().to_string(),
            r#"body /status is "DOWN", not "UP""#
        );
        let missing = br#"{"status":"UP","replicas":3}"#;
        assert_eq!(
            c.judge(missing).unwrap_err().to_string(),
            "body has no /checks/0/ok"
        );
        assert!(c
            .judge(b"<html>")
            .unwrap_err()
            .to_string()
            .starts_with("body is not JSON"));
        assert!(!conditions(None, &[]).need_body());
    }

    #[test]
    fn only_a_slower_answer_than_max_latency_fails() {
        let max = Some(Duration::from_millis(100));
        assert_eq!(judge_latency(Duration::from_millis(99), max), Ok(()));
        assert_eq!(judge_latency(Duration::from_secs(5), None), Ok(()));
        let slow = judge_latency(Duration::from_millis(150), max).unwrap_err();
        assert_eq!(slow.label(), "slow");
        assert_eq!(slow.to_string(), "slow: 150.0 ms, max_latency 100.0 ms");
    }
}
