//! What a sequence does, one step at a time, and the seeded generator that writes them.
//! A step is a whole object to apply (so any suffix of a sequence still means something
//! after shrinking), a deletion, or a fault: a restart of the engine process, the API
//! server's watch cache falling behind or empty, every watch expired.

/// Which of the three loopback gateways (bit i: gateway i) an object names.
pub type Mask = u8;

/// A Gateway's `status.addresses`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Addresses {
    /// `IPAddress` entries, the gateways of the mask.
    Ips(Mask),
    /// One `Hostname` entry: the load balancer's name, which resolves to gateway 2.
    Hostname,
    /// No address yet (a Gateway whose controller has not written one): refused, kept.
    Empty,
}

/// The objects a sequence edits, each at a fixed name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Object {
    /// `DNSFailover` `fo-N` of team-a, publishing `fo-N.team-a.io`.
    Failover(u8),
    /// `DNSRecord` `rec-N` of team-a, publishing `rec-N.team-a.io`.
    Record(u8),
    /// `DNSRecord` `rec-x` of team-c, a namespace without an allowance: always refused.
    Outsider,
    /// Gateway `gw-0` of team-a, listeners `l0`/`l1` (`lN.team-a.io`).
    Gateway,
    /// `DNSPolicy` `gw-0-dns` of team-a on `gw-0`: the namespace's only policy.
    Policy,
    /// `DNSHealthCheckProbe` `probe-0` of team-a.
    Probe,
}

/// One step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// A `DNSFailover`'s addresses (`valid: false`: one is a host name, refused).
    Failover {
        slot: u8,
        addrs: Mask,
        valid: bool,
    },
    /// A `DNSRecord`'s A targets (`valid: false`: `spec.endpoints` no longer parses).
    Record {
        slot: u8,
        addrs: Mask,
        valid: bool,
    },
    /// team-c's record.
    Outsider,
    /// The Gateway's listeners (bit i: `li`) and addresses.
    Gateway {
        listeners: u8,
        addresses: Addresses,
    },
    /// The policy, written as `v1` or `v1alpha1` (`valid: false`: a protocol Kuadrant's
    /// probes do not speak).
    Policy {
        v1alpha1: bool,
        valid: bool,
    },
    /// The probe at gateway `at` (`valid: false`: an address that is no address).
    Probe {
        at: u8,
        valid: bool,
    },
    Delete(Object),
    /// The engine process killed and started again on the same `state_dir`.
    Restart,
    /// The API server's watch cache stops following etcd: lists that accept any version
    /// get what it held now.
    StaleCache,
    /// The watch cache restarts empty: lists that accept any version get no items.
    EmptyCache,
    /// etcd compacts and every watch ends: clients must list again.
    ExpireWatches,
}

impl Step {
    /// The object the step writes or deletes, if any.
    pub fn object(&self) -> Option<Object> {
        Some(match self {
            Step::Failover { slot, .. } => Object::Failover(*slot),
            Step::Record { slot, .. } => Object::Record(*slot),
            Step::Outsider => Object::Outsider,
            Step::Gateway { .. } => Object::Gateway,
            Step::Policy { .. } => Object::Policy,
            Step::Probe { .. } => Object::Probe,
            Step::Delete(o) => *o,
            _ => return None,
        })
    }

    /// Whether this writes a spec the engine must refuse.
    pub fn invalid(&self) -> bool {
        matches!(
            self,
            Step::Failover { valid: false, .. }
                | Step::Record { valid: false, .. }
                | Step::Policy { valid: false, .. }
                | Step::Probe { valid: false, .. }
                | Step::Gateway {
                    addresses: Addresses::Empty,
                    ..
                }
        )
    }
}

/// `len` steps from `seed`: mostly creates and valid edits, a refused edit followed now and
/// then by its revert (the last valid write of that object again), deletions, and a fault
/// about one step in five.
pub fn generate(seed: u64, len: usize) -> Vec<Step> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut last_valid: Vec<Step> = Vec::new();
    let mut steps: Vec<Step> = Vec::new();
    while steps.len() < len {
        if let Some(prev) = steps.last().filter(|s| s.invalid()) {
            let object = prev.object();
            let revert = last_valid.iter().rev().find(|s| s.object() == object);
            if let (Some(revert), true) = (revert, rng.bool()) {
                steps.push(revert.clone());
                continue;
            }
        }
        let step = match rng.u8(0..20) {
            0..=2 => Step::Failover {
                slot: rng.u8(0..2),
                addrs: rng.u8(1..8),
                valid: rng.u8(0..4) > 0,
            },
            3..=5 => Step::Record {
                slot: rng.u8(0..2),
                addrs: rng.u8(1..8),
                valid: rng.u8(0..4) > 0,
            },
            6 => Step::Outsider,
            7..=8 => Step::Gateway {
                listeners: rng.u8(0..4),
                addresses: match rng.u8(0..6) {
                    0 => Addresses::Empty,
                    1 => Addresses::Hostname,
                    _ => Addresses::Ips(rng.u8(1..8)),
                },
            },
            9..=10 => Step::Policy {
                v1alpha1: rng.bool(),
                valid: rng.u8(0..3) > 0,
            },
            11 => Step::Probe {
                at: rng.u8(0..3),
                valid: rng.bool(),
            },
            12..=15 => Step::Delete(pick_object(&mut rng)),
            16 => Step::Restart,
            17 => Step::StaleCache,
            18 => Step::EmptyCache,
            _ => Step::ExpireWatches,
        };
        if !step.invalid() && step.object().is_some() && !matches!(step, Step::Delete(_)) {
            last_valid.push(step.clone());
        }
        steps.push(step);
    }
    steps
}

fn pick_object(rng: &mut fastrand::Rng) -> Object {
    match rng.u8(0..7) {
        0 | 1 => Object::Failover(rng.u8(0..2)),
        2 | 3 => Object::Record(rng.u8(0..2)),
        4 => Object::Gateway,
        5 => Object::Policy,
        _ => Object::Probe,
    }
}
