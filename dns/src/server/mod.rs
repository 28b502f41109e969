//! `kind = "dns_server"`: an authoritative DNS server in this process. A snapshot is
//! answered from the moment it arrives: no file, ConfigMap sync or reload in between,
//! which is what makes failover take the probe's detection time and nothing more.
//!
//! The server stands in layers, each using only its own and those below (ARCHITECTURE.md,
//! "DNS server layers"): names, zones and settings ([`names`], [`zones`], [`config`]); the
//! answer features (records, static records, ACME, geo, cookies, rate limiting, the packet
//! cache, DNSSEC, transfers, reports); one query in, one answer out ([`answer`]); the ways
//! queries arrive ([`transport`]: sockets and AF_XDP below one `respond`); and here, the
//! top: the sink, its kind ([`kind`]), its parts built ([`build`]) and their failures
//! ([`ServerError`]).

mod acme;
mod answer;
mod build;
mod config;
mod cookies;
pub mod dnssec;
mod error;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod geo;
mod kind;
mod metrics;
mod names;
mod packet_cache;
mod rate_limit;
mod recall;
mod records;
mod reports;
mod sharded;
mod statics;
mod transfer;
mod transport;
mod zones;

use std::sync::Arc;

use ho_config::Plan;
use ho_engine::sink::reports::ReportStore;
use ho_engine::sink::{Applied, Sink, SinkFuture};
use ho_engine::snapshot::TenantSnapshot;

pub use acme::merge_kept as merge_acme_challenges;
use answer::Authority;
pub use config::DnsServerConfig;
use config::ReportsConfig;
pub use error::ServerError;
use ho_engine::sink::kind::BuildContext;
pub use metrics::ServerMetrics;
use reports::DnsReports;
pub use transport::xdp;
use transport::Listener;

/// The sink: writes snapshots into the authority its listeners answer from.
pub struct DnsServerSink {
    /// The sink's name: the plan's tenants that name it are its.
    name: String,
    authority: Arc<Authority>,
    /// `reports`: this cluster's reports on its server, its peers' read from theirs.
    reports: Option<Arc<dyn ReportStore>>,
    /// Held so the sockets stay open while the sink exists.
    _listeners: Vec<Arc<Listener>>,
}

impl DnsServerSink {
    /// Starts answering on `config.listen` (or takes over the listeners a previous build
    /// of the same sink runs, with what they answer). The tenants of the plan that use
    /// this sink answer SERVFAIL until their first snapshot. With `[kubernetes] tenants`, a
    /// fresh server (not one taking over running listeners, which carries what they
    /// awaited) also answers SERVFAIL for the names of its zones it does not know until the
    /// tenant source's first round is applied, for the plan's `startup_grace` at most: a
    /// name declared there is not said not to exist, while one no resource declares (or an
    /// API server that never answers) does not fail for longer than that.
    pub fn start(
        config: &DnsServerConfig,
        ctx: &BuildContext<'_>,
    ) -> Result<DnsServerSink, ServerError> {
        let running = config
            .listen
            .iter()
            .find_map(|addr| Listener::running(ctx.name, *addr))
            .map(|l| l.authority());
        let mut records = running
            .as_ref()
            .map(|a| a.records.read().expect("not poisoned").clone())
            .unwrap_or_default();
        records.follow_plan(served(ctx.plan, ctx.name));
        if running.is_none() && ctx.plan.kubernetes.tenants {
            records.await_source(std::time::Instant::now() + ctx.plan.startup_grace);
        }
        let mut authority = build::authority(config, records)?;
        if let Some(acme) = authority.acme.take() {
            let keep_in =
                (ctx.plan.state_dir.as_ref()).map(|d| d.join(format!("acme-{}.json", ctx.name)));
            let acme = acme::Acme::new(acme.key, keep_in);
            if let Some(before) = running.as_ref().and_then(|r| r.acme.as_ref()) {
                acme.carry_over(before);
            }
            authority.acme = Some(acme);
        }
        if let Some(previous) = running {
            authority.shelf = previous.shelf.clone();
        }
        let reports = (config.reports.as_ref())
            .map(|r| reports_store(r, ctx, &authority))
            .transpose()?;
        let authority = Arc::new(authority);
        let server_metrics = ctx.metrics.set::<ServerMetrics>();
        let listeners = (config.listen.iter().enumerate())
            .map(|(i, addr)| {
                let xdp = (config.xdp.as_ref().filter(|_| i == 0)).map(|x| (x, &config.listen[..]));
                Listener::open(ctx.name, *addr, authority.clone(), &server_metrics, xdp)
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(ServerError::Listen)?;
        Ok(DnsServerSink {
            name: ctx.name.to_owned(),
            authority,
            reports,
            _listeners: listeners,
        })
    }
}

/// The tenants of `plan` that sink `name` serves, with their domains.
fn served<'a>(plan: &'a Plan, name: &'a str) -> impl Iterator<Item = (&'a str, &'a [String])> {
    (plan.tenants.iter())
        .filter(move |t| t.sinks.iter().any(|s| s == name))
        .map(|t| (t.name.as_str(), t.domains.as_slice()))
}

/// The clusters' report store this server holds (`reports`), on the authority's shelf;
/// kept in `state_dir` when there is one.
fn reports_store(
    r: &ReportsConfig,
    ctx: &BuildContext<'_>,
    authority: &Authority,
) -> Result<Arc<dyn ReportStore>, ServerError> {
    let key = crate::wire::key::load_signer(&r.tsig).map_err(ServerError::Reports)?;
    let mc = &ctx.plan.multi_cluster;
    let memory =
        (ctx.plan.state_dir.as_ref()).map(|d| d.join(format!("reports-{}.json", ctx.name)));
    let store = DnsReports::new(
        r,
        key,
        authority.shelf.clone(),
        (mc.report_interval, mc.report_ttl),
        memory,
    );
    Ok(Arc::new(store))
}

impl Sink for DnsServerSink {
    fn kind(&self) -> &'static str {
        "dns_server"
    }

    fn apply(&self, snapshot: Arc<TenantSnapshot>) -> SinkFuture {
        let changed = self.authority.publish(&snapshot);
        Box::pin(async move {
            Ok(if changed {
                Applied::Changed
            } else {
                Applied::Unchanged
            })
        })
    }

    fn reports(&self) -> Option<Arc<dyn ReportStore>> {
        self.reports.clone()
    }

    fn plan_applied(&self, plan: &Plan, source_arrived: bool) {
        (self.authority).follow_plan(served(plan, &self.name), source_arrived);
    }
}
