//! `cluster leave`: takes this cluster out of the shared names cleanly (Kuadrant's distributed-DNS RFC's
//! cleanup). For every voting tenant it removes this cluster's report from the shared
//! zone, counts the vote of the clusters that remain, and writes that set to the tenant's
//! shared-zone sinks, so this cluster's addresses leave DNS now rather than staying as
//! "last known". Stop this cluster's orchestrator first: a running one writes its report
//! again at its next round.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::SystemTime;

use anyhow::Context;
use ho_engine::metrics::Metrics;
use ho_engine::multi_cluster::leave::remaining_snapshot;
use ho_engine::multi_cluster::report::{report_name, report_suffix};
use ho_engine::multi_cluster::rounds::tally_without;
use ho_engine::sink::{Sink, SinkFactory};

/// Runs `cluster leave`; exit 2 on an invalid config, 1 when a zone could not be changed.
pub fn leave(files: &[PathBuf]) -> anyhow::Result<ExitCode> {
    let plan = match crate::config_files::plan(files).result {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("{e}");
            return Ok(ExitCode::from(2));
        }
    };
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?
        .block_on(async move {
            let cluster = ho_kube::cluster_id::resolve(&plan.cluster).await;
            let factory = ho_kinds::Sinks::default();
            let metrics = Arc::new(Metrics::new());
            let mut failed = false;
            let voting = plan.tenants.iter().filter(|t| t.multi_cluster);
            for tenant in voting {
                let mut shared: Vec<Arc<dyn Sink>> = Vec::new();
                for name in &tenant.sinks {
                    if plan.sinks[name].spec.holds_reports() {
                        shared.push(factory.build(name, &plan, &metrics).await?);
                    }
                }
                let Some(store) = shared.iter().find_map(|s| s.reports()) else {
                    continue;
                };
                let domain = &tenant.domains[0];
                let attempt = || async {
                    store.remove(report_name(&cluster.id, domain)).await?;
                    let rrsets = store.read(vec![report_suffix(domain)]).await?;
                    let tally = tally_without(&plan, &cluster.id, rrsets, SystemTime::now());
                    let Some(snapshot) = remaining_snapshot(tenant, &tally, SystemTime::now()) else {
                        return Ok::<_, ho_engine::sink::SinkError>(
                            "report removed; no other cluster reports, so its records stay as they are (the name is never emptied)".to_owned(),
                        );
                    };
                    let count = snapshot.addresses.len();
                    let snapshot = Arc::new(snapshot);
                    for sink in &shared {
                        sink.apply(snapshot.clone()).await?;
                    }
                    Ok(format!(
                        "report removed; {count} address(es) of {} remaining cluster(s) published",
                        tally.live.len() + tally.aged_out.len()
                    ))
                };
                // Every step is idempotent: a retriable error (a back end briefly busy)
                // repeats the whole exchange, a few times, with a growing pause.
                let mut result = attempt().await;
                for pause_ms in [200, 400, 800, 1600, 3200] {
                    match &result {
                        Err(e) if e.retriable => {
                            eprintln!("{}: {e}; trying again", tenant.name);
                            tokio::time::sleep(std::time::Duration::from_millis(pause_ms)).await;
                            result = attempt().await;
                        }
                        _ => break,
                    }
                }
                match result {
                    Ok(what) => outln!("{}: {what}", tenant.name),
                    Err(e) => {
                        failed = true;
                        eprintln!("{}: {e}", tenant.name);
                    }
                }
            }
            outln!("cluster {} left", cluster.id);
            Ok(if failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        })
}
