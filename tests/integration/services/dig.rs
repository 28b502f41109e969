//! `dig` (Debian's dnsutils, installed by `.ci/test`) as the DNS client of the tests: one
//! process may send many queries, and its output is parsed into what the tests compare.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// One answer as `dig` printed it.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    /// `NOERROR`, `NXDOMAIN`, ...
    pub status: String,
    /// Header flags (`qr aa rd`, ...).
    pub flags: Vec<String>,
    /// Answer section data (the last field of each record), in the order received.
    pub answers: Vec<String>,
    /// Record types of the authority section.
    pub authority: Vec<String>,
    /// The CLIENT-SUBNET option echoed, as `dig` prints it (`10.1.7.0/24/24`).
    pub client_subnet: Option<String>,
    /// The COOKIE option returned (client and server cookie in hex) and `dig`'s verdict on
    /// it (`good` when the client cookie came back).
    pub cookie: Option<(String, String)>,
}

impl Answer {
    /// Whether the header has `flag`.
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    /// The answer section's data, sorted.
    pub fn sorted(&self) -> Vec<String> {
        let mut a = self.answers.clone();
        a.sort();
        a
    }
}

/// Sends each of `queries` (e.g. `["api.example.org", "A"]`, options such as `+tcp` or
/// `+subnet=...` in the list apply to the query they follow) to `server` in one `dig`
/// run; one [`Answer`] per query, in order.
pub async fn dig(server: SocketAddr, queries: &[&str]) -> Vec<Answer> {
    dig_in(None, server, queries).await
}

/// [`dig`] run inside network namespace `netns` (`ip netns exec`), when given: a client
/// whose queries cross a real interface.
pub async fn dig_in(netns: Option<&str>, server: SocketAddr, queries: &[&str]) -> Vec<Answer> {
    assert!(
        Path::new("/usr/bin/dig").exists(),
        "dig is missing: run the test command (bash .ci/test), which installs dnsutils"
    );
    let mut args = vec![
        format!("@{}", server.ip()),
        "-p".into(),
        server.port().to_string(),
        "+time=2".into(),
        "+tries=1".into(),
        "+norecurse".into(),
    ];
    args.extend(queries.iter().map(|q| (*q).to_owned()));
    let mut command = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "dig"]);
            c
        }
        None => Command::new("dig"),
    };
    command.args(args);
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    parse(&String::from_utf8_lossy(&out.stdout))
}

/// Like [`dig`] with one query; its answer.
pub async fn dig1(server: SocketAddr, query: &[&str]) -> Answer {
    let mut all = dig(server, query).await;
    assert_eq!(all.len(), 1, "one answer for {query:?}: {all:?}");
    all.remove(0)
}

fn parse(out: &str) -> Vec<Answer> {
    let mut answers = Vec::new();
    let mut section = "";
    for line in out.lines() {
        if let Some(rest) = line.split_once("status: ").map(|(_, r)| r) {
            answers.push(Answer {
                status: rest.split(',').next().unwrap_or("").to_owned(),
                ..Answer::default()
            });
            section = "";
            continue;
        }
        let Some(current) = answers.last_mut() else {
            continue;
        };
        if let Some(flags) = line.strip_prefix(";; flags: ") {
            let flags = flags.split(';').next().unwrap_or("");
            current.flags = flags.split_whitespace().map(str::to_owned).collect();
        } else if let Some(cookie) = line.strip_prefix("; COOKIE: ") {
            let (hex, verdict) = cookie.split_once(' ').unwrap_or((cookie, ""));
            current.cookie = Some((hex.to_owned(), verdict.trim_matches(['(', ')']).to_owned()));
        } else if let Some(subnet) = line.strip_prefix("; CLIENT-SUBNET: ") {
            current.client_subnet = Some(subnet.trim().to_owned());
        } else if line.starts_with(";; ANSWER SECTION") {
            section = "answer";
        } else if line.starts_with(";; AUTHORITY SECTION") {
            section = "authority";
        } else if line.starts_with(";;") || line.trim().is_empty() {
            section = "";
        } else if !line.starts_with(';') {
            let fields: Vec<&str> = line.split_whitespace().collect();
            match section {
                "answer" => current
                    .answers
                    .push(fields.last().unwrap_or(&"").to_string()),
                "authority" => current
                    .authority
                    .push(fields.get(3).unwrap_or(&"").to_string()),
                _ => {}
            }
        }
    }
    answers
}

/// Polls `name A` until the sorted answer is `want`; the time it took.
pub async fn wait_for_answer(server: SocketAddr, name: &str, want: &[String]) -> Duration {
    wait_for_answer_with(server, &[], name, want).await
}

/// [`wait_for_answer`] with `dig` options before the query (`+tcp`: polling over UDP would
/// spend a rate-limited account).
pub async fn wait_for_answer_with(
    server: SocketAddr,
    options: &[&str],
    name: &str,
    want: &[String],
) -> Duration {
    let start = tokio::time::Instant::now();
    let mut want = want.to_vec();
    want.sort();
    let query: Vec<&str> = options.iter().copied().chain([name, "A"]).collect();
    loop {
        let got = dig1(server, &query).await;
        if got.status == "NOERROR" && got.sorted() == want {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < crate::harness::LIMIT,
            "{name}: wanted {want:?}, got {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
