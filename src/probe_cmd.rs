//! `probe`: one probe from the command line, with exactly the engine's probe code.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use ho_config::{CheckCatalog, CheckOverrides, Target};
use ho_engine::probe::{Probe, ProbeContext};
use ho_kinds::CHECK_KINDS;

/// Arguments of `probe`.
#[derive(clap::Args)]
pub struct ProbeArgs {
    /// `KIND://HOST[:PORT][...]` for any check kind (`http://HOST[:PORT][/PATH]`,
    /// `https://...`, `tcp://HOST:PORT`, `grpc[s]://HOST:PORT[/SERVICE]`,
    /// `dns://SERVER[:PORT]/NAME?type=A&tcp=1&rcode=NOERROR&contains=ADDR`, `icmp://ADDR`),
    /// or `HOST:PORT` for a TCP connect.
    target: String,
    /// Hard deadline of the probe.
    #[arg(long, default_value = "2s", value_parser = humantime_duration)]
    timeout: Duration,
    /// Healthy status codes (comma-separated; default 200).
    #[arg(long, value_delimiter = ',')]
    expect_status: Option<Vec<u16>>,
    /// Required body text.
    #[arg(long)]
    body_contains: Option<String>,
    /// `Host` header and TLS server name (default: the URL's host).
    #[arg(long)]
    host: Option<String>,
    /// https: accept any certificate.
    #[arg(long)]
    insecure: bool,
    /// https/grpcs: trust the CAs in this PEM file instead of the system roots.
    #[arg(long)]
    ca_file: Option<PathBuf>,
    /// http/https: GET, HEAD or POST.
    #[arg(long)]
    method: Option<String>,
    /// http/https: the body sent with --method POST.
    #[arg(long)]
    request_body: Option<String>,
    /// http/https: a regular expression the body must match.
    #[arg(long)]
    body_regex: Option<String>,
    /// http/https: a JSON value the body must hold, `POINTER=VALUE` (`/status=UP`); repeatable.
    #[arg(long = "json", value_name = "POINTER=VALUE")]
    json: Vec<String>,
    /// http/https: a healthy answer slower than this fails (`slow`).
    #[arg(long)]
    max_latency: Option<String>,
    /// http/https: follow up to N redirects on the endpoint (default: a redirect is judged
    /// as its status).
    #[arg(long, value_name = "N")]
    follow_redirects: Option<u8>,
    /// https/grpcs: a certificate expiring sooner than this fails (`cert_expiring`).
    #[arg(long)]
    min_cert_validity: Option<String>,
    /// https/grpcs: present this PEM certificate chain (mutual TLS), with --client-key.
    #[arg(long)]
    client_cert: Option<PathBuf>,
    /// https/grpcs: the client certificate's PEM key.
    #[arg(long)]
    client_key: Option<PathBuf>,
}

fn humantime_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| e.to_string())
}

impl ProbeArgs {
    /// The check the URL names with the options given, each option a key of the kind's
    /// (one the kind does not read is refused as in a config file).
    fn check(
        &self,
        mut check: CheckOverrides,
        host: Option<String>,
    ) -> anyhow::Result<CheckOverrides> {
        let path = |p: &Option<PathBuf>| p.as_ref().map(|f| f.display().to_string().into());
        let text = |t: &Option<String>| t.as_deref().map(Into::into);
        let mut json = BTreeMap::new();
        for pair in &self.json {
            let (pointer, value) = pair
                .split_once('=')
                .with_context(|| format!("--json {pair:?}: write POINTER=VALUE"))?;
            json.insert(pointer.to_owned(), value.to_owned());
        }
        let keys = [
            ("method", text(&self.method)),
            ("request_body", text(&self.request_body)),
            ("body_matches", text(&self.body_regex)),
            ("max_latency", text(&self.max_latency)),
            ("follow_redirects", self.follow_redirects.map(Into::into)),
            ("min_cert_validity", text(&self.min_cert_validity)),
            ("client_cert", path(&self.client_cert)),
            ("client_key", path(&self.client_key)),
            (
                "expect_status",
                self.expect_status.as_deref().map(Into::into),
            ),
            (
                "body_contains",
                self.body_contains.as_deref().map(Into::into),
            ),
            ("host", host.map(Into::into)),
            ("insecure", self.insecure.then(|| true.into())),
            ("ca_file", path(&self.ca_file)),
        ];
        for (key, value) in keys {
            if let Some(value) = value {
                check.settings.insert(key.into(), value);
            }
        }
        if !json.is_empty() {
            check = check.with("body_json", &json);
        }
        check.timeout = Some(self.timeout);
        check.interval = Some(self.timeout + Duration::from_millis(1));
        Ok(check)
    }
}

/// Probes once; exit 0 if healthy, 1 if not.
pub fn probe(args: ProbeArgs) -> anyhow::Result<ExitCode> {
    let parsed = CHECK_KINDS
        .parse_url(&args.target)
        .map_err(anyhow::Error::msg)?;
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
        let mut overrides = args.check(parsed.check, host)?;
        let kind = overrides.kind.clone().unwrap_or_default();
        let uses_port = CHECK_KINDS.uses_port(&kind);
        if uses_port {
            overrides.port = Some(parsed.port);
        }
        let check = ho_config::resolve_standalone_check(&overrides, &CHECK_KINDS)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let target = Target {
            address,
            check: check.into(),
        };
        let probe = Probe::new(&target, &mut ProbeContext::default())?;
        let result = probe.run(&mut None).await;
        let verdict = if result.ok() { "healthy" } else { "unhealthy" };
        let shown = if uses_port {
            SocketAddr::new(address, parsed.port).to_string()
        } else {
            address.to_string()
        };
        outln!(
            "{verdict} {shown} {} {:.1}ms",
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
