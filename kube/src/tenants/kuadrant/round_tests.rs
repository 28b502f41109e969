//! The pure round with a translation that publishes a Gateway's one listener while its
//! policy is valid and fails its namespace otherwise: the listener's record is carried
//! through the failure, a round before the lists changes nothing, and deleting the policy
//! or the Gateway withdraws it.

use std::sync::Arc;

use ho_import::kuadrant::{Document, Kind, PolicyOutcome, TranslateError, Translation};
use kube::api::DynamicObject;
use serde_json::{json, Value};

use super::round::{Core, View};
use super::translate::Allowance;

/// `gw-api` (api.team-a.io at 192.0.2.1) while policy `p` reads; the namespace fails to
/// translate otherwise.
fn one_listener(docs: &[Document]) -> Result<Translation, TranslateError> {
    let policy = docs.iter().find(|d| d.kind() == Some(Kind::Policy));
    if policy.is_some_and(|p| matches!(p.object(), Some(Err(_)))) {
        return Err(TranslateError::Refused {
            reason: "policy p is broken".to_owned(),
        });
    }
    let gateway = docs.iter().any(|d| d.kind() == Some(Kind::Gateway));
    let spec = json!({"domains": ["api.team-a.io"], "sinks": [], "endpoints": [{"addresses": ["192.0.2.1"]}]});
    let mut t = Translation {
        tenants: [(
            "gw-api".to_owned(),
            Ok(serde_json::from_value(spec).unwrap()),
        )]
        .into(),
        by_record: Default::default(),
        unpublished: Default::default(),
        refused_by_probe: Default::default(),
        policies: Default::default(),
        probes: Default::default(),
    };
    if let (Some(_), true) = (policy, gateway) {
        t.by_record.insert("gw-api".into(), vec!["gw-api".into()]);
        let outcome = PolicyOutcome {
            records: vec!["gw-api".into()],
            invalid: None,
        };
        t.policies.insert("p".into(), outcome);
    }
    Ok(t)
}

fn object(value: Value) -> Arc<DynamicObject> {
    Arc::new(serde_json::from_value(value).expect("an object"))
}

fn policy(valid: bool) -> Arc<DynamicObject> {
    object(json!({
        "apiVersion": "kuadrant.io/v1", "kind": "DNSPolicy",
        "metadata": {"name": "p", "namespace": "team-a", "uid": "p"},
        "spec": {"targetRef": {"name": "gw"}, "healthCheck": {
            "failureThreshold": if valid { json!(3) } else { json!("three") },
        }},
    }))
}

fn gateway() -> Arc<DynamicObject> {
    object(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "team-a", "uid": "gw"},
        "spec": {"listeners": [{"name": "api", "hostname": "api.team-a.io"}]},
        "status": {"addresses": [{"type": "IPAddress", "value": "192.0.2.1"}]},
    }))
}

/// What the core holds of `gw-api`: `Some(true)` translated, `Some(false)` refused.
fn listener(core: &Core) -> Option<bool> {
    let key = ("team-a".to_owned(), "gw-api".to_owned());
    core.records().get(&key).map(|r| r.stand_ins.is_ok())
}

#[test]
fn a_listener_record_is_carried_through_a_refusal_and_withdrawn_only_by_a_deletion() {
    let sinks = |_: &str| vec!["local".to_owned()];
    let domain = |_: &str, _: &str| true;
    let allowed = Allowance {
        sinks: &sinks,
        domain: &domain,
    };
    let kept = [("team-a".to_owned(), "dnsrecord.gw-api".to_owned())];
    let mut core = Core::translating(one_listener);
    let round =
        |core: &mut Core, others: &[Arc<DynamicObject>], gateways: &[Arc<DynamicObject>]| {
            let view = View {
                records: &[],
                others,
                gateways,
            };
            core.refresh(Some(&view), &allowed, &kept);
        };
    let gateways = [gateway()];
    round(&mut core, &[policy(true)], &gateways);
    assert_eq!(listener(&core), Some(true));
    round(&mut core, &[policy(false)], &gateways);
    assert_eq!(listener(&core), Some(false), "carried, refused");
    assert_eq!(
        core.refusals(&kept).len(),
        1,
        "refused, so its last answer is kept"
    );
    core.refresh(None, &allowed, &kept);
    assert_eq!(
        listener(&core),
        Some(false),
        "a round before the lists changes nothing"
    );
    round(&mut core, &[policy(true)], &gateways);
    assert_eq!(
        listener(&core),
        Some(true),
        "the revert translates it again"
    );
    round(&mut core, &[policy(false)], &gateways);
    round(&mut core, &[], &gateways);
    assert_eq!(listener(&core), None, "the policy deleted");
    round(&mut core, &[policy(true)], &gateways);
    round(&mut core, &[policy(false)], &[]);
    assert_eq!(listener(&core), None, "the Gateway deleted");
}
