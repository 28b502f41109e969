//! One probe run outside the engine, for the probe and misbehaviour tests.

use std::net::SocketAddr;
use std::time::Duration;

use ho_config::{CheckOverrides, Target};
use ho_engine::probe::{Probe, ProbeContext, ProbeResult};
use ho_kinds::CHECK_KINDS as Checks;

/// One probe of `addr` with `check` (port and interval filled in; port 0 for a kind
/// without ports), cut at `timeout` unless `check` sets its own.
pub async fn probe_within(
    addr: SocketAddr,
    timeout: Duration,
    check: CheckOverrides,
) -> ProbeResult {
    let check = CheckOverrides {
        port: (addr.port() != 0).then_some(addr.port()),
        timeout: check.timeout.or(Some(timeout)),
        interval: Some(Duration::from_secs(1)),
        ..check
    };
    let spec = ho_config::resolve_standalone_check(&check, &Checks).unwrap();
    let target = Target {
        address: addr.ip(),
        check: spec.into(),
    };
    Probe::new(&target, &mut ProbeContext::default())
        .unwrap()
        .run(&mut None)
        .await
}
