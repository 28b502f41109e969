//! A resource's status from the admission verdict and the engine's `/status`: pure, so
//! what a team reads in `kubectl get` is computed the same way in tests and in the cluster.

use std::collections::HashMap;

use ho_engine::status::{Overview, SinkTenantStatus, TenantSummary};

use super::admit::Verdict;
use super::resource::{
    Condition, DNSFailover, DNSFailoverStatus, EndpointCounts, Published, SinkWrite, MAX_LISTED,
};

/// The engine's overview indexed by tenant, built once per round for every resource.
pub struct EngineView<'a> {
    tenants: HashMap<&'a str, &'a TenantSummary>,
    sinks: HashMap<&'a str, Vec<(&'a str, &'a SinkTenantStatus)>>,
}

impl<'a> EngineView<'a> {
    /// Indexes `status`.
    pub fn new(status: &'a Overview) -> EngineView<'a> {
        let mut sinks: HashMap<&str, Vec<(&str, &SinkTenantStatus)>> = HashMap::new();
        for sink in &status.sinks {
            for row in &sink.tenants {
                sinks
                    .entry(row.tenant.as_str())
                    .or_default()
                    .push((sink.name.as_str(), row));
            }
        }
        EngineView {
            tenants: status
                .tenants
                .iter()
                .map(|t| (t.name.as_str(), t))
                .collect(),
            sinks,
        }
    }

    /// Whether the tenant is gone from the engine and every sink holds its latest (the
    /// withdrawal) state: what releases the finalizer.
    pub fn withdrawn(&self, tenant: &str) -> bool {
        !self.tenants.contains_key(tenant)
            && self
                .sinks
                .get(tenant)
                .is_none_or(|rows| rows.iter().all(|(_, r)| written(r)))
    }

    /// Whether any sink ever took a write for the tenant in this process.
    pub fn known(&self, tenant: &str) -> bool {
        self.tenants.contains_key(tenant) || self.sinks.contains_key(tenant)
    }

    /// The sinks' rows of the tenant.
    fn sink_writes(&self, tenant: &str) -> Vec<SinkWrite> {
        let mut writes: Vec<SinkWrite> = self
            .sinks
            .get(tenant)
            .map(|rows| {
                rows.iter()
                    .map(|(name, r)| SinkWrite {
                        name: (*name).to_owned(),
                        written: written(r),
                        written_at: r.written_at.map(|t| t.to_string()),
                        error: (!written(r))
                            .then(|| r.last_error.as_ref().map(|e| e.message.clone()))
                            .flatten(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        writes.sort_by(|a, b| a.name.cmp(&b.name));
        writes
    }
}

fn written(row: &SinkTenantStatus) -> bool {
    row.written_seq == Some(row.desired_seq) && !row.pending
}

/// When a condition is computed: from which generation, at what time.
#[derive(Clone, Copy)]
pub struct Observed {
    /// The object's `metadata.generation`.
    pub generation: Option<i64>,
    /// Unix seconds.
    pub now: f64,
}

/// Condition `type_` as it should read now; its `lastTransitionTime` stays as in
/// `previous` while its status does not change.
pub fn condition(
    previous: &[Condition],
    at: Observed,
    type_: &str,
    ok: bool,
    reason: &str,
    message: String,
) -> Condition {
    let status = if ok { "True" } else { "False" };
    let since = previous
        .iter()
        .find(|c| c.type_ == type_)
        .filter(|c| c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| rfc3339(at.now));
    Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message,
        last_transition_time: since,
        observed_generation: at.generation,
    }
}

/// What the resource's status should say now. `deleting`: the tenant whose records its
/// deletion waits to see withdrawn. Conditions keep their `lastTransitionTime` while their
/// status stays the same.
pub fn status_of(
    resource: &DNSFailover,
    verdict: Option<&Verdict>,
    deleting: Option<&str>,
    engine: &EngineView<'_>,
    now: f64,
) -> DNSFailoverStatus {
    let generation = resource.metadata.generation;
    let previous = resource
        .status
        .as_ref()
        .map_or(&[][..], |p| p.conditions.as_slice());
    let condition = |type_: &str, ok: bool, reason: &str, message: String| {
        let at = Observed { generation, now };
        condition(previous, at, type_, ok, reason, message)
    };
    let mut status = DNSFailoverStatus {
        observed_generation: generation,
        ..DNSFailoverStatus::default()
    };
    let tenant = match verdict {
        Some(Verdict::Accepted { tenant, .. }) | Some(Verdict::KeptLast { tenant, .. }) => {
            Some(tenant.as_str())
        }
        _ => None,
    };
    let accepted = match verdict {
        None => condition(
            "Accepted",
            false,
            "Deleting",
            "the resource is being deleted".into(),
        ),
        Some(Verdict::Accepted { .. }) | Some(Verdict::Waiting { .. }) => condition(
            "Accepted",
            true,
            "Accepted",
            "allowed, valid, and its names are its own".into(),
        ),
        Some(Verdict::Refused { reason, message }) => {
            condition("Accepted", false, reason, message.clone())
        }
        Some(Verdict::KeptLast {
            serving,
            reason,
            message,
            ..
        }) => condition(
            "Accepted",
            false,
            reason,
            match (generation, serving) {
                // The same generation, judged again: the base config, or (for Kuadrant's
                // records) a policy or probe that governs it, changed.
                (Some(g), Some(s)) if g == *s => format!(
                    "generation {g} is refused as things are now (the base config or what governs it changed); as last accepted it keeps publishing until a valid edit replaces it:\n{message}"
                ),
                _ => format!(
                    "generation {} refused; {} keeps publishing until a valid edit replaces it:\n{message}",
                    generation.map_or("?".into(), |g| g.to_string()),
                    serving.map_or("the last accepted generation".into(), |g| format!("generation {g}")),
                ),
            },
        ),
    };
    let (ready, reason, mut message) = readiness(verdict, deleting, tenant, engine);
    if let Some(Verdict::KeptLast { serving, .. }) = verdict {
        let serving = serving.map_or("the last accepted generation".into(), |g| {
            format!("generation {g}")
        });
        message = format!("{message} (serving {serving}; the current one is refused)");
    }
    status.conditions = vec![accepted, condition("Ready", ready, reason, message)];
    if let Some(tenant) = tenant {
        fill_published(&mut status, tenant, engine);
    }
    status
}

/// The `Ready` condition: published and written to every sink.
fn readiness(
    verdict: Option<&Verdict>,
    deleting: Option<&str>,
    tenant: Option<&str>,
    engine: &EngineView<'_>,
) -> (bool, &'static str, String) {
    if let Some(tenant) = deleting {
        let failing = engine.sink_writes(tenant).into_iter().find_map(|w| {
            w.error
                .map(|e| format!("; sink \"{}\" cannot be written: {e}", w.name))
        });
        return (
            false,
            "Withdrawing",
            format!(
                "withdrawing the records from the sinks before the resource goes{}",
                failing.unwrap_or_default()
            ),
        );
    }
    let tenant = match (verdict, tenant) {
        (Some(Verdict::Refused { reason, .. }), _) => {
            return (
                false,
                reason,
                "refused: see the Accepted condition; nothing is published".into(),
            )
        }
        (Some(Verdict::Waiting { message }), _) => {
            return (
                false,
                "NoEndpoints",
                format!("nothing to publish yet: {message}"),
            )
        }
        (_, Some(tenant)) => tenant,
        _ => return (false, "Deleting", String::new()),
    };
    let Some(state) = engine.tenants.get(tenant) else {
        return (false, "Pending", "the engine is starting the tenant".into());
    };
    if state.published.is_none() {
        return (false, "Pending", "waiting for the first verdicts".into());
    }
    written_everywhere(&engine.sink_writes(tenant))
}

/// `Published` once every sink holds the latest state; else which sink fails or lags.
fn written_everywhere(writes: &[SinkWrite]) -> (bool, &'static str, String) {
    if let Some(failed) = writes.iter().find(|w| w.error.is_some()) {
        return (
            false,
            "WriteFailed",
            format!(
                "sink \"{}\": {}",
                failed.name,
                failed.error.as_deref().unwrap_or_default()
            ),
        );
    }
    match writes.iter().find(|w| !w.written) {
        Some(w) => (
            false,
            "Pending",
            format!("sink \"{}\" has not taken the latest state yet", w.name),
        ),
        None if writes.is_empty() => (false, "Pending", "no sink has taken a write yet".into()),
        None => (
            true,
            "Published",
            "published and written to every sink".into(),
        ),
    }
}

fn fill_published(status: &mut DNSFailoverStatus, tenant: &str, engine: &EngineView<'_>) {
    let Some(state) = engine.tenants.get(tenant) else {
        return;
    };
    if let Some(p) = &state.published {
        status.published = Some(Published {
            mode: p.mode.as_str().to_owned(),
            addresses: p
                .addresses
                .iter()
                .take(MAX_LISTED)
                .map(|a| a.to_string())
                .collect(),
            count: p.addresses.len(),
        });
    }
    status.endpoints = Some(EndpointCounts {
        healthy: state.healthy,
        unhealthy: state.unhealthy,
        unknown: state.unknown,
    });
    status.sinks = engine.sink_writes(tenant);
}

/// Unix seconds as RFC 3339 UTC, to the second (as Kubernetes writes times).
pub fn rfc3339(unix: f64) -> String {
    k8s_openapi::chrono::DateTime::from_timestamp(unix as i64, 0)
        .unwrap_or_default()
        .to_rfc3339_opts(k8s_openapi::chrono::SecondsFormat::Secs, true)
}
