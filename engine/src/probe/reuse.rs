//! `reuse_connection` and `fresh_connection_every`, read alike by every kind that can keep
//! its connection between probes (http and https: HTTP/1.1 keep-alive; grpc and grpcs: one
//! HTTP/2 connection).

use super::registry::Problems;

/// Most probes one connection carries before a fresh one: at most 1000, nginx's default
/// `keepalive_requests` (and its `http2` equivalent), so a server closing first is the
/// exception.
const MAX_PROBES_PER_CONNECTION: u32 = 1000;

/// `reuse_connection` and `fresh_connection_every` as one number (1 = no reuse): a kept
/// connection does not see faults that only new connections meet (a firewall rule, a full
/// accept queue, conntrack), so a fresh one is still opened every `every` probes (10 unless
/// set) and after every failure.
pub(super) fn probes_per_connection(
    reuse: Option<bool>,
    every: Option<u32>,
    errs: &mut Problems<'_>,
) -> u32 {
    if reuse != Some(true) {
        if every.is_some() {
            errs.push(
                "fresh_connection_every",
                "has no effect without reuse_connection = true",
            );
        }
        return 1;
    }
    let every = every.unwrap_or(10);
    if !(2..=MAX_PROBES_PER_CONNECTION).contains(&every) {
        errs.push(
            "fresh_connection_every",
            format!(
                "must be between 2 and {MAX_PROBES_PER_CONNECTION} (1 is reuse_connection = false)"
            ),
        );
    }
    every
}
