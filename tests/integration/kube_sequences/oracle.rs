//! The oracle: what each name must answer and which objects must say they are refused,
//! worked out from the steps alone by the rules the user guide states, never from the
//! engine's code:
//!
//! - a refused write changes no answer: the object's last accepted write keeps serving;
//! - with one DNSPolicy in a namespace it governs every DNSRecord there, and a record or a
//!   listener's record whose policy is refused keeps its last accepted answer;
//! - a policy on a Gateway publishes each listener's hostname at the Gateway's IP
//!   addresses (a CNAME to its host name when it has no IP), kept while the Gateway has no
//!   address or the policy is refused;
//! - only a deletion (of the object, or of the Gateway or policy a listener's name comes
//!   from) or an accepted write that no longer makes a name withdraws it;
//! - a restart, a stale or empty cache and expired watches change nothing.

use std::collections::{BTreeMap, BTreeSet};

use super::objects::{Gateways, LB_HOST};
use super::steps::{Addresses, Mask, Object, Step};

/// What a name must answer once the step settled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// These A records.
    Addresses(BTreeSet<String>),
    /// A CNAME to this name.
    Cname(String),
    /// Nothing: NXDOMAIN or an empty NOERROR.
    Absent,
    /// Not in the server's zones: REFUSED.
    Refused,
}

/// An object's latest write and the one that serves (its last accepted).
#[derive(Clone, Debug, Default)]
struct Written {
    latest: Option<Step>,
    accepted: Option<Step>,
}

/// Every object's writes, and what the listeners publish.
#[derive(Clone, Debug, Default)]
pub struct Model {
    objects: BTreeMap<Object, Written>,
    /// Listener hostname -> its answer, as last accepted.
    listeners: BTreeMap<String, Expect>,
}

/// The names a sequence asks about.
pub const NAMES: [&str; 7] = [
    "fo-0.team-a.io",
    "fo-1.team-a.io",
    "rec-0.team-a.io",
    "rec-1.team-a.io",
    "l0.team-a.io",
    "l1.team-a.io",
    "rec-x.team-c.io",
];

impl Model {
    /// Takes `step` into the model.
    pub fn apply(&mut self, step: &Step, gws: &Gateways) {
        match step {
            Step::Delete(object) => {
                self.objects.remove(object);
                if matches!(object, Object::Gateway | Object::Policy) {
                    self.listeners.clear();
                }
            }
            _ => {
                if let Some(object) = step.object() {
                    self.objects.entry(object).or_default().latest = Some(step.clone());
                }
            }
        }
        self.accept(gws);
    }

    /// `object`'s latest write, while it exists.
    pub fn latest_write(&self, object: Object) -> Option<&Step> {
        self.objects.get(&object)?.latest.as_ref()
    }

    /// Whether the namespace's policy refuses what it governs (absent: governs nothing).
    pub fn policy_refused(&self) -> bool {
        self.latest_write(Object::Policy).is_some_and(Step::invalid)
    }

    /// Whether `object`'s latest write is refused, by itself or by the policy over it.
    pub fn refused(&self, object: Object) -> bool {
        let Some(latest) = self.latest_write(object) else {
            return false;
        };
        match object {
            Object::Outsider => true,
            Object::Record(_) => latest.invalid() || self.policy_refused(),
            _ => latest.invalid(),
        }
    }

    /// Whether listener names are published (or kept): a Gateway without an address refuses
    /// those; one that never had an address made none, and has nothing to refuse.
    pub fn keeps_listeners(&self) -> bool {
        !self.listeners.is_empty()
    }

    /// The objects that exist now.
    pub fn existing(&self) -> impl Iterator<Item = Object> + '_ {
        self.objects.keys().copied()
    }

    fn accept(&mut self, gws: &Gateways) {
        let keys: Vec<Object> = self.objects.keys().copied().collect();
        for object in keys {
            if !self.refused(object) {
                let w = self.objects.get_mut(&object).unwrap();
                w.accepted = w.latest.clone();
            }
        }
        let gateway = self.latest_write(Object::Gateway).cloned();
        let policy = self.latest_write(Object::Policy).cloned();
        match (gateway, policy) {
            (
                Some(Step::Gateway {
                    listeners,
                    addresses,
                }),
                Some(p),
            ) if !p.invalid() => {
                if addresses != Addresses::Empty {
                    self.listeners = listener_answers(listeners, addresses, gws);
                }
            }
            (Some(_), Some(_)) => {}
            _ => self.listeners.clear(),
        }
    }

    /// What `name` must answer.
    pub fn expect(&self, name: &str, gws: &Gateways) -> Expect {
        if !name.ends_with(".team-a.io") {
            return Expect::Refused;
        }
        let label = name.split('.').next().unwrap();
        let accepted = |o: Object| self.objects.get(&o).and_then(|w| w.accepted.clone());
        let addresses = |mask: Mask| Expect::Addresses(gws.of(mask).into_iter().collect());
        let slot = || label[label.len() - 1..].parse::<u8>().unwrap();
        match &label[..label.len() - 2] {
            "fo" => match accepted(Object::Failover(slot())) {
                Some(Step::Failover { addrs, .. }) => addresses(addrs),
                _ => Expect::Absent,
            },
            "rec" => match accepted(Object::Record(slot())) {
                Some(Step::Record { addrs, .. }) => addresses(addrs),
                _ => Expect::Absent,
            },
            _ => self.listeners.get(name).cloned().unwrap_or(Expect::Absent),
        }
    }
}

fn listener_answers(
    listeners: u8,
    addresses: Addresses,
    gws: &Gateways,
) -> BTreeMap<String, Expect> {
    let answer = match addresses {
        Addresses::Ips(mask) => Expect::Addresses(gws.of(mask).into_iter().collect()),
        _ => Expect::Cname(LB_HOST.into()),
    };
    (0..2)
        .filter(|i| listeners & (1 << i) != 0)
        .map(|i| (format!("l{i}.team-a.io"), answer.clone()))
        .collect()
}
