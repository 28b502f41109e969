//! The prober's self-check under a real fault: 40 gateways live in a network namespace of
//! the test's own, reached through a veth pair; a packet filter inside that namespace then
//! drops half of the probes' packets at random (`iptables -m statistic`: this machine's
//! kernel has no `tc netem`; the fault is the same, loss on the prober's path). Every
//! gateway is still up (only this vantage is impaired): the prober judges itself impaired,
//! withdraws none of them while it is, says so in `/status`, and resumes when the loss
//! ends. Needs root, iproute2 and iptables (`.ci/test` installs them); all traffic stays
//! between the test's own namespace and this one, and the filter lives in the former.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::harness::*;

/// Gateways in the namespace.
const GATEWAYS: usize = 40;
/// Port they listen on.
const PORT: u16 = 8080;

/// A network namespace with `GATEWAYS` addresses answering TCP on [`PORT`], joined to
/// this namespace by a veth pair; removed (with its veth) on drop.
struct Namespace {
    ns: VethNamespace,
    /// The gateways' addresses.
    addresses: Vec<String>,
    listener: Child,
}

impl Namespace {
    fn start() -> Namespace {
        let ns = VethNamespace::start("vantage", "hov");
        let net = format!("10.231.{}", ns.n % 250);
        run_checked(&["ip", "addr", "add", &format!("{net}.1/24"), "dev", &ns.link]);
        let addresses: Vec<String> = (10..10 + GATEWAYS).map(|i| format!("{net}.{i}")).collect();
        for a in &addresses {
            ns.inside(&["ip", "addr", "add", &format!("{a}/24"), "dev", &ns.peer]);
        }
        let listener = Command::new("ip")
            .args(["netns", "exec", &ns.name, "python3", "-c"])
            .arg(format!(
                "import socket\ns = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
                 s.bind(('0.0.0.0', {PORT})); s.listen(1024)\nwhile True: s.accept()[0].close()"
            ))
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        Namespace {
            ns,
            addresses,
            listener,
        }
    }

    /// Runs `iptables ACTION` with the rule dropping `share` of the probes arriving in
    /// the namespace, inside it.
    fn filter(&self, action: &str, share: f64) {
        let (port, share) = (PORT.to_string(), share.to_string());
        self.ns.inside(&[
            "iptables",
            action,
            "INPUT",
            "-p",
            "tcp",
            "--dport",
            &port,
            "-m",
            "statistic",
            "--mode",
            "random",
            "--probability",
            &share,
            "-j",
            "DROP",
        ]);
    }

    /// Drops `share` of the probes' packets at random.
    fn lose(&self, share: f64) {
        self.filter("-A", share);
    }

    /// Ends the loss.
    fn heal(&self, share: f64) {
        self.filter("-D", share);
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = self.listener.kill();
        let _ = self.listener.wait();
    }
}

#[actix_rt::test]
async fn a_prober_losing_half_its_packets_withdraws_nothing_and_says_so() {
    let ns = Namespace::start();
    let dir = tempfile::tempdir().unwrap();
    // Two tenants of 20; fall 3, so a gateway needs three failures in a row to leave,
    // while the self-check acts on the first failures of a quarter of the targets.
    let mut text = format!(
        "[brake]\nimpaired_share = 0.25\nimpaired_min_targets = 8\nimpaired_window = \"2s\"\n\n\
         [defaults.check]\nkind = \"tcp\"\nport = {PORT}\ninterval = \"200ms\"\ntimeout = \"150ms\"\n\
         fast_interval = \"100ms\"\nrise = 1\nfall = 3\n\n"
    );
    for (i, a) in ns.addresses.iter().enumerate() {
        text.push_str(&format!(
            "[[endpoints]]\nname = \"gw-{i}\"\naddress = \"{a}\"\nlabels = {{ half = \"{}\" }}\n\n",
            i % 2
        ));
    }
    for half in 0..2 {
        text.push_str(&format!(
            "[[tenants]]\nname = \"t{half}\"\ndomains = [\"t{half}.example\"]\nselector = {{ half = \"{half}\" }}\nsinks = [\"local\"]\n\n"
        ));
    }
    text.push_str(&hosts_sink(dir.path()));
    let engine = start_engine(dir.path(), &text).await;
    let files = [dir.path().join("t0.hosts"), dir.path().join("t1.hosts")];
    let published = || -> usize {
        files
            .iter()
            .map(|f| addresses(&std::fs::read_to_string(f).unwrap_or_default()).len())
            .sum()
    };
    let start = tokio::time::Instant::now();
    while published() < GATEWAYS {
        assert!(start.elapsed() < LIMIT, "every gateway published");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    ns.lose(0.5);
    let probes = |s: &ho_engine::status::TrackerStatus| -> u64 {
        s.endpoints.iter().map(|e| e.probes).sum()
    };
    let from = probes(&engine.status().await.unwrap().tracker);
    let start = tokio::time::Instant::now();
    let mut impaired_seen = false;
    // 10 probes per gateway under loss: nothing withdrawn, the impairment reported.
    loop {
        assert_eq!(
            published(),
            GATEWAYS,
            "a gateway was withdrawn under the prober's own loss"
        );
        let status = engine.status().await.unwrap().tracker;
        impaired_seen |= status.impaired;
        if probes(&status) >= from + 10 * GATEWAYS as u64 {
            break;
        }
        assert!(start.elapsed() < LIMIT * 3, "the gateways are not probed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(impaired_seen, "the impairment is reported in /status");

    ns.heal(0.5);
    let start = tokio::time::Instant::now();
    while engine.status().await.unwrap().tracker.impaired {
        assert!(
            start.elapsed() < LIMIT,
            "the prober resumes once the loss ends"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(published(), GATEWAYS, "every gateway still published");
}
