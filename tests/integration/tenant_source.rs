//! Tenants from a source beside the config files (ho-kube's controller in production) are
//! followed by the engine itself: each change is merged, validated and applied as a reload,
//! a merge that does not validate leaves the running plan serving, a reload of the files
//! merges onto the new config, and the source is asked to report each second without a
//! change. The source here is a test's own [`TenantSource`] (the trait is ours; what ho-kube
//! does inside it is tested against the Kubernetes API test server in `kube_tenants.rs`).

use std::sync::{Arc, Mutex};

use ho_config::model::TenantConfig;
use ho_config::Config;
use ho_engine::metrics::ResultLabel;
use ho_engine::{Engine, EngineReader, Merge, ReloadError, SourceFuture, TenantSource};
use tokio::sync::Notify;

use crate::harness::*;

/// What the test sets and reads of its source.
#[derive(Clone, Default)]
struct Shared {
    /// The tenant the source contributes (TOML), if any.
    tenant: Arc<Mutex<Option<String>>>,
    /// How many reports the engine asked for.
    reports: Arc<Mutex<usize>>,
    changes: Arc<Notify>,
}

struct Source {
    base: Config,
    shared: Shared,
}

impl TenantSource for Source {
    fn changes(&self) -> Arc<Notify> {
        self.shared.changes.clone()
    }

    fn rebase(&mut self, base: Config) {
        self.base = base;
    }

    fn merge<'a>(&'a mut self, _: &'a EngineReader) -> SourceFuture<'a, Merge> {
        let mut config = self.base.clone();
        if let Some(text) = self.shared.tenant.lock().unwrap().as_deref() {
            config
                .tenants
                .push(toml::from_str::<TenantConfig>(text).unwrap());
        }
        let merged = match ho_config::validate::validate(&config, &ho_kinds::CATALOG) {
            Ok(plan) => Merge::Plan(Box::new(plan)),
            Err(e) => Merge::Invalid(e),
        };
        Box::pin(async move { merged })
    }

    fn report<'a>(&'a mut self, engine: &'a EngineReader) -> SourceFuture<'a, ()> {
        let reports = self.shared.reports.clone();
        Box::pin(async move {
            assert!(engine.overview().await.is_some(), "the engine answers");
            *reports.lock().unwrap() += 1;
        })
    }
}

fn tenant(name: &str, sink: &str) -> String {
    format!("name = \"{name}\"\ndomains = [\"{name}.example\"]\nsinks = [\"{sink}\"]\n")
}

fn reloads(engine: &Engine, result: &'static str) -> u64 {
    engine
        .metrics()
        .config_reloads
        .get_or_create(&ResultLabel { result })
        .get()
}

fn tenants(engine: &Engine) -> Vec<String> {
    let mut names: Vec<String> = engine
        .plan()
        .tenants
        .iter()
        .map(|t| t.name.clone())
        .collect();
    names.sort();
    names
}

/// A source's tenant `b` is published by the engine with no call from outside; an invalid
/// edit of it is counted and `b` keeps serving; a valid one replaces it; a reload of the
/// files (adding `d`) keeps the source's tenant merged on top.
#[actix_rt::test]
async fn the_engine_follows_a_tenant_source_and_keeps_the_last_valid_merge() {
    let dir = tempfile::tempdir().unwrap();
    let gws = gateways(2);
    let files = |extra: &str| {
        TestConfig::at(&Check::FAST, gws.iter().map(|g| g.addr()), |i| {
            format!("gw-{i}")
        })
        .with(&format!("[[tenants]]\n{}", tenant("a", "local")))
        .with(extra)
        .with(&hosts_sink(dir.path()))
        .render()
    };
    let v1 = files("");
    let mut engine = start_engine(dir.path(), &v1).await;
    let file = dir.path().join("config.toml");
    let shared = Shared::default();
    *shared.tenant.lock().unwrap() = Some(tenant("b", "local"));
    let source = Source {
        base: ho_config::load(&[&file]).unwrap(),
        shared: shared.clone(),
    };
    engine.follow_tenants(Box::new(source)).await;
    assert_eq!(
        tenants(&engine),
        ["a", "b"],
        "the first merge is applied at once"
    );
    assert_eq!(reloads(&engine, "ok"), 1);
    let all = {
        let mut v: Vec<String> = gws.iter().map(ip).collect();
        v.sort();
        v
    };
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    wait_for_file(&dir.path().join("b.hosts"), "b published", |c| {
        sorted(addresses(c)) == all
    })
    .await;

    *shared.tenant.lock().unwrap() = Some(tenant("b", "no-such-sink"));
    shared.changes.notify_one();
    eventually("the invalid merge counted", || {
        reloads(&engine, "invalid") == 1
    })
    .await;
    assert_eq!(tenants(&engine), ["a", "b"], "b keeps serving");

    *shared.tenant.lock().unwrap() = Some(tenant("c", "local"));
    shared.changes.notify_one();
    eventually("c replaces b", || tenants(&engine) == ["a", "c"]).await;
    assert_eq!(reloads(&engine, "ok"), 2);
    wait_for_file(&dir.path().join("c.hosts"), "c published", |c| {
        sorted(addresses(c)) == all
    })
    .await;

    let v2 = files(&format!("[[tenants]]\n{}", tenant("d", "local")));
    std::fs::write(&file, &v2).unwrap();
    let plan = ho_kinds::load_plan(&[&file]).unwrap();
    let config = ho_config::load(&[&file]).unwrap();
    engine.reload_config(plan, config).await.unwrap();
    assert_eq!(
        tenants(&engine),
        ["a", "c", "d"],
        "the files' d, the source's c"
    );

    *shared.tenant.lock().unwrap() = Some(tenant("c", "no-such-sink"));
    let plan = ho_kinds::load_plan(&[&file]).unwrap();
    let config = ho_config::load(&[&file]).unwrap();
    let refused = engine.reload_config(plan, config).await.unwrap_err();
    assert!(
        matches!(&refused, ReloadError::Merge(e) if e.to_string().contains("no-such-sink")),
        "{refused}"
    );
    assert_eq!(tenants(&engine), ["a", "c", "d"], "the running plan stays");

    let before = *shared.reports.lock().unwrap();
    eventually("reports go on without a change", || {
        *shared.reports.lock().unwrap() >= before + 2
    })
    .await;
}
