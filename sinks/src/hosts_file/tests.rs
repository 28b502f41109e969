//! The hosts_file sink against real files in a temporary directory.

use std::collections::BTreeMap;
use std::sync::Arc;

use ho_engine::sink::{Applied, Sink};
use ho_engine::snapshot::{PublishedAddress, TenantSnapshot};

use super::HostsFileSink;
use ho_engine::sink::hosts_format::render;

fn snapshot(seq: u64, addresses: &[&str]) -> Arc<TenantSnapshot> {
    let addresses = addresses
        .iter()
        .map(|a| PublishedAddress::of(&format!("ep-{a}"), a.parse().unwrap(), 1, BTreeMap::new()))
        .collect();
    let domains = ["api.tenant-a.io", "app.tenant-a.io"];
    Arc::new(TenantSnapshot {
        seq,
        ..TenantSnapshot::healthy(
            "tenant-a",
            &domains,
            ho_config::RoutingPolicy::All,
            addresses,
        )
    })
}

#[test]
fn renders_sorted_lines_ipv4_first() {
    let text = render(&snapshot(
        1,
        &["2001:db8::1", "10.0.0.2", "10.0.0.10", "10.0.0.2"],
    ));
    assert_eq!(
        text,
        "10.0.0.2 api.tenant-a.io app.tenant-a.io\n\
         10.0.0.10 api.tenant-a.io app.tenant-a.io\n\
         2001:db8::1 api.tenant-a.io app.tenant-a.io\n"
    );
    assert_eq!(render(&snapshot(1, &[])), "");
}

#[actix_rt::test]
async fn writes_atomically_and_only_when_changed() {
    let dir = tempfile::tempdir().unwrap();
    let sink = HostsFileSink::new(dir.path().join("nested/hosts"));
    let path = sink.path_of("tenant-a.hosts");
    assert_eq!(
        sink.apply(snapshot(1, &["10.0.0.1", "10.0.0.2"])).await,
        Ok(Applied::Changed)
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "10.0.0.1 api.tenant-a.io app.tenant-a.io\n10.0.0.2 api.tenant-a.io app.tenant-a.io\n"
    );
    let inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&path).unwrap());
    assert_eq!(
        sink.apply(snapshot(2, &["10.0.0.2", "10.0.0.1"])).await,
        Ok(Applied::Unchanged)
    );
    let same = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&path).unwrap());
    assert_eq!(inode, same, "unchanged content is not rewritten");
    assert_eq!(
        sink.apply(snapshot(3, &["10.0.0.2"])).await,
        Ok(Applied::Changed)
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "10.0.0.2 api.tenant-a.io app.tenant-a.io\n"
    );
    let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        leftovers,
        ["tenant-a.hosts"],
        "no temporary file left behind"
    );
}

#[actix_rt::test]
async fn an_unwritable_directory_is_a_retriable_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("not-a-dir");
    std::fs::write(&blocker, "x").unwrap();
    let sink = HostsFileSink::new(blocker.clone());
    let err = sink.apply(snapshot(1, &["10.0.0.1"])).await.unwrap_err();
    assert!(err.retriable);
    assert!(
        err.message.contains(&blocker.display().to_string()),
        "{}",
        err.message
    );
}

/// The file is named by the tenant's `hosts_key` (the OpenOva spec's per-tenant key).
#[actix_rt::test]
async fn the_file_is_named_by_the_hosts_key() {
    let dir = tempfile::tempdir().unwrap();
    let sink = HostsFileSink::new(dir.path().to_path_buf());
    let named = Arc::new(TenantSnapshot {
        hosts_key: "custom-a.hosts".into(),
        ..(*snapshot(1, &["10.0.0.1"])).clone()
    });
    assert_eq!(sink.apply(named).await, Ok(Applied::Changed));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("custom-a.hosts")).unwrap(),
        "10.0.0.1 api.tenant-a.io app.tenant-a.io\n"
    );
    assert!(!dir.path().join("tenant-a.hosts").exists());
}
