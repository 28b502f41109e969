//! Records made from Gateway listeners that a round no longer makes, kept. A listener's
//! record depends on its Gateway and on the DNSPolicy that governs it; when a round does
//! not make it, that is a withdrawal only if one of them was deleted, or if both are
//! accepted as they are now (an accepted edit dropped the record). Otherwise (the policy
//! refused, the namespace's documents not translating, the Gateway without an address
//! for now) the record stays, refused with the reason, and admission keeps publishing its
//! last accepted translation. A written record absent from a complete list was deleted:
//! it is not carried.

use std::sync::Arc;

use kube::api::DynamicObject;

use super::super::admit::Key;
use super::refusal::Kept;
use super::round::View;
use super::translate::{listener_record, stands_for, Listener, Policies, Record, Records};

/// Adds to `current` each listener record of `previous` that this round did not make and
/// that is kept (see the module): those of which admission keeps a last accepted
/// generation (`kept`), refused with why they are kept.
pub(super) fn carry_over(
    previous: &Records,
    current: &mut Records,
    policies: &Policies,
    view: &View<'_>,
    kept: &[Key],
) {
    for ((ns, name), record) in previous {
        if current.contains_key(&(ns.clone(), name.clone())) {
            continue;
        }
        let Some(listener) = &record.listener else {
            continue;
        };
        if !kept.iter().any(|k| k.0 == *ns && stands_for(&k.1, name)) {
            continue;
        }
        let Some(why) = kept_because(listener, ns, policies, view) else {
            continue;
        };
        let carried = Record {
            object: record.object.clone(),
            stand_ins: Err(why.into()),
            listener: Some(listener.clone()),
        };
        current.insert((ns.clone(), name.clone()), carried);
    }
}

/// The listener records a previous run kept a last accepted generation of (`kept`), as
/// they would have been remembered: after a restart, the first round knows them only
/// from admission's state file.
pub(super) fn remembered(kept: &[Key], view: &View<'_>) -> Records {
    let mut out = Records::new();
    for (ns, stand_in) in kept {
        let Some(name) = stand_in.strip_prefix("dnsrecord.") else {
            continue;
        };
        // `dnsrecord.R-2` is the second tenant of record R, not a record of its own.
        let second = kept.iter().any(|(n, other)| {
            n == ns && other != stand_in && stands_for(stand_in, record_of(other))
        });
        if second {
            continue;
        }
        let Some((object, gateway)) = listener_record(name, ns, view.gateways) else {
            continue;
        };
        let policy = targeting(view, ns, &gateway).map(str::to_owned);
        let record = Record {
            object,
            stand_ins: Ok(Vec::new()),
            listener: Some(Listener { gateway, policy }),
        };
        out.insert((ns.clone(), name.to_owned()), record);
    }
    out
}

/// The record a stand-in's name (`dnsrecord.R`) names.
fn record_of(stand_in: &str) -> &str {
    stand_in.strip_prefix("dnsrecord.").unwrap_or(stand_in)
}

/// Why the record made from `listener` (of namespace `ns`) is kept although this round
/// did not make it, or `None` when it is withdrawn.
fn kept_because(
    listener: &Listener,
    ns: &str,
    policies: &Policies,
    view: &View<'_>,
) -> Option<Kept> {
    let gateway = find(view.gateways, ns, &listener.gateway)?;
    // A record refused before its policy was known is its Gateway's policy's.
    let policy = match listener.policy.as_deref() {
        Some(policy) => policy,
        None => targeting(view, ns, &listener.gateway)?,
    };
    let policy_objects: Vec<Arc<DynamicObject>> = view
        .others
        .iter()
        .filter(|o| o.types.as_ref().is_some_and(|t| t.kind == "DNSPolicy"))
        .cloned()
        .collect();
    find(&policy_objects, ns, policy)?;
    match policies.get(&(ns.to_owned(), policy.to_owned())) {
        Some(Err(e)) => Some(Kept::Untranslated(e.clone())),
        Some(Ok(outcome)) => match &outcome.invalid {
            Some(why) => Some(Kept::PolicyInvalid {
                policy: policy.to_owned(),
                why: why.clone(),
            }),
            None if !has_address(gateway) => Some(Kept::NoAddress {
                gateway: listener.gateway.clone(),
            }),
            None => None,
        },
        None => Some(Kept::NotTranslated {
            policy: policy.to_owned(),
        }),
    }
}

/// The object of namespace `ns` named `name`.
fn find<'a>(
    objects: &'a [Arc<DynamicObject>],
    ns: &str,
    name: &str,
) -> Option<&'a Arc<DynamicObject>> {
    objects.iter().find(|o| {
        o.metadata.namespace.as_deref() == Some(ns) && o.metadata.name.as_deref() == Some(name)
    })
}

/// The first DNSPolicy of `ns` whose `targetRef` names Gateway `gateway`.
fn targeting<'a>(view: &'a View<'_>, ns: &str, gateway: &str) -> Option<&'a str> {
    view.others
        .iter()
        .filter(|o| o.types.as_ref().is_some_and(|t| t.kind == "DNSPolicy"))
        .filter(|o| o.metadata.namespace.as_deref() == Some(ns))
        .find(|o| o.data["spec"]["targetRef"]["name"].as_str() == Some(gateway))
        .and_then(|o| o.metadata.name.as_deref())
}

/// Whether the Gateway's status has an address a listener's record publishes: an IP
/// address (an A or AAAA record) or a host name (a CNAME), read as the records read them.
fn has_address(gateway: &DynamicObject) -> bool {
    !super::super::discover::gateway_addresses(gateway).is_empty()
}
