//! The zone-writing sinks' shared test: thirty tenants losing one shared gateway at once
//! must be written in a few rounds (a listing and a batched change each), not a listing and
//! a change per tenant.

use ho_testkit::Behaviour;

use super::*;

/// Thirty tenants `t1`..`t30` (`t{n}.{zone}`, gateways gw-1 and gw-{n+1}) publishing
/// through sink `sink` (its table `table`, `tenant_keys` added to each tenant); waits until
/// every tenant is written, fails gw-1 and waits until it left every tenant. `published`
/// reads a name's addresses from the back end, `counts` its request counters; returns how
/// much they grew while gw-1 was withdrawn.
pub async fn thirty_tenants_lose_a_shared_gateway<const N: usize>(
    table: &str,
    sink: &str,
    zone: &str,
    tenant_keys: &str,
    published: impl Fn(&str) -> Option<Vec<String>>,
    counts: impl Fn() -> [usize; N],
) -> [usize; N] {
    let dir = tempfile::tempdir().unwrap();
    let mut gws = gateways(31);
    let mut config = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>()).with(table);
    for t in 1..=30 {
        config = config.with(&format!(
            "[[tenants]]\nname = \"t{t}\"\ndomains = [\"t{t}.{zone}\"]\nendpoints = [\"gw-1\", \"gw-{}\"]\nsinks = [\"{sink}\"]\n{tenant_keys}",
            t + 1
        ));
    }
    let engine = start_engine(dir.path(), &config.render()).await;
    let all_written = |want: usize| {
        (1..=30).all(|t| published(&format!("t{t}.{zone}")).is_some_and(|a| a.len() == want))
    };
    eventually("every tenant written", || all_written(2)).await;
    let before = counts();
    gws[0].set(Behaviour::Refuse).unwrap();
    eventually("gw-1 withdrawn from every tenant", || all_written(1)).await;
    let after = counts();
    drop(engine);
    std::array::from_fn(|i| after[i] - before[i])
}
