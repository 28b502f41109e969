//! The status Kuadrant's own controllers write on a `DNSPolicy` and a
//! `DNSHealthCheckProbe`, computed from what the orchestrator decided, so `kubectl get`
//! and the tools Kuadrant users already have read the same conditions:
//!
//! - `DNSPolicy`: `Accepted` (`Accepted`; `Invalid` with the reason; `TargetNotFound` when
//!   the Gateway its `targetRef` names does not exist) and, once accepted, `Enforced`
//!   (`Enforced` when every record it governs is ready, "partially" naming the others;
//!   `Unknown` when none is), with `totalRecords`.
//! - `DNSHealthCheckProbe`: `healthy`, `consecutiveFailures`, `reason` and `lastCheckedAt`,
//!   from the engine's verdict on the probe's address (every address of a host name).

use std::sync::Arc;

use ho_engine::hysteresis::Health;
use ho_engine::status::EndpointStatus;
use ho_import::kuadrant::{PolicyOutcome, TranslateError};
use kube::api::DynamicObject;
use serde_json::{json, Value};

use super::super::resource::Condition;
use super::super::status::{condition, Observed};

/// What a policy's status is computed from.
pub struct PolicyFacts<'a> {
    /// Its outcome in the namespace's translation, or why the namespace did not translate.
    pub outcome: Option<&'a Result<PolicyOutcome, Arc<TranslateError>>>,
    /// The records made from its Gateway's listeners that are refused, with why: they have
    /// no object of their own, so the policy's status names them.
    pub refused: &'a [(String, String)],
    /// Whether the Gateway its `targetRef` names exists (`None`: it names none).
    pub target_exists: Option<bool>,
    /// Whether each record it governs is ready (its `Ready` condition is `True`).
    pub ready: &'a dyn Fn(&str) -> bool,
}

/// The `DNSPolicy`'s status as a merge patch of `status`.
pub fn policy_status(policy: &DynamicObject, facts: &PolicyFacts<'_>, now: f64) -> Value {
    let previous = current_conditions(policy);
    let at = Observed {
        generation: policy.metadata.generation,
        now,
    };
    let mut conditions = Vec::new();
    let records = match facts.outcome {
        Some(Ok(o)) => o.records.as_slice(),
        _ => &[],
    };
    match refusal(facts) {
        Some(("TargetNotFound", message)) => {
            conditions.push(condition(
                &previous,
                at,
                "Accepted",
                false,
                "TargetNotFound",
                message,
            ));
        }
        Some((reason, message)) => {
            let message = match facts.refused {
                [] => format!("{message}; the DNS it published before is kept"),
                refused => format!(
                    "{message}; {}; the DNS it published before is kept",
                    refused_records(refused)
                ),
            };
            conditions.push(condition(&previous, at, "Accepted", false, reason, message));
        }
        None => {
            let accepted = "DNSPolicy has been accepted".to_owned();
            conditions.push(condition(
                &previous, at, "Accepted", true, "Accepted", accepted,
            ));
            let mut enforced = enforced(records, facts.ready, &previous, at);
            if !facts.refused.is_empty() {
                enforced.message =
                    format!("{}; {}", enforced.message, refused_records(facts.refused));
            }
            conditions.push(enforced);
        }
    }
    json!({
        "observedGeneration": policy.metadata.generation,
        "conditions": conditions,
        "totalRecords": records.len(),
    })
}

/// Why the policy is not accepted (reason, message), if it is not.
fn refusal(facts: &PolicyFacts<'_>) -> Option<(&'static str, String)> {
    match facts.outcome {
        None => Some(("Unknown", "DNSPolicy has not been translated yet".to_owned())),
        Some(Err(e)) => Some(("Invalid", e.to_string())),
        Some(Ok(o)) => o.invalid.as_ref().map(|m| ("Invalid", m.clone())),
    }
    .or_else(|| {
        (facts.target_exists == Some(false)).then(|| {
            (
                "TargetNotFound",
                "the Gateway its targetRef names was not found; the DNSRecords named for it are still published as this policy says".to_owned(),
            )
        })
    })
}

/// The refused records made from listeners, each with why, as a clause of a message.
fn refused_records(refused: &[(String, String)]) -> String {
    let each: Vec<String> = refused
        .iter()
        .map(|(record, why)| format!("DNSRecord {record} (from a listener) is refused: {why}"))
        .collect();
    each.join("; ")
}

/// `Enforced`: every governed record ready, some of them, or none.
fn enforced(
    records: &[String],
    ready: &dyn Fn(&str) -> bool,
    previous: &[Condition],
    at: Observed,
) -> Condition {
    let not_ready: Vec<&str> = records
        .iter()
        .map(String::as_str)
        .filter(|r| !ready(r))
        .collect();
    let (ok, reason, message) = if records.is_empty() {
        (
            true,
            "Enforced",
            "DNSPolicy has been enforced: it governs no DNSRecord yet".to_owned(),
        )
    } else if not_ready.is_empty() {
        (
            true,
            "Enforced",
            "DNSPolicy has been enforced on every DNSRecord it governs".to_owned(),
        )
    } else if not_ready.len() < records.len() {
        (
            true,
            "Enforced",
            format!(
                "DNSPolicy has been partially enforced; DNSRecords not ready: {}",
                not_ready.join(", ")
            ),
        )
    } else {
        (
            false,
            "Unknown",
            "DNSPolicy is not enforced: none of the DNSRecords it governs is ready".to_owned(),
        )
    };
    condition(previous, at, "Enforced", ok, reason, message)
}

/// What the engine knows of a probe's address.
pub enum Probed<'a> {
    /// The endpoints probing it: one for an IP address, one per address a host name
    /// resolves to.
    At(&'a [&'a EndpointStatus]),
    /// Not probed, and why; `failed`: the reason is a failure of the probe's own (an
    /// address that is not one, a name that does not resolve), as dns-operator reports it.
    Not { failed: bool, reason: String },
}

/// The `DNSHealthCheckProbe`'s status as a merge patch of `status`, from the engine's view
/// of its address: for a host name, of every address it resolves to, judged as
/// dns-operator judges a CNAME's probe (unhealthy when any address fails, its failure the
/// reason).
pub fn probe_status(probe: &DynamicObject, probed: Probed<'_>) -> Value {
    let generation = probe.metadata.generation;
    let endpoints = match probed {
        Probed::At(endpoints) => endpoints,
        Probed::Not { failed, reason } => {
            return json!({
                "observedGeneration": generation,
                "healthy": if failed { json!(false) } else { Value::Null },
                "consecutiveFailures": 0,
                "reason": reason,
            });
        }
    };
    let down = endpoints.iter().find(|e| e.state == Health::Down);
    let healthy = match down {
        Some(_) => Some(false),
        None if !endpoints.is_empty() && endpoints.iter().all(|e| e.state == Health::Up) => {
            Some(true)
        }
        None => None,
    };
    let failing = endpoints
        .iter()
        .find(|e| e.last.as_ref().is_some_and(|l| !l.ok));
    let reason = match failing.and_then(|e| e.last.as_ref()) {
        Some(last) => last.reason.clone(),
        None if endpoints.iter().any(|e| e.last.is_none()) || endpoints.is_empty() => {
            "not probed yet".to_owned()
        }
        None => String::new(),
    };
    let last = endpoints
        .iter()
        .filter_map(|e| e.last.as_ref())
        .map(|l| l.at.to_string())
        .max();
    json!({
        "observedGeneration": generation,
        "healthy": healthy,
        "consecutiveFailures": endpoints.iter().map(|e| e.failed_in_a_row).max().unwrap_or(0),
        "reason": reason,
        "lastCheckedAt": last,
    })
}

fn current_conditions(object: &DynamicObject) -> Vec<Condition> {
    object
        .data
        .pointer("/status/conditions")
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "kuadrant.io/v1", "kind": "DNSPolicy",
            "metadata": {"name": "p", "namespace": "ns", "generation": 3},
            "spec": {"targetRef": {"name": "gw"}},
        }))
        .unwrap()
    }

    fn reason(status: &Value, type_: &str) -> Option<(String, String)> {
        status["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == type_)
            .map(|c| {
                (
                    c["status"].as_str().unwrap().to_owned(),
                    c["reason"].as_str().unwrap().to_owned(),
                )
            })
    }

    #[test]
    fn a_policy_reads_accepted_and_enforced_as_its_records_are() {
        let outcome = Ok(PolicyOutcome {
            records: vec!["a".into(), "b".into()],
            invalid: None,
        });
        let pair = |s: &str, r: &str| Some((s.to_owned(), r.to_owned()));
        for (ready, enforced) in [
            (&["a", "b"][..], pair("True", "Enforced")),
            (&["a"][..], pair("True", "Enforced")),
            (&[][..], pair("False", "Unknown")),
        ] {
            let is_ready = |r: &str| ready.contains(&r);
            let facts = PolicyFacts {
                refused: &[],
                outcome: Some(&outcome),
                target_exists: Some(true),
                ready: &is_ready,
            };
            let status = policy_status(&policy(), &facts, 0.0);
            assert_eq!(reason(&status, "Accepted"), pair("True", "Accepted"));
            assert_eq!(reason(&status, "Enforced"), enforced, "{ready:?}");
            assert_eq!(status["totalRecords"], 2);
            assert_eq!(status["observedGeneration"], 3);
        }
    }

    #[test]
    fn an_invalid_policy_or_a_missing_gateway_is_not_accepted_and_says_why() {
        let invalid = Ok(PolicyOutcome {
            records: vec!["a".into()],
            invalid: Some(
                "DNSPolicy p.spec.healthCheck.protocol \"UDP\": only HTTP and HTTPS".into(),
            ),
        });
        let ready = |_: &str| true;
        for (outcome, exists, want) in [
            (&invalid, Some(true), "Invalid"),
            (&Ok(PolicyOutcome::default()), Some(false), "TargetNotFound"),
            (
                &Err(Arc::new(TranslateError::Refused {
                    reason: "the namespace does not translate".to_owned(),
                })),
                Some(true),
                "Invalid",
            ),
        ] {
            let facts = PolicyFacts {
                refused: &[],
                outcome: Some(outcome),
                target_exists: exists,
                ready: &ready,
            };
            let status = policy_status(&policy(), &facts, 0.0);
            assert_eq!(
                reason(&status, "Accepted"),
                Some(("False".to_owned(), want.to_owned()))
            );
            assert_eq!(
                reason(&status, "Enforced"),
                None,
                "not enforced unless accepted"
            );
            let message = status["conditions"][0]["message"].as_str().unwrap();
            let kept = match want {
                "TargetNotFound" => "still published as this policy says",
                _ => "the DNS it published before is kept",
            };
            assert!(message.ends_with(kept), "{message}");
        }
    }

    /// A record made from a listener has no object of its own: its refusal, with the
    /// reason, is in its policy's status, whether the policy is refused or accepted.
    #[test]
    fn a_refused_listener_record_is_named_with_its_reason_in_the_policy() {
        let refused = [(
            "gw-api".to_owned(),
            "Invalid: Gateway gw has no IP address in its status".to_owned(),
        )];
        let ready = |_: &str| true;
        let invalid = Ok(PolicyOutcome {
            records: vec!["gw-api".into()],
            invalid: Some("protocol \"UDP\": only HTTP and HTTPS".into()),
        });
        let accepted = Ok(PolicyOutcome {
            records: vec!["gw-api".into()],
            invalid: None,
        });
        for (outcome, condition) in [(&invalid, 0), (&accepted, 1)] {
            let facts = PolicyFacts {
                refused: &refused,
                outcome: Some(outcome),
                target_exists: Some(true),
                ready: &ready,
            };
            let status = policy_status(&policy(), &facts, 0.0);
            let message = status["conditions"][condition]["message"].as_str().unwrap();
            assert!(
                message.contains(
                    "DNSRecord gw-api (from a listener) is refused: Invalid: Gateway gw has no IP address"
                ),
                "{message}"
            );
        }
    }
}
