//! `probe`: one probe from the command line, with exactly the engine's probe code.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use ho_config::{CheckKind, CheckOverrides, Target};
use ho_engine::probe::{Probe, TlsCache};

/// Arguments of `probe`.
#[derive(clap::Args)]
pub struct ProbeArgs {
    /// `http://HOST[:PORT][/PATH]`, `https://...`, or `HOST:PORT` for a TCP connect.
    target: String,
    /// Hard deadline of the probe.
    #[arg(long, default_value = "2s", value_parser = humantime_duration)]
    timeout: Duration,
    /// Healthy status codes (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "200")]
    expect_status: Vec<u16>,
    /// Required body text.
    #[arg(long)]
    body_contains: Option<String>,
    /// `Host` header and TLS server name (default: the URL's host).
    #[arg(long)]
    host: Option<String>,
    /// https: accept any certificate.
    #[arg(long)]
    insecure: bool,
    /// https: trust the CAs in this PEM file instead of the system roots.
    #[arg(long)]
    ca_file: Option<PathBuf>,
}

fn humantime_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| e.to_string())
}

/// A parsed target: kind, host text, port, path.
#[derive(Debug, PartialEq, Eq)]
struct Parsed {
    kind: CheckKind,
    host: String,
    port: u16,
    path: String,
}

fn parse_target(text: &str) -> anyhow::Result<Parsed> {
    let (kind, rest) = match text.split_once("://") {
        Some(("http", rest)) => (CheckKind::Http, rest),
        Some(("https", rest)) => (CheckKind::Https, rest),
        Some((scheme, _)) => bail!("unsupported scheme {scheme:?}: use http, https or HOST:PORT"),
        None => (CheckKind::Tcp, text),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) if kind != CheckKind::Tcp => (&rest[..i], rest[i..].to_string()),
        _ => (rest, "/".to_string()),
    };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']').context("missing ']' in IPv6 address")?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match (port, kind) {
        (Some(p), _) => p.parse().with_context(|| format!("bad port {p:?}"))?,
        (None, CheckKind::Http) => 80,
        (None, CheckKind::Https) => 443,
        (None, CheckKind::Tcp) => bail!("a TCP target needs a port: HOST:PORT"),
    };
    if host.is_empty() {
        bail!("missing host in {text:?}");
    }
    Ok(Parsed {
        kind,
        host: host.to_string(),
        port,
        path,
    })
}

/// Probes once; exit 0 if healthy, 1 if not.
pub fn probe(args: ProbeArgs) -> anyhow::Result<ExitCode> {
    let parsed = parse_target(&args.target)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let (address, host) = match parsed.host.parse::<IpAddr>() {
            Ok(ip) => (ip, args.host.clone()),
            Err(_) => {
                let resolved = tokio::net::lookup_host((parsed.host.as_str(), parsed.port))
                    .await
                    .with_context(|| format!("resolving {}", parsed.host))?
                    .next()
                    .with_context(|| format!("{} has no address", parsed.host))?;
                (
                    resolved.ip(),
                    Some(args.host.clone().unwrap_or(parsed.host.clone())),
                )
            }
        };
        let is_http = parsed.kind != CheckKind::Tcp;
        let overrides = CheckOverrides {
            kind: Some(parsed.kind),
            port: Some(parsed.port),
            path: is_http.then(|| parsed.path.clone()),
            timeout: Some(args.timeout),
            interval: Some(args.timeout + Duration::from_millis(1)),
            expect_status: is_http.then(|| args.expect_status.clone()),
            body_contains: args.body_contains.clone(),
            host,
            insecure: args.insecure.then_some(true),
            ca_file: args.ca_file.clone(),
            ..CheckOverrides::default()
        };
        let check =
            ho_config::resolve_standalone_check(&overrides).map_err(|e| anyhow::anyhow!("{e}"))?;
        let target = Target {
            address,
            check: check.into(),
        };
        let probe = Probe::new(&target, &mut TlsCache::default())?;
        let result = probe.run(&mut None).await;
        let verdict = if result.ok() { "healthy" } else { "unhealthy" };
        println!(
            "{verdict} {} {} {:.1}ms",
            SocketAddr::new(address, parsed.port),
            result.reason(),
            result.latency.as_secs_f64() * 1000.0
        );
        Ok(if result.ok() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_urls_and_host_port() {
        let p = parse_target("http://127.0.0.1:8080/healthz").unwrap();
        assert_eq!(
            (p.kind, p.host.as_str(), p.port, p.path.as_str()),
            (CheckKind::Http, "127.0.0.1", 8080, "/healthz")
        );
        let p = parse_target("https://[::1]/ready").unwrap();
        assert_eq!(
            (p.kind, p.host.as_str(), p.port, p.path.as_str()),
            (CheckKind::Https, "::1", 443, "/ready")
        );
        let p = parse_target("10.0.0.1:5432").unwrap();
        assert_eq!((p.kind, p.port), (CheckKind::Tcp, 5432));
        assert!(parse_target("10.0.0.1").is_err());
        assert!(parse_target("ftp://x/").is_err());
    }
}
