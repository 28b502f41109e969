//! One sequence's world: the Kubernetes API test server, three gateways on loopback, the
//! real binary publishing through its embedded DNS server, and the steps carried out on
//! them, each followed by the resolver asking every name every 20 ms until the answers
//! settle on the oracle's, while checking that nothing moved that may not.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use ho_testkit::kube_api::Lag;
use ho_testkit::Gateway;
use tokio::time::Instant;

use super::objects::{locate, manifest, Gateways, LB_HOST};
use super::oracle::{Expect, Model, NAMES};
use super::resolver::{ask, Answer, NOERROR, NXDOMAIN, REFUSED, SERVFAIL, TYPE_CNAME};
use super::status::refusal_shown;
use super::steps::Step;
use crate::fakes::kube_api::{KubeApi, TOKEN};
use crate::harness::*;
use crate::kube_tenants::{run_operator, three_gateways};

/// How long a step may take to settle, and how long a settled answer must hold.
const SETTLE: Duration = Duration::from_secs(12);
const HOLD: Duration = Duration::from_millis(200);
const POLL: Duration = Duration::from_millis(20);

/// What broke, at which step.
#[derive(Debug)]
pub struct Violation {
    pub step: usize,
    pub what: String,
}

/// The answers of every name; `None`: no answer (the server is down).
type Seen = BTreeMap<&'static str, Option<Answer>>;

pub struct World {
    kube: KubeApi,
    _gateways: Vec<Gateway>,
    gws: Gateways,
    dir: tempfile::TempDir,
    config: TestConfig,
    process: Option<Running>,
    dns: SocketAddr,
    model: Model,
    queries: u16,
}

impl World {
    pub async fn start() -> World {
        let kube = KubeApi::default();
        let kube_addr = kube.start().await;
        let gateways = three_gateways();
        let gws = Gateways {
            ips: gateways.iter().map(|g| g.addr().ip().to_string()).collect(),
            port: gateways[0].addr().port(),
        };
        let dns = SocketAddr::new(loopback_ip().into(), 53);
        let dir = tempfile::tempdir().unwrap();
        let config = config(dir.path(), kube_addr, dns, &gws);
        let process = Some(run_operator(dir.path(), &config));
        World {
            kube,
            _gateways: gateways,
            gws,
            dir,
            config,
            process,
            dns,
            model: Model::default(),
            queries: 0,
        }
    }

    /// Carries out `steps`, checking the invariants after each; the first violation.
    pub async fn run(&mut self, steps: &[Step]) -> Result<(), Violation> {
        let mut before = self.settle_initial().await;
        for (i, step) in steps.iter().enumerate() {
            let at = |what: String| Violation { step: i, what };
            self.model.apply(step, &self.gws);
            self.perform(step);
            before = self.settle(step, &before).await.map_err(at)?;
            self.statuses_settle().await.map_err(at)?;
        }
        Ok(())
    }

    fn perform(&mut self, step: &Step) {
        if let Some(object) = manifest(step, &self.gws) {
            self.kube.apply(object);
            return;
        }
        match step {
            Step::Delete(object) => {
                let (plural, ns, name) = locate(*object);
                self.kube.delete(plural, ns, &name);
            }
            Step::Restart => {
                drop(self.process.take());
                self.process = Some(run_operator(self.dir.path(), &self.config));
            }
            Step::StaleCache => self.kube.lag_cache(Lag::Stale),
            Step::EmptyCache => self.kube.lag_cache(Lag::Empty),
            Step::ExpireWatches => {
                self.kube.compact();
                self.kube.drop_watches();
            }
            _ => unreachable!("every write has a manifest"),
        }
    }

    async fn observe(&mut self) -> Seen {
        let mut seen = Seen::new();
        for name in NAMES {
            self.queries = self.queries.wrapping_add(1);
            seen.insert(name, ask(self.dns, name, self.queries).await);
        }
        seen
    }

    /// Before the first step: every name answers as nothing was written (the server up).
    async fn settle_initial(&mut self) -> Seen {
        let start = Instant::now();
        loop {
            let seen = self.observe().await;
            if NAMES.iter().all(|n| self.matches(n, seen[n].as_ref())) {
                return seen;
            }
            assert!(
                start.elapsed() < SETTLE * 2,
                "the engine never answered: {seen:?}"
            );
            tokio::time::sleep(POLL).await;
        }
    }

    fn matches(&self, name: &str, got: Option<&Answer>) -> bool {
        let Some(got) = got else { return false };
        match self.model.expect(name, &self.gws) {
            Expect::Addresses(want) => {
                got.rcode == NOERROR && got.of(TYPE_CNAME).is_empty() && got.addresses() == want
            }
            Expect::Cname(target) => got.rcode == NOERROR && got.of(TYPE_CNAME) == [target].into(),
            Expect::Absent => !got.published() && matches!(got.rcode, NOERROR | NXDOMAIN),
            Expect::Refused => got.rcode == REFUSED,
        }
    }

    /// Polls every name until each answers as the oracle says for `HOLD`; on every poll,
    /// a name the step did not touch answers exactly as `before` (or not at all, or
    /// SERVFAIL, while the process restarts), and a published name leaves only when the
    /// oracle says it goes.
    async fn settle(&mut self, step: &Step, before: &Seen) -> Result<Seen, String> {
        let start = Instant::now();
        let mut held_since: Option<Instant> = None;
        let touched = touched_names(step);
        loop {
            let seen = self.observe().await;
            for name in NAMES {
                let (was, now) = (before[name].as_ref(), seen[name].as_ref());
                let restarting = *step == Step::Restart
                    && now.is_none_or(|a| a.rcode == SERVFAIL && a.records.is_empty());
                if restarting || same(was, now) {
                    continue;
                }
                let goes = self.model.expect(name, &self.gws) == Expect::Absent;
                if !touched.contains(&name) {
                    return Err(format!(
                        "{name}, untouched by the step, answered {now:?} instead of {was:?}"
                    ));
                }
                let left = now.is_none_or(|a| !a.published());
                if was.is_some_and(Answer::published) && left && !goes {
                    return Err(format!(
                        "{name} left DNS ({now:?}) though neither deleted nor dropped by an accepted edit; it answered {was:?}"
                    ));
                }
            }
            if NAMES.iter().all(|n| self.matches(n, seen[n].as_ref())) {
                let since = *held_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= HOLD {
                    return Ok(seen);
                }
            } else {
                held_since = None;
            }
            if start.elapsed() > SETTLE {
                let wanted: Vec<_> = NAMES
                    .iter()
                    .filter(|n| !self.matches(n, seen[*n].as_ref()))
                    .map(|n| {
                        format!(
                            "{n}: want {:?}, got {:?}",
                            self.model.expect(n, &self.gws),
                            seen[*n]
                        )
                    })
                    .collect();
                let policy = self.kube.object("dnspolicies", "team-a", "gw-0-dns");
                let said = policy.map(|p| p["status"].to_string()).unwrap_or_default();
                return Err(format!(
                    "did not settle within {SETTLE:?}: {}; the policy's status: {said}",
                    wanted.join("; ")
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Every refusal is on the status of an object `kubectl get` shows, an accepted write
    /// reads accepted again (a reverted refusal included), and a deleted object is gone
    /// (its finalizer released).
    async fn statuses_settle(&self) -> Result<(), String> {
        let start = Instant::now();
        loop {
            let wrong = refusal_shown(&self.kube, &self.model);
            let Some(wrong) = wrong else { return Ok(()) };
            if start.elapsed() > SETTLE {
                return Err(wrong);
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// Whether two answers are the same: equal, or both saying the name is not published
/// (NXDOMAIN and an empty NOERROR alike: a withdrawn name may stay known, empty, until the
/// process restarts).
fn same(a: Option<&Answer>, b: Option<&Answer>) -> bool {
    let absent = |x: &Answer| !x.published() && matches!(x.rcode, NOERROR | NXDOMAIN);
    a == b || a.zip(b).is_some_and(|(a, b)| absent(a) && absent(b))
}

/// The names a step may change: those of the object it writes, and for the Gateway or the
/// policy the listeners' (and, the policy governing every record, the records').
fn touched_names(step: &Step) -> Vec<&'static str> {
    use super::steps::Object::*;
    match step.object() {
        Some(Failover(n)) => vec![NAMES[usize::from(n)]],
        Some(Record(n)) => vec![NAMES[2 + usize::from(n)]],
        Some(Gateway) => vec![NAMES[4], NAMES[5]],
        Some(Policy) => NAMES[2..6].to_vec(),
        // None: a probe's check replaces the one its address had, every gateway stays
        // healthy, and a check without a verdict yet withdraws no address already served.
        Some(Probe) => vec![],
        Some(Outsider) | None => vec![],
    }
}

/// The operator's config: team-a may publish under team-a.io through the embedded server,
/// which also answers the load balancer's host name (a static record) and is the
/// resolver that looks it up; the last accepted generations kept in `state_dir`.
fn config(dir: &Path, kube: SocketAddr, dns: SocketAddr, gws: &Gateways) -> TestConfig {
    let kubeconfig = KubeApi::kubeconfig_with(kube, dir, TOKEN);
    let lb = LB_HOST.trim_end_matches(".team-a.io");
    TestConfig::defaults(&Check::FAST)
        .set("defaults.check.port", i64::from(gws.port))
        .set("state_dir", dir.join("state").display().to_string())
        .with(&format!(
            "[resolver]\nservers = [\"{dns}\"]\nmin_refresh = \"1s\"\ntimeout = \"300ms\"\n\n\
             [sinks.dns]\nkind = \"dns_server\"\nlisten = [\"{dns}\"]\nzones = [\"team-a.io\"]\n\
             static_records = \"\"\"\n{lb} 30 IN A {}\n\"\"\"\n\n\
             [kubernetes]\ntenants = true\nkuadrant = true\nkubeconfig = {:?}\n\n\
             [[kubernetes.allow]]\nnamespace = \"team-a\"\ndomains = [\"team-a.io\"]\nsinks = [\"dns\"]\n",
            gws.ips[2],
            kubeconfig.display().to_string()
        ))
}
