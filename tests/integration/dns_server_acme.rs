//! ACME DNS-01 challenges on the embedded server, set the way cert-manager's `rfc2136`
//! solver sets them, here with BIND's `nsupdate` and Knot's `knsupdate`: a TXT at `_acme-challenge.NAME` signed
//! with the `acme` key is answered (for a served name, and for the parent of a served
//! wildcard, as a wildcard certificate's challenge is) and removed again; an unsigned
//! update, one signed with another key, one for a name the server does not serve, another
//! type or another zone is refused and changes nothing; a restart keeps what was set.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::harness::*;
use crate::services::dig::{dig1, wait_for_answer};
use crate::services::dns_secondary::make_key;

/// `nsupdate` sending `commands` for zone `example.org` to `server`, signed with
/// `key_file` (none: unsigned); its exit status and what it printed.
pub(crate) fn nsupdate(
    server: SocketAddr,
    key_file: Option<&Path>,
    commands: &str,
) -> (bool, String) {
    let script = format!(
        "server {} {}\ncheck-names no\nzone example.org\n{commands}\nsend\n",
        server.ip(),
        server.port()
    );
    let mut cmd = Command::new("/usr/bin/nsupdate");
    if let Some(key) = key_file {
        cmd.arg("-k").arg(key);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("nsupdate is missing: run the test command (bash .ci/test), which installs bind9-dnsutils");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// The TXT strings `server` answers for `name`, and the response code.
async fn txt(server: SocketAddr, name: &str) -> (String, Vec<String>) {
    let answer = dig1(server, &[name, "TXT"]).await;
    let texts = answer
        .answers
        .iter()
        .map(|t| t.trim_matches('"').to_owned())
        .collect();
    (answer.status, texts)
}

#[actix_rt::test]
async fn acme_challenges_are_set_and_cleared_by_signed_updates_only() {
    let dir = tempfile::tempdir().unwrap();
    let key = make_key(dir.path());
    let other_dir = dir.path().join("other");
    std::fs::create_dir(&other_dir).unwrap();
    let other_key = make_key(&other_dir);
    let gws = gateways(1);
    let server = SocketAddr::new(loopback_ip().into(), 5353);
    let text = config(
        &Check::FAST,
        &gws.iter().collect::<Vec<_>>(),
        &format!(
            "state_dir = {:?}\n\n[[tenants]]\nname = \"a\"\ndomains = [\"api.example.org\", \"*.apps.example.org\"]\nsinks = [\"dns\"]\n\n\
             [sinks.dns]\nkind = \"dns_server\"\nlisten = [\"{server}\"]\nzones = [\"example.org\"]\n\
             acme = {{ tsig = {{ name = \"ho-xfr\", secret_file = {:?} }} }}\n",
            dir.path().join("state").display().to_string(),
            key.display().to_string()
        ),
    );
    let engine = start_engine(dir.path(), &text).await;
    wait_for_answer(server, "api.example.org", &[ip(&gws[0])]).await;
    let challenge = "_acme-challenge.api.example.org";
    assert_eq!(txt(server, challenge).await, ("NXDOMAIN".into(), vec![]));

    // Refused, and nothing changes: unsigned, another key, an unserved name, another type.
    for (key_file, command) in [
        (None, format!("update add {challenge} 60 TXT \"x\"")),
        (
            Some(other_key.as_path()),
            format!("update add {challenge} 60 TXT \"x\""),
        ),
        (
            Some(key.as_path()),
            "update add _acme-challenge.www.example.org 60 TXT \"x\"".to_owned(),
        ),
        (
            Some(key.as_path()),
            format!("update add {challenge} 60 A 192.0.2.1"),
        ),
        (
            Some(key.as_path()),
            "update add api.example.org 60 TXT \"x\"".to_owned(),
        ),
    ] {
        let (ok, said) = nsupdate(server, key_file, &command);
        assert!(!ok, "{command}: {said}");
        assert!(
            said.contains("REFUSED") || said.contains("NOTAUTH") || said.contains("NOTIMP"),
            "{command}: {said}"
        );
    }
    assert_eq!(txt(server, challenge).await, ("NXDOMAIN".into(), vec![]));

    // Set, for the name and for the wildcard's parent; answered at once.
    let (ok, said) = nsupdate(
        server,
        Some(&key),
        &format!("update add {challenge} 60 TXT \"token-1\"\nupdate add _acme-challenge.apps.example.org 60 TXT \"token-2\""),
    );
    assert!(ok, "{said}");
    assert_eq!(
        txt(server, challenge).await,
        ("NOERROR".into(), vec!["token-1".to_owned()])
    );
    assert_eq!(
        txt(server, "_acme-challenge.apps.example.org").await,
        ("NOERROR".into(), vec!["token-2".to_owned()])
    );
    // The tenant's own answer is untouched.
    assert_eq!(
        dig1(server, &["api.example.org", "A"]).await.sorted(),
        [ip(&gws[0])]
    );

    // A restart keeps what was set (state_dir).
    drop(engine);
    let engine = start_engine(dir.path(), &text).await;
    assert_eq!(
        txt(server, challenge).await,
        ("NOERROR".into(), vec!["token-1".to_owned()])
    );

    // Knot's knsupdate sets and clears one too (its key given as algorithm:name:secret).
    let conf = std::fs::read_to_string(&key).unwrap();
    let secret = conf.split('"').nth(3).unwrap().to_owned();
    let knot = |commands: &str| {
        let script = format!(
            "server {} {}\nzone example.org\n{commands}\nsend\n",
            server.ip(),
            server.port()
        );
        let mut child = Command::new("/usr/bin/knsupdate")
            .args(["-y", &format!("hmac-sha256:ho-xfr:{secret}")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("knsupdate is missing: run the test command (bash .ci/test), which installs knot-dnsutils");
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success() && !said.contains("REFUSED"),
            "{commands}: {said}"
        );
    };
    knot("update add _acme-challenge.apps.example.org. 60 TXT \"token-3\"");
    let (_, texts) = txt(server, "_acme-challenge.apps.example.org").await;
    assert_eq!(texts.len(), 2, "{texts:?}");
    knot("update delete _acme-challenge.apps.example.org. TXT \"token-3\"");
    assert_eq!(
        txt(server, "_acme-challenge.apps.example.org").await,
        ("NOERROR".into(), vec!["token-2".to_owned()])
    );

    // Cleared, as the solver does once the certificate is issued.
    let (ok, said) = nsupdate(
        server,
        Some(&key),
        &format!("update delete {challenge} TXT \"token-1\""),
    );
    assert!(ok, "{said}");
    assert_eq!(txt(server, challenge).await, ("NXDOMAIN".into(), vec![]));
    drop(engine);
}

/// Two replicas sharing `state_dir` (as two processes on one host, or two pods mounting one
/// volume, would): a challenge set through either is answered by the other, 20 times,
/// alternating, each timed from the update's answer to the other replica's answer; two
/// updates sent to both at once both land (the file is changed under a lock).
#[actix_rt::test]
async fn replicas_sharing_state_dir_answer_each_others_challenges() {
    let dir = tempfile::tempdir().unwrap();
    let key = make_key(dir.path());
    let gws = gateways(1);
    let state = dir.path().join("state");
    let replica = |n: usize| {
        let server = SocketAddr::new(loopback_ip().into(), 5353);
        let text = config(
            &Check::FAST,
            &gws.iter().collect::<Vec<_>>(),
            &format!(
                "state_dir = {:?}\n\n[[tenants]]\nname = \"a\"\ndomains = [\"api.example.org\"]\nsinks = [\"dns\"]\n\n\
                 [sinks.dns]\nkind = \"dns_server\"\nlisten = [\"{server}\"]\nzones = [\"example.org\"]\n\
                 acme = {{ tsig = {{ name = \"ho-xfr\", secret_file = {:?} }} }}\n",
                state.display().to_string(),
                key.display().to_string()
            ),
        );
        let own = dir.path().join(format!("replica-{n}"));
        std::fs::create_dir(&own).unwrap();
        (server, own, text)
    };
    let (a, a_dir, a_text) = replica(0);
    let (b, b_dir, b_text) = replica(1);
    let _a = start_engine(&a_dir, &a_text).await;
    let _b = start_engine(&b_dir, &b_text).await;
    let times = set_through_one_answered_by_the_other(a, b, &key).await;
    println!(
        "ACME challenge set on one replica -> answered by the other: p50 {:?}, p99 {:?} (20 trials, each one dig)",
        times[times.len() / 2],
        times[times.len() - 1]
    );
    assert!(times[times.len() - 1] < std::time::Duration::from_secs(1));
    // The file is read at the query: the first look answers both.
    updates_through_both_at_once_land(a, b, &key, std::time::Duration::ZERO).await;
}

/// Two replicas with a `state_dir` each, sharing the ACME challenges through the
/// operator-state ConfigMap (`[kubernetes] operator_state`, on the Kubernetes API test
/// server: no real API server can run here), as two pods behind one Service: a challenge
/// set through either is answered by the other, 20 times, alternating; updates sent through
/// both at once both land (merged on the ConfigMap's resourceVersion).
#[actix_rt::test]
async fn replicas_in_kubernetes_answer_each_others_challenges() {
    use crate::fakes::kube_api::KubeApi;
    let kube = KubeApi::default();
    let kube_addr = kube.start().await;
    let dir = tempfile::tempdir().unwrap();
    let key = make_key(dir.path());
    let gws = gateways(1);
    let mut replicas = Vec::new();
    for n in 0..2 {
        let own = dir.path().join(format!("replica-{n}"));
        std::fs::create_dir(&own).unwrap();
        let kubeconfig = KubeApi::kubeconfig(kube_addr, &own);
        let dns = SocketAddr::new(loopback_ip().into(), 5353);
        let config = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
            .set("state_dir", own.join("state").display().to_string())
            .with(&format!(
                "[kubernetes]\noperator_state = \"ho-operator\"\nkubeconfig = {:?}\n\n\
                 [[tenants]]\nname = \"a\"\ndomains = [\"api.example.org\"]\nsinks = [\"dns\"]\n\n\
                 [sinks.dns]\nkind = \"dns_server\"\nlisten = [\"{dns}\"]\nzones = [\"example.org\"]\n\
                 acme = {{ tsig = {{ name = \"ho-xfr\", secret_file = {:?} }} }}\n",
                kubeconfig.display().to_string(),
                key.display().to_string()
            ));
        let running = spawn_logged(&mut run_config(&own, &config), &own.join("log"));
        replicas.push((dns, running));
    }
    let (a, b) = (replicas[0].0, replicas[1].0);
    // Both replicas answer (the zone is up) before the first update.
    for server in [a, b] {
        let start = std::time::Instant::now();
        while crate::services::dig::dig(server, &["api.example.org", "A"])
            .await
            .is_empty()
        {
            assert!(start.elapsed() < LIMIT, "{server} answers");
        }
    }

    let times = set_through_one_answered_by_the_other(a, b, &key).await;
    eprintln!(
        "ACME challenge set on one replica -> answered by the other (ConfigMap): p50 {:?}, p99 {:?} (20 trials)",
        times[times.len() / 2],
        times[times.len() - 1]
    );
    assert!(times[times.len() - 1] < std::time::Duration::from_secs(1));
    updates_through_both_at_once_land(a, b, &key, LIMIT).await;
}

/// 20 challenges, each set through one replica (alternating) and timed until the other
/// answers it alone; the times, sorted.
async fn set_through_one_answered_by_the_other(
    a: SocketAddr,
    b: SocketAddr,
    key: &Path,
) -> Vec<std::time::Duration> {
    let challenge = "_acme-challenge.api.example.org";
    let mut times = Vec::new();
    for trial in 0..20 {
        let (to, other) = if trial % 2 == 0 { (a, b) } else { (b, a) };
        let token = format!("token-{trial}");
        let (ok, said) = nsupdate(
            to,
            Some(key),
            &format!("update delete {challenge} TXT\nupdate add {challenge} 60 TXT \"{token}\""),
        );
        assert!(ok, "{said}");
        let set = std::time::Instant::now();
        loop {
            let (_, texts) = txt(other, challenge).await;
            if texts == [token.clone()] {
                break;
            }
            assert!(
                set.elapsed() < std::time::Duration::from_secs(5),
                "trial {trial}: the other replica answers {texts:?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        times.push(set.elapsed());
    }
    times.sort();
    times
}

/// Two updates sent at once, one through each replica, after the 20 trials: both replicas
/// answer both beside the last trial's token, within `within` (zero: at the first look).
async fn updates_through_both_at_once_land(
    a: SocketAddr,
    b: SocketAddr,
    key: &Path,
    within: std::time::Duration,
) {
    let add = |server: SocketAddr, token: &'static str| {
        let key = key.to_owned();
        std::thread::spawn(move || {
            nsupdate(
                server,
                Some(&key),
                &format!("update add _acme-challenge.api.example.org 60 TXT \"{token}\""),
            )
        })
    };
    let (one, two) = (add(a, "both-a"), add(b, "both-b"));
    assert!(one.join().unwrap().0 && two.join().unwrap().0);
    for server in [a, b] {
        let start = std::time::Instant::now();
        loop {
            let (_, mut texts) = txt(server, "_acme-challenge.api.example.org").await;
            texts.sort();
            if texts == ["both-a", "both-b", "token-19"] {
                break;
            }
            assert!(start.elapsed() < within, "{server}: {texts:?}");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
}
