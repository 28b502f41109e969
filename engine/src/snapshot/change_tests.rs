//! A verdict change's size, and its JSON: the same bytes as when its texts were owned.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use serde::Serialize;

use super::{Reasons, VerdictChange};
use crate::hysteresis::Health;

/// A change as it was when each one owned its name and reason: what the sinks serialized
/// (the span it also held was never serialized).
#[derive(Serialize)]
struct OwnedChange {
    endpoint: String,
    address: IpAddr,
    from: Health,
    to: Health,
    reason: String,
}

/// A seeded text: names and failures with what JSON escapes (quotes, backslashes, control
/// characters) and non-ASCII letters, from a few texts (shared) or many.
fn text(rng: &mut fastrand::Rng, few: bool) -> String {
    const PARTS: [&str; 8] = [
        "ok",
        "status 503",
        "\"q\"",
        "a\\b",
        "\n\t",
        "é☃",
        "\u{1}",
        " ",
    ];
    let n = if few { 1 } else { rng.usize(1..5) };
    (0..n)
        .map(|_| match rng.u8(..3) {
            0 if !few => format!("{}", rng.u32(..100_000)),
            _ => PARTS[rng.usize(..if few { 3 } else { PARTS.len() })].to_owned(),
        })
        .collect()
}

fn health(rng: &mut fastrand::Rng) -> Health {
    [Health::Unknown, Health::Up, Health::Down][rng.usize(..3)]
}

fn address(rng: &mut fastrand::Rng) -> IpAddr {
    match rng.bool() {
        true => IpAddr::V4(Ipv4Addr::from(rng.u32(..))),
        false => IpAddr::V6(Ipv6Addr::from(rng.u128(..))),
    }
}

/// Seeded changes, each made twice from the same parts (owned texts as before, shared
/// ones now): their JSON, alone and as a snapshot's list, is the same bytes.
#[test]
fn changes_serialize_to_the_bytes_their_owned_form_did_in_generated_sequences() {
    for seed in 0..30 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut reasons = Reasons::default();
        let names: Vec<Arc<str>> = (0..50).map(|_| text(&mut rng, false).into()).collect();
        let (mut owned, mut shared) = (Vec::new(), Vec::new());
        for _ in 0..rng.usize(0..300) {
            let name = &names[rng.usize(..names.len())];
            let few = rng.bool();
            let reason = text(&mut rng, few);
            let (address, from, to) = (address(&mut rng), health(&mut rng), health(&mut rng));
            owned.push(OwnedChange {
                endpoint: name.to_string(),
                address,
                from,
                to,
                reason: reason.clone(),
            });
            shared.push(VerdictChange {
                endpoint: name.clone(),
                address,
                from,
                to,
                reason: reasons.get(&reason),
            });
        }
        for (o, s) in owned.iter().zip(&shared) {
            let (o, s) = (serde_json::to_string(o), serde_json::to_string(s));
            assert_eq!(o.unwrap(), s.unwrap(), "seed {seed}");
        }
        let lists = (serde_json::to_vec(&owned), serde_json::to_vec(&shared));
        assert_eq!(lists.0.unwrap(), lists.1.unwrap(), "seed {seed}");
    }
}

/// A tenant's snapshot holds a change per endpoint after a start until it publishes
/// again: it must not grow back past a name, an address, two verdicts and a pointer.
#[test]
fn a_change_stays_48_bytes() {
    assert!(std::mem::size_of::<VerdictChange>() <= 48);
}
