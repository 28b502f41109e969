//! How a check kind is registered. A check kind is its settings type implementing
//! [`CheckSettings`] and its resolved settings implementing [`Prepare`]; the program's list
//! of kinds ([`CheckList`], made in `ho-kinds`) is what validation, the config schema, the
//! CRD and `health-orchestrator probe` learn the kinds from. A resolved check carries the
//! registration that resolved it, so probing needs no list.
//!
//! The kinds the engine holds itself ([`BUILT_IN`]):
//!
//! | kind | module |
//! |---|---|
//! | `http` | `http/` |
//! | `https` | `http/` (with `tls/`) |
//! | `tcp` | `tcp.rs` |
//! | `grpc` | `grpc/` |
//! | `grpcs` | `grpc/` (with `tls/`) |
//! | `icmp` | `icmp.rs` |
//! | `heartbeat` | `heartbeat.rs` |
//! | `feed` | `feed.rs` |
//!
//! The `dns` kind's settings live in `ho-dns`, which speaks DNS messages; its attempt is
//! the engine's ([`super::dns`]).

use std::collections::BTreeMap;
use std::hash::Hash;
use std::marker::PhantomData;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Mutex, OnceLock};

use ho_config::validate::parse_keys;
use ho_config::{CheckCatalog, FieldError, KindCheck, KindSettings, ResolvedCheck, Target};
use schemars::generate::SchemaSettings;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Map, Value};

use super::{PreparedProbe, ProbeContext, ProbeError};

/// The engine's own check kinds, one constant each: `ho-kinds` lists them with the kinds of
/// other crates in the order error messages name them.
pub mod kinds {
    use super::{CheckKind, Registered};
    use crate::probe::{feed, grpc, heartbeat, http, icmp, tcp};

    /// `http`.
    pub const HTTP: &dyn CheckKind = &Registered::<http::HttpSettings>::KIND;
    /// `https`.
    pub const HTTPS: &dyn CheckKind = &Registered::<http::HttpsSettings>::KIND;
    /// `tcp`.
    pub const TCP: &dyn CheckKind = &Registered::<tcp::TcpSettings>::KIND;
    /// `grpc`.
    pub const GRPC: &dyn CheckKind = &Registered::<grpc::GrpcSettings>::KIND;
    /// `grpcs`.
    pub const GRPCS: &dyn CheckKind = &Registered::<grpc::GrpcsSettings>::KIND;
    /// `icmp`.
    pub const ICMP: &dyn CheckKind = &Registered::<icmp::IcmpSettings>::KIND;
    /// `heartbeat`.
    pub const HEARTBEAT: &dyn CheckKind = &Registered::<heartbeat::HeartbeatSettings>::KIND;
    /// `feed`.
    pub const FEED: &dyn CheckKind = &Registered::<feed::FeedSettings>::KIND;
}

/// The kinds the engine holds itself: what an engine embedded without the other crates
/// (and its own tests) can probe.
pub const BUILT_IN: CheckList = CheckList(&[
    kinds::HTTP,
    kinds::HTTPS,
    kinds::TCP,
    kinds::GRPC,
    kinds::GRPCS,
    kinds::ICMP,
    kinds::HEARTBEAT,
    kinds::FEED,
]);

/// A check kind's own keys: what the registry needs to parse, resolve and probe with them.
pub trait CheckSettings: DeserializeOwned + schemars::JsonSchema + 'static {
    /// The `kind` name in the config, and the URL scheme `health-orchestrator probe` takes.
    const KIND: &'static str;

    /// The port a check probes when none is set (`None`: it must be set).
    const DEFAULT_PORT: Option<u16>;

    /// The port a `probe` URL without one gets (`None`: the URL must name it).
    const URL_PORT: Option<u16>;

    /// Whether the kind has ports at all (false: ICMP).
    const USES_PORT: bool = true;

    /// What the plan carries: the settings checked, with defaults filled in.
    type Resolved: Prepare;

    /// Checks the settings and fills in defaults; reports every problem in `problems`.
    /// May read the files the settings name (header secrets), as validation does at every
    /// load and reload.
    fn resolve(self, problems: &mut Problems<'_>) -> Option<Self::Resolved>;

    /// The keys the part of a `probe` URL after its authority sets (`/healthz` for http);
    /// an error when the kind takes nothing there, as kinds without keys (tcp, icmp) do.
    fn url_keys(rest: &str) -> Result<KindSettings, UrlError> {
        match rest {
            "" | "/" => Ok(KindSettings::new()),
            _ => Err(UrlError(format!(
                "{} targets take no path: {rest:?}",
                Self::KIND
            ))),
        }
    }
}

/// A kind's resolved settings, which prepare its attempt (two kinds that resolve to one
/// type, such as grpc and grpcs, share it).
pub trait Prepare: ResolvedCheck + PartialEq + Hash + Serialize {
    /// The attempt for `target`, prepared once and shared by every target of an equal
    /// check whose address is of the same family: each attempt is given the address it
    /// dials, so what is prepared must not depend on it (unless [`Prepare::per_address`]).
    fn prepare(&self, target: &Target, ctx: &mut ProbeContext)
        -> Result<PreparedProbe, ProbeError>;

    /// Whether the prepared attempt carries the target's address, so each target has its
    /// own (a gRPC request's `:authority`, when `host` does not name it).
    fn per_address(&self) -> bool {
        false
    }
}

/// Problems found in one check table's own keys, located under its path.
pub struct Problems<'a> {
    path: &'a str,
    errors: Vec<FieldError>,
}

impl Problems<'_> {
    /// A problem with key `field` (a dotted or indexed path below the table).
    pub fn push(&mut self, field: &str, reason: impl std::fmt::Display) {
        self.errors.push(FieldError {
            path: format!("{}.{field}", self.path),
            reason: reason.to_string(),
        });
    }

    /// Whether anything was found.
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// `host` (the `Host` header, `:authority`, the TLS server name): an address or a
    /// domain name.
    pub fn host(&mut self, host: Option<&str>) {
        if let Some(host) = host.filter(|h| h.parse::<std::net::IpAddr>().is_err()) {
            if let Err(e) = ho_config::names::normalize_domain(host) {
                self.push("host", e);
            }
        }
    }
}

/// One registered kind, whatever its settings type: made by [`Registered`], listed in a
/// [`CheckList`].
pub trait CheckKind: Sync {
    /// The `kind` name.
    fn name(&self) -> &'static str;
    /// The port a check probes when none is set.
    fn default_port(&self) -> Option<u16>;
    /// The port a `probe` URL without one gets.
    fn url_port(&self) -> Option<u16>;
    /// Whether the kind has ports at all.
    fn uses_port(&self) -> bool;
    /// The JSON Schema of the kind's keys, subschemas inlined (draft-07 or OpenAPI 3).
    fn schema(&self, settings: SchemaSettings) -> Value;
    /// Parses and resolves a check table's own keys (errors located under `path`).
    fn resolve(
        &'static self,
        settings: KindSettings,
        path: &str,
    ) -> Result<KindCheck, Vec<FieldError>>;
    /// The attempt for `target`, whose check this kind resolved.
    fn probe(
        &self,
        check: &KindCheck,
        target: &Target,
        ctx: &mut ProbeContext,
    ) -> Result<PreparedProbe, ProbeError>;
    /// The keys the part of a `probe` URL after its authority sets.
    fn url_keys(&self, rest: &str) -> Result<KindSettings, UrlError>;
    /// Whether `check`'s prepared attempt carries the target's address.
    fn per_address(&self, check: &KindCheck) -> bool;
}

/// The registration of the kind whose settings are `T`: one generic [`CheckKind`] for every
/// [`CheckSettings`], so registering a kind is one line in a [`CheckList`].
pub struct Registered<T>(PhantomData<fn() -> T>);

impl<T> Registered<T> {
    /// The registration.
    pub const KIND: Registered<T> = Registered(PhantomData);
}

/// What a resolved check carries to find its kind again ([`KindCheck::origin`]).
struct Origin(&'static dyn CheckKind);

impl<T: CheckSettings> CheckKind for Registered<T> {
    fn name(&self) -> &'static str {
        T::KIND
    }

    fn default_port(&self) -> Option<u16> {
        T::DEFAULT_PORT
    }

    fn url_port(&self) -> Option<u16> {
        T::URL_PORT
    }

    fn uses_port(&self) -> bool {
        T::USES_PORT
    }

    fn schema(&self, settings: SchemaSettings) -> Value {
        settings
            .with(|s| s.inline_subschemas = true)
            .into_generator()
            .into_root_schema_for::<T>()
            .to_value()
    }

    fn resolve(
        &'static self,
        settings: KindSettings,
        path: &str,
    ) -> Result<KindCheck, Vec<FieldError>> {
        let parsed: T = parse_keys(&settings, path)?;
        let mut problems = Problems {
            path,
            errors: Vec::new(),
        };
        match parsed.resolve(&mut problems) {
            Some(resolved) if problems.is_empty() => Ok(KindCheck::new(resolved, Origin(self))),
            _ => Err(problems.errors),
        }
    }

    fn probe(
        &self,
        check: &KindCheck,
        target: &Target,
        ctx: &mut ProbeContext,
    ) -> Result<PreparedProbe, ProbeError> {
        let check = check
            .downcast::<T::Resolved>()
            .expect("a check is probed by the kind that resolved it");
        check.prepare(target, ctx)
    }

    fn url_keys(&self, rest: &str) -> Result<KindSettings, UrlError> {
        T::url_keys(rest)
    }

    fn per_address(&self, check: &KindCheck) -> bool {
        check
            .downcast::<T::Resolved>()
            .expect("a check is probed by the kind that resolved it")
            .per_address()
    }
}

/// The attempt for `target`, prepared by the kind that resolved its check.
pub(super) fn probe_for(
    target: &Target,
    ctx: &mut ProbeContext,
) -> Result<PreparedProbe, ProbeError> {
    let check = &target.check.settings;
    let Origin(kind) = check
        .origin::<Origin>()
        .expect("checks are resolved by a registered kind");
    kind.probe(check, target, ctx)
}

/// Which targets of an equal check share `target`'s prepared attempt: those whose address
/// is of its family (the family's unspecified address), or `target` alone (its address)
/// when the attempt carries it.
pub(super) fn scope(target: &Target) -> IpAddr {
    let check = &target.check.settings;
    let Origin(kind) = check
        .origin::<Origin>()
        .expect("checks are resolved by a registered kind");
    match target.address {
        _ if kind.per_address(check) => target.address,
        IpAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
        IpAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
    }
}

/// A program's check kinds, in the order error messages list them: what validation asks
/// (`ho_config::Kinds::checks`), the schema shows and `probe` URLs name.
#[derive(Clone, Copy)]
pub struct CheckList(pub &'static [&'static dyn CheckKind]);

impl CheckList {
    /// The kind named `name`.
    fn find(&self, name: &str) -> Option<&'static dyn CheckKind> {
        self.0.iter().find(|k| k.name() == name).copied()
    }

    /// The kind named `name`, which validation made sure exists.
    fn kind(&self, name: &str) -> &'static dyn CheckKind {
        self.find(name)
            .expect("validation resolves only registered kinds")
    }
}

impl CheckCatalog for CheckList {
    fn kinds(&self) -> Vec<&'static str> {
        self.0.iter().map(|k| k.name()).collect()
    }

    fn reads(&self, kind: &str) -> &[String] {
        // Read from each kind's schema once; a program has a handful of kinds, each of
        // whose key lists lives as long as the program.
        static READS: OnceLock<Mutex<BTreeMap<&'static str, &'static [String]>>> = OnceLock::new();
        let Some(found) = self.find(kind) else {
            return &[];
        };
        let mut reads = READS
            .get_or_init(Mutex::default)
            .lock()
            .expect("not poisoned");
        reads.entry(found.name()).or_insert_with(|| {
            let schema = found.schema(SchemaSettings::draft07());
            let keys: Vec<String> = schema["properties"]
                .as_object()
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
            Vec::leak(keys)
        })
    }

    fn default_port(&self, kind_name: &str) -> Option<u16> {
        self.find(kind_name).and_then(|k| k.default_port())
    }

    fn uses_port(&self, kind_name: &str) -> bool {
        self.find(kind_name).is_none_or(|k| k.uses_port())
    }

    fn resolve(
        &self,
        kind_name: &str,
        settings: KindSettings,
        path: &str,
    ) -> Result<KindCheck, Vec<FieldError>> {
        self.kind(kind_name).resolve(settings, path)
    }
}

/// The schema of every kind's keys, each tagged with the kinds that read it (`x-kinds`): a
/// check table holds the common keys plus these.
fn check_fields_schema(list: &CheckList, settings: SchemaSettings) -> Map<String, Value> {
    let mut fields = Map::new();
    for k in list.0 {
        let schema = k.schema(settings.clone());
        let Some(properties) = schema["properties"].as_object() else {
            continue;
        };
        for (key, field) in properties {
            let entry = fields.entry(key.clone()).or_insert_with(|| {
                let mut field = field.clone();
                if let Some(map) = field.as_object_mut() {
                    // Every key is optional; `null` is no TOML value.
                    map.remove("default");
                }
                field["x-kinds"] = json!([]);
                field
            });
            if let Some(kinds) = entry["x-kinds"].as_array_mut() {
                kinds.push(json!(k.name()));
            }
        }
    }
    fields
}

impl CheckList {
    /// Adds every check kind's keys to a check table's schema (the node the config's
    /// `x-check-table` tag marks: the config schema's definition, or the CRD's inlined
    /// copies), lists the kinds as `kind`'s values, and removes the tag.
    pub fn with_check_fields(&self, table: &mut Value, settings: SchemaSettings) {
        if let Some(map) = table.as_object_mut() {
            map.remove("x-check-table");
        }
        let fields = check_fields_schema(self, settings);
        if let Some(properties) = table["properties"].as_object_mut() {
            if let Some(kind) = properties.get_mut("kind") {
                kind["enum"] = json!(self.kinds());
            }
            properties.extend(fields);
        }
    }

    /// Parses `SCHEME://HOST[:PORT][REST]`, where a scheme is a kind name, or `HOST:PORT`
    /// (a TCP connect); IPv6 addresses in brackets.
    pub fn parse_url(&self, text: &str) -> Result<UrlTarget, UrlError> {
        read_url(self, text).map_err(UrlError)
    }
}

/// What `health-orchestrator probe` probes: a host (a name or an address), a port and the
/// check.
#[derive(Debug, PartialEq)]
pub struct UrlTarget {
    /// The host as written (an address or a name to resolve).
    pub host: String,
    /// The port.
    pub port: u16,
    /// The check: its kind and the keys the URL sets.
    pub check: ho_config::CheckOverrides,
}

/// [`CheckList::parse_url`] with its reason as text.
fn read_url(list: &CheckList, text: &str) -> Result<UrlTarget, String> {
    let (kind, rest) = match text.split_once("://") {
        Some((scheme, rest)) => match list.find(scheme) {
            Some(kind) => (kind, rest),
            None => {
                let names = list.kinds();
                return Err(format!(
                    "unsupported scheme {scheme:?}: use {} or HOST:PORT",
                    names.join(", ")
                ));
            }
        },
        None => (list.find("tcp").ok_or("give a SCHEME://")?, text),
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, rest) = rest.split_at(end);
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or("missing ']' in IPv6 address")?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match (port, kind.url_port()) {
        (Some(p), _) if !kind.uses_port() => {
            return Err(format!("an {} target has no port: {p:?}", kind.name()))
        }
        (Some(p), _) => p.parse().map_err(|_| format!("bad port {p:?}"))?,
        (None, Some(default)) => default,
        (None, None) => return Err(format!("a {} target needs a port: HOST:PORT", kind.name())),
    };
    if host.is_empty() {
        return Err(format!("missing host in {text:?}"));
    }
    let mut check = ho_config::CheckOverrides::of_kind(kind.name());
    check.settings = kind.url_keys(rest).map_err(|UrlError(e)| e)?;
    Ok(UrlTarget {
        host: host.to_owned(),
        port,
        check,
    })
}

/// A probe target URL that is refused; the text says why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UrlError(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_their_kind_host_port_and_keys() {
        let t = BUILT_IN.parse_url("http://127.0.0.1:8080/healthz").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("127.0.0.1", 8080));
        assert_eq!(t.check.kind.as_deref(), Some("http"));
        assert_eq!(
            t.check.settings["path"],
            figment::value::Value::from("/healthz")
        );
        let t = BUILT_IN.parse_url("https://[::1]/ready").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 443));
        assert_eq!(t.check.kind.as_deref(), Some("https"));
        let t = BUILT_IN.parse_url("10.0.0.1:5432").unwrap();
        assert_eq!((t.port, t.check.kind.as_deref()), (5432, Some("tcp")));
        assert!(t.check.settings.is_empty());
        assert!(BUILT_IN.parse_url("10.0.0.1").is_err());
        assert!(BUILT_IN.parse_url("tcp://10.0.0.1:5432/x").is_err());
        assert!(BUILT_IN.parse_url("ftp://x/").is_err());
    }

    #[test]
    fn every_kind_reads_its_keys_and_only_http_kinds_read_path() {
        let checks = BUILT_IN;
        assert!(checks.reads("http").iter().any(|k| k == "path"));
        assert!(checks.reads("https").iter().any(|k| k == "insecure"));
        assert!(!checks.reads("http").iter().any(|k| k == "insecure"));
        assert!(checks.reads("tcp").is_empty());
        let fields = check_fields_schema(&BUILT_IN, SchemaSettings::draft07());
        assert_eq!(
            fields["insecure"]["x-kinds"],
            json!(["https", "grpcs", "feed"])
        );
        assert_eq!(fields["path"]["x-kinds"], json!(["http", "https"]));
    }
}
