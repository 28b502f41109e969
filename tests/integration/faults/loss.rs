//! Packet loss on a process's paths, dropped by the kernel: `iptables -m statistic` rules in
//! this network namespace's OUTPUT chain, matching the loopback addresses only that process
//! uses (its probes' source address, the links it reaches the back end or its peers
//! through), each way. TCP then retransmits as over a lossy network (a write or a read of
//! the reports takes an RTO or more; a probe's connect may time out). This machine's kernel
//! has no `tc netem`, so loss is real here while delay is the links' (`services/link.rs`)
//! and reordering is not emulated.
//!
//! Each rule carries a comment naming this test process, so rules that a killed test left
//! behind are removed when the next run starts (no other rule matches these addresses,
//! which the harness hands out to one test process at a time).

use std::net::IpAddr;
use std::process::Command;

/// The comment on this process's rules.
fn tag() -> String {
    format!("ho-fault-{}", std::process::id())
}

/// Runs `iptables -w ARGS`; what it said when it fails.
fn iptables(args: &[String]) -> Result<(), String> {
    let out = Command::new("iptables")
        .arg("-w")
        .args(args)
        .output()
        .map_err(|e| {
            format!("iptables: {e} (run the test command, bash .ci/test, which installs it)")
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "iptables {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The rules dropping `share` of the packets from and to `address`.
fn rules(address: IpAddr, share: f64) -> Vec<Vec<String>> {
    ["-s", "-d"]
        .iter()
        .map(|way| {
            [
                "OUTPUT",
                way,
                &address.to_string(),
                "-m",
                "statistic",
                "--mode",
                "random",
                "--probability",
                &format!("{share:.2}"),
                "-m",
                "comment",
                "--comment",
                &tag(),
                "-j",
                "DROP",
            ]
            .map(str::to_owned)
            .to_vec()
        })
        .collect()
}

/// The loss in place, per process; every rule is removed on drop.
#[derive(Default)]
pub struct Losses {
    /// Per process, the rules in place.
    held: Vec<(usize, Vec<Vec<String>>)>,
}

impl Losses {
    /// No loss yet; removes the rules of test processes that no longer run.
    pub fn new() -> Losses {
        let listed = Command::new("iptables")
            .args(["-w", "-S", "OUTPUT"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        for line in listed.lines() {
            let Some(pid) = line
                .split_once("--comment ho-fault-")
                .and_then(|(_, rest)| rest.split(' ').next())
            else {
                continue;
            };
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                let Some(rule) = line.strip_prefix("-A ") else {
                    continue;
                };
                let mut args = vec!["-D".to_owned()];
                args.extend(rule.split(' ').map(str::to_owned));
                iptables(&args).unwrap();
            }
        }
        Losses::default()
    }

    /// Process `p` loses `share` of its packets from and to `addresses`.
    pub fn lose(&mut self, p: usize, addresses: &[IpAddr], share: f64) {
        let rules: Vec<Vec<String>> = addresses.iter().flat_map(|a| rules(*a, share)).collect();
        for rule in &rules {
            let mut args = vec!["-A".to_owned()];
            args.extend(rule.iter().cloned());
            iptables(&args).unwrap();
        }
        self.held.push((p, rules));
    }

    /// Process `p` loses nothing any more.
    pub fn heal(&mut self, p: usize) {
        for result in self.remove(p) {
            result.unwrap();
        }
    }

    /// Removes process `p`'s rules; how each removal went.
    fn remove(&mut self, p: usize) -> Vec<Result<(), String>> {
        let (healed, kept): (Vec<_>, Vec<_>) = self.held.drain(..).partition(|(q, _)| *q == p);
        self.held = kept;
        healed
            .into_iter()
            .flat_map(|(_, rules)| rules)
            .map(|rule| {
                let mut args = vec!["-D".to_owned()];
                args.extend(rule);
                iptables(&args)
            })
            .collect()
    }
}

/// Removes every rule left (errors ignored: it may run while a violation unwinds; a rule
/// left is removed by the next run).
impl Drop for Losses {
    fn drop(&mut self) {
        let processes: Vec<usize> = self.held.iter().map(|(p, _)| *p).collect();
        for p in processes {
            let _ = self.remove(p);
        }
    }
}
