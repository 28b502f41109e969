//! Zone transfers from the embedded server to real secondaries: BIND 9, Knot DNS and NSD take
//! the zone (AXFR), are told of a failover by NOTIFY and fetch it (IXFR), all signed with
//! TSIG; `dig` checks the TSIG of a multi-message AXFR and is refused without the key.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use ho_testkit::Behaviour;
use tokio::time::Instant;

use crate::harness::*;
use crate::services::dig::dig;
use crate::services::dns_secondary::{make_key, Flavor, Secondary, KEY};

/// An engine whose `dns_server` serves `example.org` with `domains` (each answering
/// every gateway) and lets loopback secondaries signing with `key_file` transfer it,
/// notifying `notify`; `statics`: its `static_records` (zone-file text), if any. ACME
/// challenges are taken signed with the same key.
async fn primary(
    dir: &Path,
    gateways: &[ho_testkit::Gateway],
    domains: &[String],
    key_file: &Path,
    notify: &[SocketAddr],
    statics: &str,
) -> (ho_engine::Engine, SocketAddr) {
    let server = SocketAddr::new(loopback_ip().into(), 5353);
    let quoted: Vec<String> = domains.iter().map(|d| format!("\"{d}\"")).collect();
    let notify: Vec<String> = notify.iter().map(|a| format!("\"{a}\"")).collect();
    let tail = format!(
        "[[tenants]]\nname = \"a\"\ndomains = [{}]\nsinks = [\"dns\"]\n\n\
         [sinks.dns]\nkind = \"dns_server\"\nlisten = [\"{server}\"]\nzones = [\"example.org\"]\n\
         transfer = {{ notify = [{}], allow = [\"127.0.0.0/8\"], tsig = {{ name = \"{KEY}\", secret_file = \"{}\" }} }}\n\
         static_records = {statics:?}\n\
         acme = {{ tsig = {{ name = \"{KEY}\", secret_file = \"{}\" }} }}\n",
        quoted.join(", "),
        notify.join(", "),
        key_file.display(),
        key_file.display()
    );
    let engine = start_engine(
        dir,
        &config(&Check::FAST, &gateways.iter().collect::<Vec<_>>(), &tail),
    )
    .await;
    (engine, server)
}

/// Polls `server` for `api.example.org A` until its sorted answer is `want`; how long it
/// took.
async fn wait_for(server: SocketAddr, want: &[String], what: &dyn Fn() -> String) -> Duration {
    let start = Instant::now();
    let mut want = want.to_vec();
    want.sort();
    loop {
        // Empty while a secondary starts (no answer yet).
        let got = dig(server, &["+nocookie", "api.example.org", "A"]).await;
        if got
            .first()
            .is_some_and(|a| a.status == "NOERROR" && a.sorted() == want)
        {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < LIMIT,
            "{server}: wanted {want:?}, got {got:?}\n{}",
            what()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A secondary of each flavor takes the zone when it starts, then a failure and a
/// recovery by NOTIFY and IXFR, within moments of the primary's own answer.
async fn a_secondary_follows_failover(flavor: Flavor) {
    let dir = tempfile::tempdir().unwrap();
    let key = make_key(dir.path());
    let mut gws = gateways(2);
    let notify_port = free_port_pair();
    let notify_to = SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), notify_port);
    let (_engine, server) = primary(
        dir.path(),
        &gws,
        &["api.example.org".into()],
        &key,
        &[notify_to],
        "",
    )
    .await;
    let both: Vec<String> = gws.iter().map(ip).collect();
    wait_for(server, &both, &String::new).await;
    let secondary = Secondary::start_on(flavor, notify_port, server, &key);
    let log = || secondary.log();
    wait_for(secondary.addr, &both, &log).await;

    gws[0].set(Behaviour::Refuse).unwrap();
    let one = vec![ip(&gws[1])];
    let primary_took = wait_for(server, &one, &String::new).await;
    let secondary_took = wait_for(secondary.addr, &one, &log).await;
    assert!(
        secondary_took < Duration::from_secs(2),
        "NOTIFY, not the SOA refresh, brought the change ({primary_took:?} at the primary, {secondary_took:?} more at the secondary)\n{}",
        log()
    );
    gws[0].set(Behaviour::Healthy).unwrap();
    wait_for(secondary.addr, &both, &log).await;
    // A secondary may answer from the new zone a moment before it logs the update.
    let incremental = |text: &str| {
        let transfers =
            text.matches("transferred serial").count() + text.matches("IXFR, incoming").count();
        match flavor {
            // BIND asks IXFR once it holds the zone and logs an answer that is not one.
            Flavor::Bind => transfers >= 3 && !text.contains("nonincremental"),
            Flavor::Knot => text.contains("IXFR, incoming") && text.contains("finished"),
            // NSD does not log the transfer type; it took every change (after the first
            // copy, each update is bigger than the whole zone: the IXFR's two SOAs per change).
            Flavor::Nsd => text.matches("is updated to").count() >= 3,
        }
    };
    let start = tokio::time::Instant::now();
    let mut text = log();
    while !incremental(&text) && start.elapsed() < LIMIT {
        tokio::time::sleep(Duration::from_millis(20)).await;
        text = log();
    }
    let incremental = incremental(&text);
    assert!(incremental, "the changes came by IXFR:\n{text}");
}

#[actix_rt::test]
async fn bind_as_secondary_follows_failover_by_notify_and_ixfr() {
    a_secondary_follows_failover(Flavor::Bind).await;
}

#[actix_rt::test]
async fn knot_as_secondary_follows_failover_by_notify_and_ixfr() {
    a_secondary_follows_failover(Flavor::Knot).await;
}

#[actix_rt::test]
async fn nsd_as_secondary_follows_failover_by_notify_and_ixfr() {
    a_secondary_follows_failover(Flavor::Nsd).await;
}

/// `dig AXFR` with the key gets the whole zone over several messages, each TSIG checked
/// by dig (600 address records: two messages); without the key it is refused.
#[actix_rt::test]
async fn an_axfr_signs_every_message_and_needs_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let key = make_key(dir.path());
    let gws = gateways(2);
    let mut domains: Vec<String> = (0..300).map(|i| format!("n{i}.example.org")).collect();
    domains.push("api.example.org".into());
    let (_engine, server) = primary(dir.path(), &gws, &domains, &key, &[], "").await;
    let both: Vec<String> = gws.iter().map(ip).collect();
    wait_for(server, &both, &String::new).await;
    let axfr = |with_key: bool| {
        let mut cmd = Command::new("dig");
        cmd.arg(format!("@{}", server.ip())).args([
            "-p",
            &server.port().to_string(),
            "example.org",
            "AXFR",
        ]);
        if with_key {
            cmd.arg("-k").arg(&key);
        }
        String::from_utf8_lossy(&cmd.output().unwrap().stdout).into_owned()
    };
    let signed = axfr(true);
    let addresses = signed
        .lines()
        .filter(|l| !l.starts_with(';') && l.split_whitespace().nth(3) == Some("A"))
        .count();
    assert_eq!(addresses, 602, "every name's addresses:\n{signed}");
    assert_eq!(
        signed
            .lines()
            .filter(|l| l.split_whitespace().nth(3) == Some("SOA"))
            .count(),
        2,
        "SOA first and last"
    );
    assert!(
        signed.contains("XFR size: 605 records (messages 2"),
        "two messages:\n{}",
        signed.lines().rev().take(5).collect::<Vec<_>>().join("\n")
    );
    assert!(
        !signed.contains("failed"),
        "dig verified every TSIG:\n{signed}"
    );
    let unsigned = axfr(false);
    assert!(unsigned.contains("Transfer failed"), "{unsigned}");
}

/// `dig IXFR=SERIAL`: up to date, only the SOA; from an older serial, the condensed
/// difference (old SOA, what left, new SOA, what came, new SOA); from a serial the
/// journal never held, the whole zone.
#[actix_rt::test]
async fn ixfr_answers_what_changed_since_the_serial_asked() {
    let dir = tempfile::tempdir().unwrap();
    let key = make_key(dir.path());
    let mut gws = gateways(2);
    let (_engine, server) =
        primary(dir.path(), &gws, &["api.example.org".into()], &key, &[], "").await;
    let both: Vec<String> = gws.iter().map(ip).collect();
    wait_for(server, &both, &String::new).await;
    let serial = || -> u32 {
        let out = Command::new("dig")
            .arg(format!("@{}", server.ip()))
            .args([
                "-p",
                &server.port().to_string(),
                "+short",
                "example.org",
                "SOA",
            ])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.split_whitespace().nth(2).unwrap().parse().unwrap()
    };
    let ixfr = |from: u32| -> Vec<(String, String)> {
        let out = Command::new("dig")
            .arg(format!("@{}", server.ip()))
            .args(["-p", &server.port().to_string(), "-k"])
            .arg(&key)
            .args(["example.org", &format!("IXFR={from}")])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
            .filter(|l| l.split_whitespace().nth(3) != Some("TSIG"))
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let data = if f[3] == "SOA" { f[6] } else { f[4] };
                (f[3].to_owned(), data.to_owned())
            })
            .collect()
    };
    let before = serial();
    assert_eq!(
        ixfr(before),
        vec![("SOA".into(), before.to_string())],
        "up to date"
    );
    gws[0].set(Behaviour::Refuse).unwrap();
    wait_for(server, &[ip(&gws[1])], &String::new).await;
    let after = serial();
    let (now, then) = (after.to_string(), before.to_string());
    assert_eq!(
        ixfr(before),
        vec![
            ("SOA".into(), now.clone()),
            ("SOA".into(), then),
            ("A".into(), ip(&gws[0])),
            ("SOA".into(), now.clone()),
            ("SOA".into(), now.clone()),
        ],
        "the condensed difference"
    );
    let whole = ixfr(before - 1000);
    assert_eq!(whole.first(), Some(&("SOA".into(), now.clone())));
    assert!(
        whole.contains(&("NS".into(), "ns1.example.org.".into())),
        "{whole:?}"
    );
    assert!(whole.contains(&("A".into(), ip(&gws[1]))), "{whole:?}");
    assert_eq!(whole.last(), Some(&("SOA".into(), now)));
}

/// A BIND secondary takes the wildcard names and the static records with the zone: it
/// answers a name under `*.apps.example.org` (its own wildcard synthesis, from what it
/// transferred), the apex's MX and TXT, as the primary does; an ACME challenge set by
/// `nsupdate` reaches it by NOTIFY and IXFR, and so does its removal.
#[actix_rt::test]
async fn a_bind_secondary_transfers_wildcards_and_static_records() {
    let dir = tempfile::tempdir().unwrap();
    let key = make_key(dir.path());
    let gws = gateways(1);
    let notify_port = free_port_pair();
    let notify_to = SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), notify_port);
    let statics = "@ 3600 IN MX 10 mail.example.org.\n@ 3600 IN TXT \"site-verification=abc\"\n";
    let (_engine, server) = primary(
        dir.path(),
        &gws,
        &["api.example.org".into(), "*.apps.example.org".into()],
        &key,
        &[notify_to],
        statics,
    )
    .await;
    wait_for(server, &[ip(&gws[0])], &String::new).await;
    let secondary = Secondary::start_on(Flavor::Bind, notify_port, server, &key);
    let log = || secondary.log();
    wait_for(secondary.addr, &[ip(&gws[0])], &log).await;
    for (name, qtype, want) in [
        ("foo.apps.example.org", "A", ip(&gws[0])),
        // `dig` is read for the last field of each record.
        ("example.org", "MX", "mail.example.org.".to_owned()),
        ("example.org", "TXT", "\"site-verification=abc\"".to_owned()),
    ] {
        for at in [server, secondary.addr] {
            let answer = dig(at, &["+nocookie", name, qtype]).await;
            let got = answer.first().map(|a| a.sorted()).unwrap_or_default();
            assert_eq!(
                got,
                std::slice::from_ref(&want),
                "{at} {name} {qtype}\n{}",
                log()
            );
        }
    }

    let challenge = "_acme-challenge.apps.example.org";
    let token = "\"token-for-the-wildcard-certificate\"".to_owned();
    for (command, want) in [
        (
            format!("update add {challenge} 60 TXT {token}"),
            vec![token.clone()],
        ),
        (format!("update delete {challenge} TXT"), vec![]),
    ] {
        let (ok, said) = crate::dns_server_acme::nsupdate(server, Some(&key), &command);
        assert!(ok, "{command}: {said}");
        let start = Instant::now();
        loop {
            let answer = dig(secondary.addr, &["+nocookie", challenge, "TXT"]).await;
            if answer.first().is_some_and(|a| a.sorted() == want) {
                println!(
                    "{command}: on the secondary after {} ms",
                    start.elapsed().as_millis()
                );
                break;
            }
            assert!(start.elapsed() < LIMIT, "{command}: {answer:?}\n{}", log());
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}
