use std::mem::size_of;

use ho_config::Require;

use super::*;

/// `n` endpoints drawn with `rng`: names of 0 to 12 characters, checks from `pool` (one
/// for most, up to four), a combination for some (sometimes of a single check).
fn generated(rng: &mut fastrand::Rng, pool: &[CheckKey], n: usize) -> Vec<EndpointPlan> {
    (0..n)
        .map(|i| {
            let several = rng.u8(..4) == 0;
            let count = if several { rng.usize(1..=4) } else { 1 };
            let composite = (several && rng.bool()).then(|| {
                let require = match rng.u8(..3) {
                    0 => Require::All,
                    1 => Require::Any,
                    _ => Require::Quorum {
                        quorum: rng.u32(1..=count as u32),
                    },
                };
                Box::new(Composite {
                    also: (1..count).collect(),
                    require,
                    must_pass: rng.bool(),
                })
            });
            EndpointPlan {
                name: (0..rng.usize(0..=12)).map(|_| rng.alphanumeric()).collect(),
                address: IpAddr::from([10, 0, (i / 256) as u8, i as u8]),
                checks: (0..count).map(|_| pool[rng.usize(..pool.len())]).collect(),
                composite,
            }
        })
        .collect()
}

/// Whether `plan` is down when the checks of `down` are, worked out from the plan's
/// fields: a check in `down` fails, every other passes.
fn down_by_plan(plan: &EndpointPlan, down: &[(CheckKey, u64)]) -> bool {
    let failed = |k: &CheckKey| down.iter().any(|(d, _)| d == k);
    let Some(c) = &plan.composite else {
        return failed(&plan.checks[0]);
    };
    let passing = plan.checks.iter().filter(|k| !failed(k)).count();
    let needed = match c.require {
        Require::All => plan.checks.len(),
        Require::Any => 1,
        Require::Quorum { quorum } => quorum as usize,
    };
    (c.must_pass && failed(&plan.checks[0])) || passing < needed
}

/// The columns give back every endpoint as it was planned (its name, address, checks in
/// order and combination), list the same keys the plans do, and judge each down exactly
/// when its plan's checks say so, in seeded generated tenants.
#[test]
fn the_columns_hold_what_the_plans_held_in_generated_tenants() {
    let pool: Vec<CheckKey> = (0..6)
        .map(|i| CheckKey::of(&format!("tcp://10.1.0.{i}:443")))
        .collect();
    for seed in 0..300 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let n = rng.usize(0..40);
        let plans = generated(&mut rng, &pool, n);
        let endpoints = Endpoints::of(plans.clone());
        let back: Vec<EndpointPlan> = endpoints.iter().map(|e| e.plan()).collect();
        assert_eq!(back, plans, "seed {seed}");
        let keys: Vec<CheckKey> = endpoints.keys().collect();
        let planned: Vec<CheckKey> = plans.iter().flat_map(|p| p.checks.to_vec()).collect();
        assert_eq!(keys, planned, "seed {seed}");
        for _ in 0..8 {
            let mut down: Vec<(CheckKey, u64)> = Vec::new();
            for key in &pool {
                if rng.bool() {
                    down.push((*key, rng.u64(..1000)));
                }
            }
            for (e, plan) in endpoints.iter().zip(&plans) {
                assert_eq!(e.is_down(&down), down_by_plan(plan, &down), "seed {seed}");
            }
        }
    }
}

/// An endpoint of one check costs its name's text, its name's end, its address and its
/// check's key (sixteen bytes, the text's own allocation not kept): under half of what an
/// `EndpointPlan` (its record, its boxed check and its name's own allocation) held.
#[test]
fn an_endpoint_of_one_check_holds_its_columns_only() {
    assert_eq!(size_of::<CheckKey>(), 16);
    let key = CheckKey::of("http://10.0.0.1:80/healthz");
    let n = 1000;
    let plans: Vec<EndpointPlan> = (0..n)
        .map(|i| EndpointPlan {
            name: format!("web-{i:04}"),
            address: IpAddr::from([10, 0, (i / 256) as u8, i as u8]),
            checks: [key].into(),
            composite: None,
        })
        .collect();
    let name = plans[0].name.len();
    let endpoints = Endpoints::of(plans);
    let per_endpoint = name + size_of::<u32>() + size_of::<IpAddr>() + size_of::<CheckKey>();
    assert_eq!(endpoints.own_bytes(), n * per_endpoint);
    let before = size_of::<EndpointPlan>() + size_of::<CheckKey>() + name;
    assert!(
        2 * per_endpoint < before,
        "{per_endpoint} B against {before} B"
    );
}
