//! moto's Route53 server (from PyPI, installed by `.ci/test` into its own virtualenv; path in
//! `MOTO_SERVER`) on its own loopback address, and a small proxy in front of it that can
//! answer `Throttling` or 503 the way Route53 does. No real Route53 can be used in tests;
//! moto implements the Route53 REST API with real record-set semantics (routing policies,
//! set identifiers, pagination). Where it is lenient (it accepts deleting a record set that
//! does not exist, which Route53 refuses), the sink does not rely on it.

use std::convert::Infallible;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_credential_types::Credentials;
use aws_sdk_route53::types::ResourceRecordSet;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};

use crate::harness::{loopback_ip, python_tool, LIMIT};

const PORT: u16 = 5000;

/// A running `moto_server`; killed on drop.
pub struct Moto {
    /// Base URL of its API.
    pub url: String,
    child: Child,
}

/// Region and fixed test credentials, as the engine's Route53 sinks get them in tests.
pub fn sdk_config() -> SdkConfig {
    SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
            "testing", "testing", None, None, "tests",
        )))
        .build()
}

impl Moto {
    /// Starts moto on a loopback address of its own.
    pub async fn start() -> Moto {
        let bin = python_tool("MOTO_SERVER", "moto_server");
        assert!(
            std::path::Path::new(&bin).exists(),
            "{bin} is missing: run the test command (bash .ci/test), which installs moto[server] into a virtualenv"
        );
        let ip = loopback_ip();
        let child = Command::new(&bin)
            .args(["-H", &ip.to_string(), "-p", &PORT.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting moto_server");
        let moto = Moto {
            url: format!("http://{ip}:{PORT}"),
            child,
        };
        let start = tokio::time::Instant::now();
        while tokio::net::TcpStream::connect((ip, PORT)).await.is_err() {
            assert!(start.elapsed() < LIMIT * 3, "moto_server did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        moto
    }

    /// An SDK client for checking what the server holds.
    pub fn client(&self) -> aws_sdk_route53::Client {
        let conf = aws_sdk_route53::config::Builder::from(&sdk_config())
            .endpoint_url(&self.url)
            .http_client(aws_smithy_http_client::Builder::new().build_http())
            .build();
        aws_sdk_route53::Client::from_conf(conf)
    }

    /// Creates a hosted zone and returns its id (without `/hostedzone/`).
    pub async fn create_zone(&self, name: &str) -> String {
        let out = self
            .client()
            .create_hosted_zone()
            .name(name)
            .caller_reference(name)
            .send()
            .await
            .unwrap();
        out.hosted_zone()
            .unwrap()
            .id()
            .trim_start_matches("/hostedzone/")
            .to_string()
    }

    /// Every record set of the zone (one page: the tests' zones are small).
    async fn record_sets(&self, zone: &str) -> Vec<ResourceRecordSet> {
        let out = self
            .client()
            .list_resource_record_sets()
            .hosted_zone_id(zone)
            .send()
            .await
            .unwrap();
        out.resource_record_sets().to_vec()
    }

    /// Every A/AAAA/TXT record set of the zone, as "NAME TYPE [id] [routing] values".
    pub async fn records(&self, zone: &str) -> Vec<String> {
        let mut lines: Vec<String> = self
            .record_sets(zone)
            .await
            .iter()
            .filter(|r| matches!(r.r#type().as_str(), "A" | "AAAA" | "CNAME" | "TXT"))
            .map(describe)
            .collect();
        lines.sort();
        lines
    }

    /// Creates a record set directly, as another tool would.
    pub async fn put(&self, zone: &str, set: ResourceRecordSet) {
        self.change(zone, aws_sdk_route53::types::ChangeAction::Create, set)
            .await;
    }

    /// Deletes one record set directly, as another tool would.
    pub async fn remove(&self, zone: &str, set: ResourceRecordSet) {
        self.change(zone, aws_sdk_route53::types::ChangeAction::Delete, set)
            .await;
    }

    async fn change(
        &self,
        zone: &str,
        action: aws_sdk_route53::types::ChangeAction,
        set: ResourceRecordSet,
    ) {
        use aws_sdk_route53::types::{Change, ChangeBatch};
        self.client()
            .change_resource_record_sets()
            .hosted_zone_id(zone)
            .change_batch(
                ChangeBatch::builder()
                    .changes(
                        Change::builder()
                            .action(action)
                            .resource_record_set(set)
                            .build()
                            .unwrap(),
                    )
                    .build()
                    .unwrap(),
            )
            .send()
            .await
            .unwrap();
    }
}

/// An A record set of `name` (fully qualified, with the trailing dot) holding `address`,
/// TTL 60, as another tool writes one; routing is the caller's to add.
pub fn a_set(
    name: &str,
    address: &str,
) -> aws_sdk_route53::types::builders::ResourceRecordSetBuilder {
    use aws_sdk_route53::types::{ResourceRecord, ResourceRecordSet, RrType};
    ResourceRecordSet::builder()
        .name(name)
        .r#type(RrType::A)
        .ttl(60)
        .resource_records(ResourceRecord::builder().value(address).build().unwrap())
}

impl Moto {
    /// Deletes every record set of type `rtype` at `name`, as another tool would.
    pub async fn delete(&self, zone: &str, name: &str, rtype: &str) {
        use aws_sdk_route53::types::{Change, ChangeAction, ChangeBatch};
        let changes: Vec<Change> = self
            .record_sets(zone)
            .await
            .iter()
            .filter(|r| r.name().trim_end_matches('.') == name && r.r#type().as_str() == rtype)
            .map(|r| {
                Change::builder()
                    .action(ChangeAction::Delete)
                    .resource_record_set(r.clone())
                    .build()
                    .unwrap()
            })
            .collect();
        assert!(!changes.is_empty(), "no {rtype} at {name}");
        self.client()
            .change_resource_record_sets()
            .hosted_zone_id(zone)
            .change_batch(
                ChangeBatch::builder()
                    .set_changes(Some(changes))
                    .build()
                    .unwrap(),
            )
            .send()
            .await
            .unwrap();
    }
}

/// "NAME TYPE id=.. weight=.. geo=.. multivalue alias=TARGET@ZONE values".
pub fn describe(r: &ResourceRecordSet) -> String {
    let mut values: Vec<&str> = r.resource_records().iter().map(|v| v.value()).collect();
    values.sort();
    let mut line = format!("{} {}", r.name(), r.r#type().as_str());
    if let Some(id) = r.set_identifier() {
        line.push_str(&format!(" id={id}"));
    }
    if let Some(w) = r.weight() {
        line.push_str(&format!(" weight={w}"));
    }
    if let Some(g) = r.geo_location() {
        line.push_str(&format!(
            " geo={}{}",
            g.country_code().unwrap_or(""),
            g.subdivision_code()
                .map(|s| format!("-{s}"))
                .unwrap_or_default()
        ));
    }
    if r.multi_value_answer() == Some(true) {
        line.push_str(" multivalue");
    }
    if let Some(alias) = r.alias_target() {
        line.push_str(&format!(
            " alias={}@{}",
            alias.dns_name(),
            alias.hosted_zone_id()
        ));
    }
    line.push_str(&format!(" {}", values.join(",")));
    line
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A proxy in front of moto that can answer like an overloaded Route53.
#[derive(Clone, Default)]
pub struct Proxy {
    /// The next this many `ChangeResourceRecordSets` get `400 Throttling`.
    pub throttle_changes: Arc<AtomicUsize>,
    /// The next this many `ChangeResourceRecordSets` get `400 InvalidChangeBatch`, as
    /// Route53 answers a CREATE of a record set that exists: moto accepts that CREATE and
    /// overwrites, so a test sets this where Route53 would refuse.
    pub refuse_changes: Arc<AtomicUsize>,
    /// Every request gets 503 while set.
    pub down: Arc<AtomicBool>,
    /// "METHOD path" of every request forwarded or answered.
    pub requests: Arc<Mutex<Vec<String>>>,
}

impl Proxy {
    /// Starts on a loopback address of its own, forwarding to `upstream`; returns its URL.
    pub async fn start(&self, upstream: &str) -> String {
        let listener = tokio::net::TcpListener::bind(crate::harness::loopback())
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let me = self.clone();
        let upstream = upstream.to_string();
        tokio::spawn(async move {
            let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
                .build_http::<Full<Bytes>>();
            while let Ok((stream, _)) = listener.accept().await {
                let (me, client, upstream) = (me.clone(), client.clone(), upstream.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let (me, client, upstream) = (me.clone(), client.clone(), upstream.clone());
                        async move { Ok::<_, Infallible>(me.handle(req, &client, &upstream).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        format!("http://{addr}")
    }

    /// How many requests so far were `ChangeResourceRecordSets`.
    pub fn changes(&self) -> usize {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.starts_with("POST") && r.ends_with("/rrset"))
            .count()
    }

    async fn handle(
        &self,
        req: Request<hyper::body::Incoming>,
        client: &hyper_util::client::legacy::Client<
            hyper_util::client::legacy::connect::HttpConnector,
            Full<Bytes>,
        >,
        upstream: &str,
    ) -> Response<Full<Bytes>> {
        let line = format!(
            "{} {}",
            req.method(),
            req.uri().path().trim_end_matches('/')
        );
        self.requests.lock().unwrap().push(line.clone());
        if self.down.load(Ordering::SeqCst) {
            return error(503, "ServiceUnavailable", "Service Unavailable");
        }
        let is_change = line.starts_with("POST") && line.ends_with("/rrset");
        if is_change
            && self
                .throttle_changes
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        {
            return error(400, "Throttling", "Rate exceeded");
        }
        if is_change
            && self
                .refuse_changes
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        {
            return error(
                400,
                "InvalidChangeBatch",
                "[Tried to create resource record set but it already exists]",
            );
        }
        let (parts, body) = req.into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        let uri = format!(
            "{upstream}{}",
            parts.uri.path_and_query().map_or("/", |p| p.as_str())
        );
        let mut forward = Request::builder().method(parts.method).uri(uri);
        for (k, v) in &parts.headers {
            if k != "host" {
                forward = forward.header(k, v);
            }
        }
        let answer = client
            .request(forward.body(Full::new(body)).unwrap())
            .await
            .unwrap();
        let (parts, body) = answer.into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        Response::from_parts(parts, Full::new(body))
    }
}

/// A Route53 error document.
fn error(status: u16, code: &str, message: &str) -> Response<Full<Bytes>> {
    let body = format!(
        "<?xml version=\"1.0\"?>\n<ErrorResponse xmlns=\"https://route53.amazonaws.com/doc/2013-04-01/\"><Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error><RequestId>test-proxy</RequestId></ErrorResponse>"
    );
    Response::builder()
        .status(status)
        .header("content-type", "text/xml")
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}
