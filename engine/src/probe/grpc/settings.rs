//! The `grpc` and `grpcs` kinds' keys as written and resolved: which service is asked
//! about, the authority sent, and (grpcs) whom to trust.

use std::net::SocketAddr;

use ho_config::{KindSettings, ResolvedCheck, Target};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::GrpcProbe;
use crate::probe::registry::{CheckSettings, Prepare, Problems, UrlError};
use crate::probe::reuse;
use crate::probe::tls::{Alpn, TlsProbe, TlsSettings};
use crate::probe::{PreparedProbe, ProbeContext, ProbeError};

/// `kind = "grpc"`: the gRPC health protocol (`grpc.health.v1.Health/Check`) over
/// HTTP/2 in clear text; healthy when the answer is SERVING. The readiness signal of
/// Envoy, Istio and Kubernetes' grpc probe.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrpcSettings {
    /// The service asked about (default `""`: the server as a whole).
    pub service: Option<String>,
    /// `Host` header, and the TLS server name for https (default: the endpoint's address);
    /// for grpc and grpcs the `:authority` and the TLS server name.
    pub host: Option<String>,
    /// Keep the HTTP/2 connection open between probes instead of opening one per probe. Off
    /// by default: a kept connection does not see faults that only new connections meet
    /// (a firewall rule, a full accept queue, conntrack), so a fresh one is still opened
    /// after every failure and at least every `fresh_connection_every` probes.
    pub reuse_connection: Option<bool>,
    /// With `reuse_connection`: most probes carried by one connection (default 10).
    pub fresh_connection_every: Option<u32>,
}

/// `kind = "grpcs"`: like `grpc`, over TLS (ALPN `h2`).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct GrpcsSettings {
    /// The gRPC keys.
    #[serde(flatten)]
    pub grpc: GrpcSettings,
    /// Whom to trust.
    #[serde(flatten)]
    pub tls: TlsSettings,
}

/// A gRPC health check, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct GrpcCheck {
    /// The service asked about.
    pub service: String,
    /// `:authority`; `None` means the address.
    pub host: Option<String>,
    /// Over TLS, trusting this.
    pub tls: Option<TlsProbe>,
    /// Calls one connection carries: 1 opens a fresh connection per probe (the default).
    pub probes_per_connection: u32,
}

impl GrpcSettings {
    fn resolve_with(self, tls: Option<TlsProbe>, problems: &mut Problems<'_>) -> GrpcCheck {
        problems.host(self.host.as_deref());
        let probes_per_connection = reuse::probes_per_connection(
            self.reuse_connection,
            self.fresh_connection_every,
            problems,
        );
        GrpcCheck {
            service: self.service.unwrap_or_default(),
            host: self.host,
            tls,
            probes_per_connection,
        }
    }
}

impl ResolvedCheck for GrpcCheck {
    fn kind(&self) -> &'static str {
        if self.tls.is_some() {
            GrpcsSettings::KIND
        } else {
            GrpcSettings::KIND
        }
    }

    fn url(&self, target: SocketAddr) -> String {
        format!("{}://{target}/{}", self.kind(), self.service)
    }

    fn speaks_tls(&self) -> bool {
        self.tls.is_some()
    }

    fn keeps_connection(&self) -> bool {
        self.probes_per_connection > 1
    }

    fn unverified_tls(&self) -> bool {
        self.tls.as_ref().is_some_and(|t| t.trust.insecure)
    }
}

/// `/SERVICE` (nothing: the server as a whole).
fn service_key(rest: &str) -> Result<KindSettings, String> {
    let service = rest.strip_prefix('/').unwrap_or(rest);
    Ok(KindSettings::from([("service".to_owned(), service.into())]))
}

impl CheckSettings for GrpcSettings {
    const KIND: &'static str = "grpc";
    const DEFAULT_PORT: Option<u16> = None;
    const URL_PORT: Option<u16> = None;
    type Resolved = GrpcCheck;

    fn resolve(self, problems: &mut Problems<'_>) -> Option<GrpcCheck> {
        Some(self.resolve_with(None, problems))
    }

    fn url_keys(rest: &str) -> Result<KindSettings, UrlError> {
        service_key(rest).map_err(UrlError)
    }
}

impl CheckSettings for GrpcsSettings {
    const KIND: &'static str = "grpcs";
    const DEFAULT_PORT: Option<u16> = None;
    const URL_PORT: Option<u16> = None;
    type Resolved = GrpcCheck;

    fn resolve(self, problems: &mut Problems<'_>) -> Option<GrpcCheck> {
        let tls = self.tls.resolve(problems);
        Some(self.grpc.resolve_with(Some(tls), problems))
    }

    fn url_keys(rest: &str) -> Result<KindSettings, UrlError> {
        service_key(rest).map_err(UrlError)
    }
}

impl Prepare for GrpcCheck {
    fn prepare(
        &self,
        target: &Target,
        ctx: &mut ProbeContext,
    ) -> Result<PreparedProbe, ProbeError> {
        let tls = match &self.tls {
            Some(trust) => Some(ctx.tls.target(trust, Alpn::H2, self.host.as_deref())?),
            None => None,
        };
        let addr = SocketAddr::new(target.address, target.check.port);
        Ok(PreparedProbe::new(GrpcProbe::new(self, addr, tls)))
    }

    /// The request's `:authority` is the target's address unless `host` names it.
    fn per_address(&self) -> bool {
        self.host.is_none()
    }
}
