//! The `icmp` kind through unprivileged ping sockets, to loopback addresses: refused with
//! the way to allow it when `net.ipv4.ping_group_range` leaves this process's group out,
//! healthy once it is allowed (IPv4 and IPv6), through the `probe` command and an engine.
//! The test sets the sysctl (it runs as root, as CI does) and puts the old value back; the
//! one test does it all, so no other test sees the range change under it.

use std::time::Duration;

use ho_config::CheckOverrides;

use crate::harness::{
    addresses, binary, hosts_sink, loopback_ip, probe_within, start_engine, wait_for_file, Check,
    TestConfig,
};

const RANGE: &str = "/proc/sys/net/ipv4/ping_group_range";

/// Puts the range back as it was, however the test ends.
struct RestoreRange(String);

impl Drop for RestoreRange {
    fn drop(&mut self) {
        let _ = std::fs::write(RANGE, &self.0);
    }
}

fn set_range(range: &str) {
    std::fs::write(RANGE, range)
        .unwrap_or_else(|e| panic!("setting {RANGE} needs root (as in CI): {e}"));
}

#[actix_rt::test]
async fn icmp_checks_need_ping_sockets_and_then_follow_the_host() {
    let _restore = RestoreRange(std::fs::read_to_string(RANGE).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let ip = loopback_ip();
    let config = TestConfig::defaults(&Check::FAST)
        .with(&format!(
            "[[endpoints]]\nname = \"host\"\naddress = \"{ip}\"\ncheck = {{ kind = \"icmp\" }}\n\n\
             [[tenants]]\nname = \"pinged\"\ndomains = [\"p.example\"]\nsinks = [\"local\"]\n\n{}",
            hosts_sink(dir.path())
        ))
        .render();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, &config).unwrap();

    set_range("1 0");
    let out = binary()
        .args(["check-config", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("icmp checks need unprivileged ping sockets")
            && text.contains("net.ipv4.ping_group_range (1 0)")
            && text.contains("sysctl -w net.ipv4.ping_group_range"),
        "{text}"
    );

    set_range("0 2147483647");
    for address in [std::net::IpAddr::V4(ip), "::1".parse().unwrap()] {
        let r = probe_within(
            std::net::SocketAddr::new(address, 0),
            Duration::from_millis(500),
            CheckOverrides::of_kind("icmp"),
        )
        .await;
        assert_eq!(r.outcome, Ok(()), "{address}: {}", r.reason());
    }
    let out = binary()
        .args(["probe", &format!("icmp://{ip}")])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(shown.starts_with(&format!("healthy {ip} ok ")), "{shown}");

    let _engine = start_engine(dir.path(), &config).await;
    wait_for_file(&dir.path().join("pinged.hosts"), "the pinged host", |c| {
        addresses(c) == [ip.to_string()]
    })
    .await;
}

#[tokio::test]
async fn an_icmp_check_takes_no_port() {
    let errors = ho_config::resolve_standalone_check(
        &CheckOverrides {
            port: Some(80),
            interval: Some(Duration::from_secs(1)),
            ..CheckOverrides::of_kind("icmp")
        },
        &ho_kinds::CHECK_KINDS,
    )
    .unwrap_err()
    .to_string();
    assert!(
        errors.contains("check.port: not used by kind \"icmp\""),
        "{errors}"
    );
}
