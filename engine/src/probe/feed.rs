//! The `feed` kind: another monitor decides (PowerDNS `ifurlextup`, gdnsd `extfile`, NS1
//! data feeds). The feed is a JSON object of address -> health, served over HTTP or kept
//! in a file:
//!
//! ```json
//! {"192.0.2.10": "up", "192.0.2.11": "down", "192.0.2.12": true, "192.0.2.13": {"up": false},
//!  "192.0.2.14": {"up": true, "weight": 30}}
//! ```
//!
//! Every endpoint checked against one feed shares one fetch per `interval`: each probe
//! reads the latest answer (fetching it first when it is older than the check's interval)
//! and judges its own address: `up` is healthy, `down` unhealthy, an address the feed does
//! not list unhealthy (the feed speaks for every endpoint pointed at it). A feed that
//! stops answering is not "everything down": its last answer counts for `max_age`, then
//! the probes give no verdict (a local failure, never counted), so each endpoint keeps its
//! last verdict and, at start-up, the tenant's fail-open rules apply.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use ho_config::{ResolvedCheck, Target, TlsCheck};
use http_body_util::{BodyExt, Empty, Limited};
use hyper::Uri;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::registry::{CheckSettings, Prepare, Problems};
use super::weight::{ReportedWeight, WeightSettings};
use super::Progress;
use super::{
    Attempt, Dial, Failure, KeptConnection, PreparedProbe, ProbeContext, ProbeError, ProbeKind,
};

/// The largest feed read: 4 MiB (a few hundred thousand addresses).
const MAX_FEED: usize = 4 << 20;

/// `kind = "feed"`: healthy while the feed says so.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FeedSettings {
    /// feed: `http://` or `https://host:port/path` serving the JSON object (or `file`
    /// instead).
    pub url: Option<String>,
    /// feed: a file holding the JSON object, rewritten by another tool (or `url`).
    pub file: Option<PathBuf>,
    /// feed: how long the last answer counts when the feed stops answering (default 1m).
    #[serde(default, with = "humantime_serde::option")]
    #[schemars(with = "Option<String>")]
    pub max_age: Option<Duration>,
    /// feed: trust this CA file (PEM) for an `https://` feed instead of the system roots.
    pub ca_file: Option<PathBuf>,
    /// feed: accept any certificate from an `https://` feed (logged at start).
    pub insecure: Option<bool>,
    /// Read each entry's `"weight"` for weighted answers: `{ from = "feed" }` (the
    /// default), `min`, `max`, `band` as for http.
    pub reported_weight: Option<WeightSettings>,
}

/// Where a feed is read.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub enum Source {
    /// Fetched with an HTTP GET.
    Url(String),
    /// Read from a file.
    File(PathBuf),
}

/// A feed check, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct FeedCheck {
    /// Where the feed is read.
    pub source: Source,
    /// How long its last answer counts.
    pub max_age: Duration,
    /// Whether and how entries' weights are read.
    pub reported_weight: Option<ReportedWeight>,
    /// Whom an `https://` feed must prove to be.
    pub tls: Option<TlsCheck>,
}

impl ResolvedCheck for FeedCheck {
    fn kind(&self) -> &'static str {
        FeedSettings::KIND
    }

    fn url(&self, target: SocketAddr) -> String {
        format!("feed://{}", target.ip())
    }

    fn unverified_tls(&self) -> bool {
        self.tls.as_ref().is_some_and(|t| t.insecure)
    }
}

impl CheckSettings for FeedSettings {
    const KIND: &'static str = "feed";
    const DEFAULT_PORT: Option<u16> = None;
    const URL_PORT: Option<u16> = Some(0);
    const USES_PORT: bool = false;
    type Resolved = FeedCheck;

    fn resolve(self, problems: &mut Problems<'_>) -> Option<FeedCheck> {
        let source = match (self.url, self.file) {
            (Some(url), None) => {
                match url.parse::<Uri>() {
                    Ok(u)
                        if matches!(u.scheme_str(), Some("http" | "https"))
                            && u.host().is_some() => {}
                    _ => problems.push(
                        "url",
                        format!("\"{url}\" is not an http:// or https:// URL (or use file)"),
                    ),
                }
                Source::Url(url)
            }
            (None, Some(file)) => Source::File(file),
            (Some(_), Some(_)) => {
                problems.push("url", "set url or file, not both");
                return None;
            }
            (None, None) => {
                problems.push("url", "missing: the feed's url (or its file)");
                return None;
            }
        };
        let max_age = self.max_age.unwrap_or(Duration::from_secs(60));
        if max_age.is_zero() {
            problems.push("max_age", "must be more than 0");
        }
        let reported_weight = self
            .reported_weight
            .and_then(|w| w.resolve(&["feed"], problems));
        let https = matches!(&source, Source::Url(u) if u.starts_with("https://"));
        let tls = https.then(|| TlsCheck {
            insecure: self.insecure.unwrap_or(false),
            ca_file: self.ca_file.clone(),
            client_cert: None,
            client_key: None,
        });
        if !https {
            for (key, set) in [
                ("ca_file", self.ca_file.is_some()),
                ("insecure", self.insecure.is_some()),
            ] {
                if set {
                    problems.push(key, "only for an https:// feed");
                }
            }
        }
        Some(FeedCheck {
            source,
            max_age,
            reported_weight,
            tls,
        })
    }
}

/// The latest answer of one feed, shared by every probe reading it.
#[derive(Default)]
struct FeedState {
    /// The last answer that parsed, and when it was fetched.
    answer: Option<(Instant, Arc<HashMap<IpAddr, Entry>>)>,
    /// When the last fetch was tried, and why it failed, if it did.
    tried: Option<(Instant, Option<String>)>,
}

/// The feeds of one engine, by source and TLS trust (one URL trusted two ways is two
/// feeds): each fetched once per interval whatever number of endpoints read it.
#[derive(Clone, Default)]
pub struct Feeds(Arc<Mutex<HashMap<FeedKey, SharedState>>>);

/// A feed's identity: where it is read and whom it must prove to be.
type FeedKey = (Source, Option<TlsCheck>);

/// A feed's latest answer, shared by the probes reading it.
type SharedState = Arc<tokio::sync::Mutex<FeedState>>;

impl Feeds {
    fn of(&self, check: &FeedCheck) -> SharedState {
        self.0
            .lock()
            .expect("not poisoned")
            .entry((check.source.clone(), check.tls.clone()))
            .or_default()
            .clone()
    }
}

/// The probe of one endpoint against its feed.
struct FeedProbe {
    source: Source,
    state: SharedState,
    max_age: Duration,
    /// How old an answer may be before a probe fetches it again (the check's interval).
    refresh: Duration,
    /// How long a fetch may take: inside the probe's timeout, so a slow feed is a failed
    /// fetch (the last answer still counts), never a timed-out probe of the endpoint.
    fetch_timeout: Duration,
    /// How entries' weights are read, when they are.
    weight: Option<ReportedWeight>,
    /// How an `https://` feed is verified.
    tls: Option<Arc<rustls::ClientConfig>>,
}

/// What a feed says of one address.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Entry {
    up: bool,
    /// Its `"weight"`, if given.
    weight: Option<f64>,
}

impl FeedProbe {
    async fn judge(&self, dial: &Dial, progress: &Progress) -> Result<(), Failure> {
        let timeout = self.fetch_timeout;
        let mut state = self.state.lock().await;
        let now = Instant::now();
        if state
            .tried
            .as_ref()
            .is_none_or(|(at, _)| now.duration_since(*at) >= self.refresh)
        {
            let fetched = tokio::time::timeout(timeout, fetch(&self.source, self.tls.as_ref()))
                .await
                .unwrap_or_else(|_| Err(format!("no answer within {timeout:?}")));
            match fetched {
                Ok(map) => {
                    state.answer = Some((now, Arc::new(map)));
                    state.tried = Some((now, None));
                }
                Err(e) => state.tried = Some((now, Some(e))),
            }
        }
        let error = state.tried.as_ref().and_then(|(_, e)| e.clone());
        let answer = state
            .answer
            .as_ref()
            .filter(|(at, _)| now.duration_since(*at) < self.max_age)
            .map(|(_, map)| map.clone());
        drop(state);
        let Some(map) = answer else {
            return Err(Failure::Local(format!(
                "feed {} has no answer younger than {} ({}): no verdict",
                self.source,
                humantime::format_duration(self.max_age),
                error.unwrap_or_else(|| "not read yet".into())
            )));
        };
        match map.get(&dial.addr.ip()) {
            Some(Entry { up: true, weight }) => {
                if let (Some(raw), Some(_)) = (weight, &self.weight) {
                    progress.report_weight(*raw);
                }
                Ok(())
            }
            Some(Entry { up: false, .. }) => Err(Failure::Answer {
                label: "feed_down",
                detail: format!("feed {} says down", self.source),
            }),
            None => Err(Failure::Answer {
                label: "feed_missing",
                detail: format!("feed {} does not list {}", self.source, dial.addr.ip()),
            }),
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Url(u) => f.write_str(u),
            Source::File(p) => write!(f, "{}", p.display()),
        }
    }
}

impl ProbeKind for FeedProbe {
    fn attempt<'a>(
        &'a self,
        dial: &'a Dial,
        progress: &'a Progress,
        _kept: &'a mut Option<KeptConnection>,
    ) -> Attempt<'a> {
        Box::pin(self.judge(dial, progress))
    }

    fn reported_weight(&self) -> Option<&ReportedWeight> {
        self.weight.as_ref()
    }
}

impl Prepare for FeedCheck {
    fn prepare(
        &self,
        target: &Target,
        ctx: &mut ProbeContext,
    ) -> Result<PreparedProbe, ProbeError> {
        Ok(PreparedProbe::new(FeedProbe {
            state: ctx.feeds.of(self),
            source: self.source.clone(),
            max_age: self.max_age,
            refresh: target.check.timing.interval,
            fetch_timeout: target.check.timing.timeout * 3 / 4,
            weight: self.reported_weight.clone(),
            tls: match &self.tls {
                Some(trust) => Some(Arc::new(crate::tls_client::client_config(trust)?)),
                None => None,
            },
        }))
    }
}

/// The feed's map of address -> up, or why it could not be read.
async fn fetch(
    source: &Source,
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> Result<HashMap<IpAddr, Entry>, String> {
    let body = match source {
        Source::File(path) => tokio::fs::read(path)
            .await
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?,
        Source::Url(url) => get(url, tls).await?,
    };
    parse(&body)
}

/// The body of `GET url` (http, or https verified with `tls`; status 200, at most
/// [`MAX_FEED`] bytes).
async fn get(url: &str, tls: Option<&Arc<rustls::ClientConfig>>) -> Result<Vec<u8>, String> {
    let uri: Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
    let host = uri.host().ok_or_else(|| format!("{url}: no host"))?;
    let bare = host.trim_matches(['[', ']']);
    let https = uri.scheme_str() == Some("https");
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let stream = tokio::net::TcpStream::connect((bare, port))
        .await
        .map_err(|e| format!("cannot connect to {host}:{port}: {e}"))?;
    match (https, tls) {
        (true, Some(tls)) => {
            let name = rustls::pki_types::ServerName::try_from(bare.to_owned())
                .map_err(|e| format!("{url}: {e}"))?;
            let stream = tokio_rustls::TlsConnector::from(tls.clone())
                .connect(name, stream)
                .await
                .map_err(|e| format!("{url}: TLS: {e}"))?;
            exchange(url, &uri, host, stream).await
        }
        (true, None) => Err(format!("{url}: no TLS settings")),
        (false, _) => exchange(url, &uri, host, stream).await,
    }
}

/// `GET uri` over `stream`: the body of a 200 answer.
async fn exchange<S>(url: &str, uri: &Uri, host: &str, stream: S) -> Result<Vec<u8>, String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| format!("{url}: {e}"))?;
    let request = hyper::Request::get(uri.path_and_query().map_or("/", |p| p.as_str()))
        .header(hyper::header::HOST, host)
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("{url}: {e}"))?;
    let exchange = async {
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        if response.status() != hyper::StatusCode::OK {
            return Err(format!("{url} answered {}", response.status()));
        }
        let body = Limited::new(response.into_body(), MAX_FEED)
            .collect()
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        Ok(body.to_bytes().to_vec())
    };
    tokio::select! {
        body = exchange => body,
        ended = connection => Err(format!("{url}: connection ended early ({ended:?})")),
    }
}

/// The feed's JSON: an object of address -> `"up"`/`"down"`, `true`/`false` or
/// `{"up": bool}`, the object with an optional `"weight"` (a number, not negative).
fn parse(body: &[u8]) -> Result<HashMap<IpAddr, Entry>, String> {
    let object: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(body).map_err(|e| format!("not a JSON object: {e}"))?;
    let mut map = HashMap::with_capacity(object.len());
    for (key, value) in object {
        let ip: IpAddr = key
            .parse()
            .map_err(|_| format!("\"{key}\" is not an IP address"))?;
        let mut weight = None;
        let up = match &value {
            serde_json::Value::Bool(b) => *b,
            serde_json::Value::String(s) if s.eq_ignore_ascii_case("up") => true,
            serde_json::Value::String(s) if s.eq_ignore_ascii_case("down") => false,
            serde_json::Value::Object(o) => {
                if let Some(w) = o.get("weight") {
                    weight = Some(w.as_f64().filter(|w| *w >= 0.0).ok_or_else(|| {
                        format!("{key}: \"weight\" {w} is not a number of 0 or more")
                    })?);
                }
                match o.get("up") {
                    Some(serde_json::Value::Bool(b)) => *b,
                    _ => return Err(format!("{key}: an object needs \"up\": true or false")),
                }
            }
            other => {
                return Err(format!(
                    "{key}: {other} is not up/down, true/false or {{\"up\": bool}}"
                ))
            }
        };
        map.insert(ip, Entry { up, weight });
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_forms_parse_and_anything_else_is_refused() {
        let map = parse(
            br#"{"192.0.2.10": "up", "192.0.2.11": "DOWN", "192.0.2.12": true, "2001:db8::1": {"up": false}}"#,
        )
        .unwrap();
        let up = |a: &str| map.get(&a.parse::<IpAddr>().unwrap()).map(|e| e.up);
        assert_eq!(up("192.0.2.10"), Some(true));
        assert_eq!(up("192.0.2.11"), Some(false));
        assert_eq!(up("192.0.2.12"), Some(true));
        assert_eq!(up("2001:db8::1"), Some(false));
        assert!(parse(b"[1, 2]").unwrap_err().contains("not a JSON object"));
        assert!(parse(br#"{"gw-1": "up"}"#)
            .unwrap_err()
            .contains("not an IP address"));
        assert!(parse(br#"{"192.0.2.1": 3}"#)
            .unwrap_err()
            .contains("is not up/down"));
        let weighted = parse(br#"{"192.0.2.1": {"up": true, "weight": 30}}"#).unwrap();
        assert_eq!(weighted.values().next().unwrap().weight, Some(30.0));
        assert!(parse(br#"{"192.0.2.1": {"up": true, "weight": -1}}"#)
            .unwrap_err()
            .contains("is not a number of 0 or more"));
    }
}
