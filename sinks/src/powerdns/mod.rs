//! `kind = "powerdns"`: the PowerDNS Authoritative HTTP API.
//!
//! Writes go in rounds ([`crate::rounds`]): the tenants due while a round runs wait and go
//! out together, so a gateway shared by many tenants failing costs one read of the zone and
//! one `PATCH` for all of them, never concurrent PATCHes contending on the back end's
//! database (on the SQLite back end those fail with HTTP 500). A round reads the zone,
//! computes which of each tenant's rrsets (one A and one AAAA per domain) differ from the
//! desired state, and sends them in one `PATCH /api/v1/servers/{server_id}/zones/{zone}`: `REPLACE` with the tenant's TTL and an
//! ownership comment, or `DELETE` when a family has no address left. An rrset that exists
//! without this orchestrator's ownership comment belongs to someone else: it is left alone
//! and reported, unless `adopt = true`. Reading first makes every write idempotent and lets
//! the periodic reconcile repair drift. With `lua = true`, `weighted` and `geo` tenants get
//! one `LUA` rrset per domain instead (see [`render`]), and stale records of the other
//! form are deleted.
//!
//! PowerDNS 5.1 and later refuse every change to LUA records through the API unless the
//! server sets `enable-lua-record-updates=yes` (HTTP 422, "update of Lua records is not
//! allowed"). A `lua = true` sink reads the server's settings before its first write and
//! fails with the setting to change when they refuse; a refusal met on a write (an adopted
//! name's foreign LUA records deleted) is explained the same way.
//!
//! The server's settings also say where it answers DNS ([`port`]): the answer canary asks
//! there unless the sink's `canary.address` names another server.

pub mod config;

mod api;
mod port;
mod render;
mod reports;

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use ho_config::TlsCheck;

use self::config::PowerDnsConfig;
use ho_engine::sink::listing::DnsPort;
use ho_engine::sink::reports::ReportStore;
use ho_engine::sink::{Applied, Sink, SinkError, SinkFuture};
use ho_engine::snapshot::TenantSnapshot;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, StatusCode};

use crate::http::{error_for, Answer, HttpClient};
use crate::rounds::{Done, Round, RoundFuture, RoundResults, RoundWriter, Rounds};
use api::{Comment, PatchBody, Record, RrSet, Zone, ACCOUNT};
use ho_engine::secret::Secret;
use ho_engine::sink::SetupError;

/// Writes tenants' rrsets into one PowerDNS zone.
pub struct PowerDnsSink {
    inner: Arc<Inner>,
    rounds: Arc<Rounds<Writer>>,
}

/// The round writer: every waiting tenant in one read and one PATCH.
struct Writer(Arc<Inner>);

impl RoundWriter for Writer {
    fn write<'a>(&'a mut self, round: &'a Round, _done: &'a mut Done) -> RoundFuture<'a> {
        Box::pin(self.0.write_round(round))
    }
}

struct Inner {
    client: HttpClient,
    zone_url: String,
    /// `.../servers/{server_id}/config`: the server's settings.
    config_url: String,
    /// The settings were read and take LUA changes (`lua = true` only).
    lua_checked: std::sync::atomic::AtomicBool,
    zone: String,
    server_id: String,
    api_key: Secret,
    adopt: bool,
    lua: bool,
    mark: String,
}

impl PowerDnsSink {
    /// Builds the sink; fails if the API key cannot be read.
    pub fn new(config: &PowerDnsConfig, owner_id: &str) -> Result<PowerDnsSink, SetupError> {
        let api_key = Secret::load(
            config.api_key_file.as_deref(),
            config.api_key_env.as_deref(),
        )
        .map_err(SetupError::secret("api key"))?;
        let zone = format!("{}.", config.zone);
        let trust = TlsCheck::verify_with(None);
        let server_url = format!(
            "{}/api/v1/servers/{}",
            config.url.trim_end_matches('/'),
            config.server_id
        );
        let inner = Arc::new(Inner {
            client: HttpClient::new(&trust, config.timeout)?,
            config_url: format!("{server_url}/config"),
            lua_checked: Default::default(),
            zone_url: format!("{server_url}/zones/{zone}"),
            zone,
            server_id: config.server_id.clone(),
            api_key,
            adopt: config.adopt,
            lua: config.lua,
            mark: format!("managed by health-orchestrator, owner {owner_id}"),
        });
        Ok(PowerDnsSink {
            rounds: Arc::new(Rounds::new(Writer(inner.clone()))),
            inner,
        })
    }
}

impl Sink for PowerDnsSink {
    fn kind(&self) -> &'static str {
        "powerdns"
    }

    fn reports(&self) -> Option<Arc<dyn ReportStore>> {
        Some(Arc::new(reports::PowerDnsReports(self.inner.clone())))
    }

    fn dns_port(&self) -> Option<Arc<dyn DnsPort>> {
        Some(Arc::new(port::Port(self.inner.clone())))
    }

    fn apply(&self, snapshot: Arc<TenantSnapshot>) -> SinkFuture {
        let rounds = self.rounds.clone();
        Box::pin(async move { rounds.apply(snapshot).await })
    }
}

impl Inner {
    fn request(&self, method: Method, url: &str, body: Bytes) -> Request<Full<Bytes>> {
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = method;
        *request.uri_mut() = url.parse().expect("validated URL");
        let headers = request.headers_mut();
        headers.insert(
            "X-API-Key",
            HeaderValue::from_str(self.api_key.expose()).unwrap_or(HeaderValue::from_static("")),
        );
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        request
    }

    /// A specific message for the answers operators get wrong most.
    fn explain(&self, status: StatusCode, what: &str) -> String {
        match status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                format!("PowerDNS rejected the API key ({what})")
            }
            StatusCode::NOT_FOUND => {
                format!(
                    "zone {} not found on server {} ({what})",
                    self.zone, self.server_id
                )
            }
            StatusCode::UNPROCESSABLE_ENTITY => format!("PowerDNS rejected the change ({what})"),
            _ => what.to_owned(),
        }
    }

    /// Sends one API request to the zone; a non-success answer becomes the specific error.
    async fn call(&self, method: Method, body: Bytes, what: &str) -> Result<Answer, SinkError> {
        self.call_at(method, &self.zone_url, body, what).await
    }

    /// Sends one API request to `url`; a non-success answer becomes the specific error.
    async fn call_at(
        &self,
        method: Method,
        url: &str,
        body: Bytes,
        what: &str,
    ) -> Result<Answer, SinkError> {
        let answer = self
            .client
            .send(self.request(method, url, body), what)
            .await?;
        if !answer.status.is_success() {
            let detail = api::error_text(&answer.body);
            if detail.contains("of Lua records is not allowed") {
                return Err(SinkError::permanent(format!(
                    "{what}: PowerDNS refuses changes to LUA records ({detail}): PowerDNS 5.1 and later take them through the API only with enable-lua-record-updates=yes in the server's settings"
                )));
            }
            return Err(error_for(
                &answer,
                &self.explain(answer.status, what),
                &detail,
            ));
        }
        Ok(answer)
    }

    /// With `lua = true`, once: the server's settings must take changes to LUA records
    /// (`enable-lua-record-updates`, PowerDNS 5.1 and later; older servers lack the setting
    /// and take them).
    async fn check_lua_updates(&self) -> Result<(), SinkError> {
        use std::sync::atomic::Ordering;
        if !self.lua || self.lua_checked.load(Ordering::Relaxed) {
            return Ok(());
        }
        let what = format!("GET {}", self.config_url);
        let answer = self
            .call_at(Method::GET, &self.config_url, Bytes::new(), &what)
            .await?;
        let settings: Vec<api::ConfigSetting> = serde_json::from_slice(&answer.body)
            .map_err(|e| SinkError::retriable(format!("{what}: unexpected answer: {e}")))?;
        let refused = settings
            .iter()
            .any(|s| s.name == "enable-lua-record-updates" && s.value != "yes");
        if refused {
            return Err(SinkError::permanent(format!(
                "lua = true, but PowerDNS refuses changes to LUA records (enable-lua-record-updates=no, the default since PowerDNS 5.1): set enable-lua-record-updates=yes in the server's settings, or lua = false (weighted and geo tenants then need another sink) ({what})"
            )));
        }
        self.lua_checked.store(true, Ordering::Relaxed);
        Ok(())
    }

    async fn read_zone(&self) -> Result<Zone, SinkError> {
        let what = format!("GET zone {}", self.zone);
        let answer = self.call(Method::GET, Bytes::new(), &what).await?;
        serde_json::from_slice(&answer.body)
            .map_err(|e| SinkError::retriable(format!("{what}: unexpected answer: {e}")))
    }

    /// One round: the zone read once, every tenant's changes in one PATCH; each tenant's
    /// result (a tenant whose names hold someone else's rrsets fails alone, naming them).
    async fn write_round(&self, round: &Round) -> Result<RoundResults, SinkError> {
        self.check_lua_updates().await?;
        let zone = self.read_zone().await?;
        let existing: BTreeMap<(String, &str), &RrSet> = zone
            .rrsets
            .iter()
            .map(|r| ((r.name.to_ascii_lowercase(), r.rtype.as_str()), r))
            .collect();
        let mut changes = Vec::new();
        let mut planned = BTreeMap::new();
        for (tenant, snapshot) in round {
            let (ours, foreign) = self.plan(snapshot, &zone, &existing);
            planned.insert(tenant.clone(), (!ours.is_empty(), foreign));
            changes.extend(ours);
        }
        if !changes.is_empty() {
            let what = format!("PATCH zone {} ({} rrsets)", self.zone, changes.len());
            let body = serde_json::to_vec(&PatchBody { rrsets: changes }).expect("serializable");
            self.call(Method::PATCH, body.into(), &what).await?;
        }
        Ok(planned
            .into_iter()
            .map(|(tenant, (changed, foreign))| {
                let result = if !foreign.is_empty() {
                    Err(SinkError::permanent(format!(
                        "left alone because they exist without this orchestrator's ownership comment: {}; nothing is written at those names, so PowerDNS never serves ours beside them; set adopt = true to take them over",
                        foreign.join(", ")
                    )))
                } else if changed {
                    Ok(Applied::Changed)
                } else {
                    Ok(Applied::Unchanged)
                };
                (tenant, result)
            })
            .collect())
    }

    /// The rrsets `snapshot` changes in `zone` (indexed as `existing`), and the names left
    /// alone because someone else's rrsets are there.
    fn plan(
        &self,
        snapshot: &TenantSnapshot,
        zone: &Zone,
        existing: &BTreeMap<(String, &str), &RrSet>,
    ) -> (Vec<RrSet>, Vec<String>) {
        let mut changes = Vec::new();
        let mut foreign = Vec::new();
        let ttl = snapshot.ttl.as_secs().max(1);
        // Below the apex and at it (where a CNAME cannot be): computed once per snapshot.
        let below = render::wanted(snapshot, self.lua, false);
        let at_apex = render::wanted(snapshot, self.lua, true);
        for domain in &snapshot.domains {
            let name = format!("{domain}.");
            let wanted = if name == self.zone { &at_apex } else { &below };
            // A name is written whole or not at all: PowerDNS serves every A/AAAA, LUA and
            // CNAME rrset of a name together, so ours beside someone else's would be a
            // mixed answer.
            let mut ours = Vec::new();
            let mut theirs = Vec::new();
            for (rtype, wanted) in wanted {
                let rtype = *rtype;
                let current = existing.get(&(name.clone(), rtype)).copied();
                let mine = current.is_some_and(|r| self.owned(r));
                if current.is_some() && !mine && !self.adopt {
                    theirs.push(format!("{name} {rtype}"));
                    continue;
                }
                match current {
                    None if wanted.is_empty() => {}
                    Some(_) if wanted.is_empty() => ours.push(RrSet::delete(&name, rtype)),
                    Some(r) if mine && r.ttl == Some(ttl) && &r.contents() == wanted => {}
                    _ => ours.push(self.replace(&name, rtype, ttl, wanted)),
                }
            }
            let beside = zone.rrsets.iter().filter(|r| {
                r.name.eq_ignore_ascii_case(&name)
                    && matches!(r.rtype.as_str(), "A" | "AAAA" | "LUA" | "CNAME")
                    && !wanted.iter().any(|(t, _)| *t == r.rtype)
            });
            for r in beside {
                if self.owned(r) || self.adopt {
                    // Before ours: PowerDNS checks each rrset of a PATCH against the zone as
                    // it goes, and an A beside a CNAME still there is refused.
                    ours.insert(0, RrSet::delete(&name, &r.rtype));
                } else {
                    theirs.push(format!("{name} {}", r.rtype));
                }
            }
            if theirs.is_empty() {
                changes.extend(ours);
            } else {
                foreign.extend(theirs);
            }
        }
        (changes, foreign)
    }

    /// Whether `r` carries this orchestrator's mark.
    fn owned(&self, r: &RrSet) -> bool {
        r.comments
            .iter()
            .any(|c| c.account == ACCOUNT && c.content == self.mark)
    }

    /// A REPLACE of `name`'s `rtype` rrset with `contents`, marked as ours.
    fn replace(&self, name: &str, rtype: &str, ttl: u64, contents: &[String]) -> RrSet {
        RrSet {
            name: name.to_owned(),
            rtype: rtype.into(),
            ttl: Some(ttl),
            changetype: Some("REPLACE".into()),
            records: contents
                .iter()
                .map(|c| Record {
                    content: c.clone(),
                    disabled: false,
                })
                .collect(),
            comments: vec![Comment {
                content: self.mark.clone(),
                account: ACCOUNT.into(),
            }],
        }
    }
}
