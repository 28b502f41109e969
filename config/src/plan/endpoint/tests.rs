use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::Serialize;

use super::{Endpoint, EndpointExtras};
use crate::model::Require;
use crate::plan::Composite;

/// The endpoint as one flat record with every field inline, as the plan held it before
/// the rarely set fields moved out of line: what its serialized form must stay.
#[derive(Serialize)]
#[serde(rename = "Endpoint")]
struct Flat {
    name: String,
    address: IpAddr,
    labels: BTreeMap<String, String>,
    weight: Option<u32>,
    priority: u32,
    cluster: Option<String>,
    hold_failback: bool,
    host: Option<String>,
    target: usize,
    composite: Option<Composite>,
}

fn maybe<T>(rng: &mut fastrand::Rng, make: impl FnOnce(&mut fastrand::Rng) -> T) -> Option<T> {
    rng.bool().then(|| make(rng))
}

fn word(rng: &mut fastrand::Rng) -> String {
    let len = rng.usize(1..12);
    std::iter::repeat_with(|| rng.alphanumeric())
        .take(len)
        .collect()
}

/// A flat record with each rarely set field set or not at random.
fn generated(rng: &mut fastrand::Rng) -> Flat {
    let address = match rng.bool() {
        true => IpAddr::from(rng.u32(..).to_be_bytes()),
        false => IpAddr::from(rng.u128(..).to_be_bytes()),
    };
    let labels = match rng.u8(..4) {
        0 => (0..rng.usize(1..4))
            .map(|_| (word(rng), word(rng)))
            .collect(),
        _ => BTreeMap::new(),
    };
    Flat {
        name: word(rng),
        address,
        labels,
        weight: maybe(rng, |r| r.u32(..1000)),
        priority: rng.u32(..4),
        cluster: maybe(rng, word),
        hold_failback: rng.bool(),
        host: maybe(rng, |r| format!("{}.example.com", word(r))),
        target: rng.usize(..1 << 20),
        composite: maybe(rng, |r| Composite {
            also: (0..r.usize(1..4)).map(|_| r.usize(..1 << 20)).collect(),
            require: [Require::All, Require::Any, Require::Quorum { quorum: 2 }][r.usize(..3)],
            must_pass: r.bool(),
        }),
    }
}

fn endpoint_of(flat: &Flat) -> Endpoint {
    let mut endpoint =
        Endpoint::new(flat.name.as_str(), flat.address, flat.target).with_extras(EndpointExtras {
            labels: flat.labels.clone(),
            cluster: flat.cluster.clone(),
            host: flat.host.clone(),
            composite: flat.composite.clone(),
        });
    endpoint.weight = flat.weight;
    endpoint.priority = flat.priority;
    endpoint.hold_failback = flat.hold_failback;
    endpoint
}

#[test]
fn serializes_as_the_flat_record_whichever_fields_are_set() {
    let mut rng = fastrand::Rng::with_seed(0x5eed_e4d9);
    for _ in 0..2_000 {
        let flat = generated(&mut rng);
        let endpoint = endpoint_of(&flat);
        assert_eq!(
            serde_json::to_string(&endpoint).unwrap(),
            serde_json::to_string(&flat).unwrap()
        );
        let also: Vec<usize> = flat.composite.iter().flat_map(|c| c.also.clone()).collect();
        let targets: Vec<usize> = std::iter::once(flat.target).chain(also).collect();
        assert_eq!(endpoint.targets().collect::<Vec<_>>(), targets);
    }
}

#[test]
fn a_retargeted_endpoint_keeps_everything_else() {
    let mut rng = fastrand::Rng::with_seed(7);
    for _ in 0..200 {
        let mut flat = generated(&mut rng);
        let mut endpoint = endpoint_of(&flat);
        flat.target = rng.usize(..1 << 20);
        endpoint.set_target(flat.target);
        assert_eq!(
            serde_json::to_string(&endpoint).unwrap(),
            serde_json::to_string(&flat).unwrap()
        );
    }
}

/// The plan holds one per configured endpoint for the life of the process: a name, an
/// address, a tier, a weight, a target and one pointer, not room for every rarely set field.
#[test]
fn an_endpoint_is_no_larger_than_its_common_fields_and_one_pointer() {
    assert!(
        std::mem::size_of::<Endpoint>() <= 64,
        "{}",
        std::mem::size_of::<Endpoint>()
    );
}
