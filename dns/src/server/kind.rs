//! `kind = "dns_server"` as the program asks of a sink kind: the checks, the preflight that
//! opens what the parts will read (GeoIP database, cookie secret, DNSSEC keys, TSIG
//! secrets), the build, and what the kind can express. Here at the top because it reaches
//! every part; the settings themselves are in [`config`](super::config).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use ho_config::{Claim, FieldError, RoutingPolicy, SinkSpec, TenantUse};
use ho_engine::sink::kind::{BuildContext, KindFuture, Problems, SinkSettings};

use super::config::DnsServerConfig;
use super::cookies::Cookies;
use super::dnssec::Signer;
use super::geo::Locator;
use super::statics::Statics;
use super::DnsServerSink;

impl SinkSettings for DnsServerConfig {
    const KIND: &'static str = "dns_server";

    fn check(&mut self, p: &mut Problems<'_>) {
        self.check_fields(p);
        if let Some(text) = &self.static_records {
            match Statics::parse(text, &self.zones) {
                Err(e) => p.at("static_records", e),
                Ok(statics) if statics.delegates() && self.dnssec.is_some() => p.at(
                    "static_records",
                    "a delegation (NS below the apex) in a signed zone needs the proof of no DS a \
                     validator asks of a referral, which the server does not make: remove the \
                     delegation or `dnssec`",
                ),
                Ok(_) => {}
            }
        }
        self.check_against_listen(p);
    }

    fn build<'a>(&'a self, ctx: BuildContext<'a>) -> KindFuture<'a> {
        Box::pin(async move {
            let sink =
                DnsServerSink::start(self, &ctx).map_err(ho_engine::sink::SetupError::client)?;
            Ok(Arc::new(sink) as _)
        })
    }

    fn preflight(&self, p: &mut Problems<'_>) {
        if let Err(e) = Locator::load(&self.geo) {
            p.at("geo", e);
        }
        if let Err((field, e)) = Cookies::load(&self.cookies) {
            p.at(&field, e);
        }
        if let Some(dnssec) = &self.dnssec {
            if let Err(e) = Signer::preflight(&dnssec.keys, &self.zones) {
                p.at("dnssec.keys", e);
            }
        }
        if let Some(tsig) = self.transfer.as_ref().and_then(|t| t.tsig.as_ref()) {
            tsig.preflight("transfer.tsig", p);
        }
        if let Some(xdp) = &self.xdp {
            let path = format!("/sys/class/net/{}", xdp.interface);
            if !std::path::Path::new(&path).exists() {
                p.at(
                    "xdp.interface",
                    format!("no interface {} here", xdp.interface),
                );
            }
        }
        if let Some(reports) = &self.reports {
            reports.tsig.preflight("reports.tsig", p);
        }
        if let Some(acme) = &self.acme {
            acme.tsig.preflight("acme.tsig", p);
        }
    }
}

impl SinkSpec for DnsServerConfig {
    fn kind(&self) -> &'static str {
        Self::KIND
    }

    /// It answers per query, so it expresses every policy.
    fn supports(&self, _: RoutingPolicy) -> Result<(), &'static str> {
        Ok(())
    }

    /// Every domain must be inside one of the zones.
    fn check_tenant(&self, sink: &str, tenant: &TenantUse<'_>, errs: &mut Vec<FieldError>) {
        let statics = (self.static_records.as_deref())
            .and_then(|text| Statics::parse(text, &self.zones).ok());
        for conflict in statics.iter().flat_map(|s| s.conflicts(tenant.domains)) {
            errs.push(FieldError {
                path: format!("{}.domains", tenant.path),
                reason: format!("{conflict} (static_records of sink \"{sink}\")"),
            });
        }
        for d in tenant.domains {
            let inside = self
                .zones
                .iter()
                .any(|z| !z.is_empty() && (d == z || d.ends_with(&format!(".{z}"))));
            if !inside && self.zones.iter().all(|z| !z.is_empty()) {
                errs.push(FieldError {
                    path: format!("{}.domains", tenant.path),
                    reason: format!(
                        "\"{d}\" is not inside any zone of sink \"{sink}\" ({})",
                        self.zones.join(", ")
                    ),
                });
            }
        }
    }

    fn claim(&self) -> Option<Claim> {
        let mut listen: Vec<String> = self.listen.iter().map(|a| a.to_string()).collect();
        listen.sort();
        (!listen.is_empty()).then(|| Claim {
            key: format!("listen:{}", listen.join(",")),
            field: "listen",
            clash: |other| {
                format!("same addresses as sinks.{other}; two servers cannot share a socket")
            },
        })
    }

    /// This replica's own listener (a wildcard address asked on loopback).
    fn answers_at(&self) -> Option<SocketAddr> {
        let mut at = *self.listen.first()?;
        if at.ip().is_unspecified() {
            at.set_ip(match at {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        Some(at)
    }

    /// The most specific of `geo.networks` for each location: its clients are located
    /// there whatever wider network holds them.
    fn client_subnets(&self) -> BTreeMap<String, String> {
        let mut best: BTreeMap<String, ipnet::IpNet> = BTreeMap::new();
        for (net, geo) in &self.geo.networks {
            let Ok(net) = net.parse::<ipnet::IpNet>() else {
                continue;
            };
            let kept = best.entry(geo.clone()).or_insert(net);
            if net.prefix_len() > kept.prefix_len() {
                *kept = net;
            }
        }
        best.into_iter()
            .map(|(geo, net)| (geo, net.trunc().to_string()))
            .collect()
    }

    /// Each replica answers the queries sent to it, standby or not.
    fn shared(&self) -> bool {
        false
    }

    fn holds_reports(&self) -> bool {
        self.reports.is_some()
    }

    fn takes_wildcards(&self) -> Result<(), &'static str> {
        Ok(())
    }

    /// It picks a host per query, by every policy.
    fn takes_cnames(&self, _: RoutingPolicy) -> Result<(), &'static str> {
        Ok(())
    }
}
