//! `loadtest --config prod.toml`: a rehearsal of a real configuration before rollout.
//!
//! The user's tenants, policies, sinks (pointed at their staging back ends, or at a local
//! pdns_server or moto) and check timing are kept; only what must point at the simulated
//! farm changes: endpoint `i` is probed at farm gateway `i`, the API listens where the
//! load test reads it, logs are JSON (the per-sink report reads them), and every tenant
//! also delivers to the recording sink, which says when each fault's snapshot was made.
//! Every change is listed in the report's `notes`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context};
use toml::{Table, Value};

/// Name of the sink the rehearsal adds to every tenant.
pub const RECORDER: &str = "loadtest_recorder";

/// Check fields only https uses: dropped with the TLS the farm does not speak.
const TLS_FIELDS: [&str; 2] = ["insecure", "ca_file"];

/// A user's configuration, read and checked for what a rehearsal needs.
pub struct UserConfig {
    table: Table,
    /// `[[endpoints]]` in the file.
    pub endpoints: usize,
    /// Each endpoint's check timing (its own fields, else `[defaults.check]`, else the
    /// built-in defaults).
    pub timings: Vec<Timing>,
    /// The sinks of each tenant, by tenant name.
    pub tenant_sinks: BTreeMap<String, Vec<String>>,
}

impl UserConfig {
    /// Reads `path` (one file: pass the fully layered config).
    pub fn read(path: &Path) -> anyhow::Result<UserConfig> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let table: Table = text
            .parse()
            .with_context(|| format!("{} is not TOML", path.display()))?;
        let endpoints = table
            .get("endpoints")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        if endpoints == 0 {
            bail!(
                "{} has no [[endpoints]] to map onto the farm",
                path.display()
            );
        }
        let defaults = Timing::BUILTIN.over(
            table
                .get("defaults")
                .and_then(|d| d.get("check"))
                .and_then(Value::as_table),
        )?;
        let mut timings = Vec::with_capacity(endpoints);
        for e in array(&table, "endpoints") {
            timings.push(defaults.over(e.get("check").and_then(Value::as_table))?);
        }
        let mut tenant_sinks = BTreeMap::new();
        for t in array(&table, "tenants") {
            let name = t.get("name").and_then(Value::as_str).unwrap_or_default();
            let sinks = t
                .get("sinks")
                .and_then(Value::as_array)
                .map(|s| {
                    s.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            tenant_sinks.insert(name.to_owned(), sinks);
        }
        Ok(UserConfig {
            table,
            endpoints,
            timings,
            tenant_sinks,
        })
    }

    /// The config the engine runs: endpoint `i` at `farm[i]`, the API at `api`, JSON logs,
    /// and the recording sink (`hook`, signed with `secret`) added to every tenant. Returns
    /// it with a note for each change an operator should know about.
    pub fn for_farm(
        &self,
        farm: &[SocketAddr],
        api: SocketAddr,
        hook: SocketAddr,
        secret: &Path,
    ) -> anyhow::Result<(String, Vec<String>)> {
        anyhow::ensure!(farm.len() == self.endpoints, "one gateway per endpoint");
        let mut t = self.table.clone();
        let mut notes = Vec::new();
        let api_table = table_at(&mut t, "api");
        api_table.insert("listen".into(), api.to_string().into());
        if api_table.remove("token_file").is_some() {
            notes.push("api.token_file removed: the load test reads /metrics".to_owned());
        }
        table_at(&mut t, "telemetry").insert("log_format".into(), "json".into());
        if let Some(check) = t
            .get_mut("defaults")
            .and_then(|d| d.get_mut("check"))
            .and_then(Value::as_table_mut)
        {
            if to_http(check) {
                notes.push("[defaults.check] https probed as http: the farm speaks plain HTTP (TLS cost is not measured)".into());
            }
        }
        let mut https_endpoints = 0;
        let endpoints = t
            .get_mut("endpoints")
            .and_then(Value::as_array_mut)
            .context("[[endpoints]]")?;
        for (e, gateway) in endpoints.iter_mut().zip(farm) {
            let e = e.as_table_mut().context("[[endpoints]] must be tables")?;
            e.insert("address".into(), gateway.ip().to_string().into());
            let check = e
                .entry("check")
                .or_insert_with(|| Value::Table(Table::new()))
                .as_table_mut()
                .context("endpoint check must be a table")?;
            check.insert("port".into(), i64::from(gateway.port()).into());
            https_endpoints += usize::from(to_http(check));
        }
        if https_endpoints > 0 {
            notes.push(format!(
                "{https_endpoints} https endpoint checks probed as http: the farm speaks plain HTTP"
            ));
        }
        let sinks = table_at(&mut t, "sinks");
        if sinks.contains_key(RECORDER) {
            bail!("the config already has a sink named {RECORDER}");
        }
        let recorder: Table = recorder_sink(hook, secret).parse()?;
        sinks.insert(RECORDER.into(), recorder.into());
        for tenant in t
            .get_mut("tenants")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(list) = tenant.get_mut("sinks").and_then(Value::as_array_mut) {
                list.push(RECORDER.into());
            }
        }
        notes.push(format!(
            "every tenant also delivers to {RECORDER} (the load test's recording webhook)"
        ));
        Ok((toml::to_string(&t)?, notes))
    }
}

fn array<'a>(t: &'a Table, key: &str) -> impl Iterator<Item = &'a Value> {
    t.get(key).and_then(Value::as_array).into_iter().flatten()
}

/// The table at `key`, created when missing (a non-table value there is replaced).
fn table_at<'a>(t: &'a mut Table, key: &str) -> &'a mut Table {
    let slot = t.entry(key).or_insert_with(|| Value::Table(Table::new()));
    if !slot.is_table() {
        *slot = Value::Table(Table::new());
    }
    slot.as_table_mut().expect("made a table")
}

/// Turns an https check into http; true when it was https.
fn to_http(check: &mut Table) -> bool {
    if check.get("kind").and_then(Value::as_str) != Some("https") {
        return false;
    }
    check.insert("kind".into(), "http".into());
    for field in TLS_FIELDS {
        check.remove(field);
    }
    true
}

/// The recording sink's table: a webhook to `hook` signed with the key in `secret`.
pub(crate) fn recorder_sink(hook: SocketAddr, secret: &Path) -> String {
    format!(
        "kind = \"webhook\"\nurl = \"http://{hook}/\"\nsecret_file = {:?}\n# Measures when snapshots are made, not a rate limit: it takes any rate.\ndelivery = {{ max_writes_per_second = 100000, burst = 10000 }}\n",
        secret.display().to_string()
    )
}

/// The check fields that bound how fast a fault is detected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Between probes of a settled target.
    pub interval: Duration,
    /// Longest probe.
    pub timeout: Duration,
    /// Between re-checks while unsettled.
    pub fast_interval: Duration,
    /// Failures that turn a target down.
    pub fall: u32,
}

impl Timing {
    /// The engine's built-in check defaults.
    const BUILTIN: Timing = Timing {
        interval: Duration::from_secs(1),
        timeout: Duration::from_millis(500),
        fast_interval: Duration::from_millis(100),
        fall: 2,
    };

    /// This timing with the fields `check` sets.
    fn over(self, check: Option<&Table>) -> anyhow::Result<Timing> {
        let Some(check) = check else {
            return Ok(self);
        };
        let duration = |key: &str, base: Duration| -> anyhow::Result<Duration> {
            check.get(key).map_or(Ok(base), |v| {
                let text = v
                    .as_str()
                    .with_context(|| format!("{key} must be a duration string"))?;
                humantime::parse_duration(text).with_context(|| format!("{key} {text:?}"))
            })
        };
        Ok(Timing {
            interval: duration("interval", self.interval)?,
            timeout: duration("timeout", self.timeout)?,
            fast_interval: duration("fast_interval", self.fast_interval)?,
            fall: match check.get("fall") {
                Some(v) => u32::try_from(v.as_integer().context("fall must be a number")?)?,
                None => self.fall,
            },
        })
    }

    /// The longest a fault can take to turn the verdict: the next probe up to an interval
    /// away, `fall` failed probes of up to `timeout` each, `fast_interval` apart, and the
    /// 5 ms batch that carries results to the tracker (docs/how-it-decides.md, "Schedule"). Sink writes
    /// come on top.
    pub fn detection_bound(&self) -> Duration {
        self.interval
            + self.timeout * self.fall
            + self.fast_interval * self.fall.saturating_sub(1)
            + Duration::from_millis(5)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const USER: &str = r#"
[api]
listen = "0.0.0.0:8080"
token_file = "/run/secrets/api"

[defaults.check]
kind = "https"
port = 8443
interval = "2s"
insecure = true

[[endpoints]]
name = "a"
address = "10.0.0.1"

[[endpoints]]
name = "b"
address = "10.0.0.2"
check = { kind = "tcp", port = 22, interval = "500ms" }

[[tenants]]
name = "t"
domains = ["t.example"]
sinks = ["r53"]

[sinks.r53]
kind = "route53"
hosted_zone_id = "Z1"
"#;

    #[test]
    fn endpoints_move_to_the_farm_and_the_rest_stays() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("prod.toml");
        std::fs::write(&file, USER).unwrap();
        let user = UserConfig::read(&file).unwrap();
        assert_eq!(user.endpoints, 2);
        let intervals: Vec<Duration> = user.timings.iter().map(|t| t.interval).collect();
        assert_eq!(
            intervals,
            [Duration::from_secs(2), Duration::from_millis(500)]
        );
        assert_eq!(
            user.timings[0].detection_bound(),
            Duration::from_millis(2000 + 2 * 500 + 100 + 5)
        );
        assert_eq!(user.tenant_sinks["t"], ["r53"]);
        let farm: Vec<SocketAddr> = vec![
            "127.16.0.1:4001".parse().unwrap(),
            "127.16.0.2:4002".parse().unwrap(),
        ];
        let (text, notes) = user
            .for_farm(
                &farm,
                "127.0.0.1:9000".parse().unwrap(),
                "127.0.0.1:9001".parse().unwrap(),
                Path::new("/s"),
            )
            .unwrap();
        let t: Table = text.parse().unwrap();
        assert_eq!(t["api"]["listen"].as_str(), Some("127.0.0.1:9000"));
        assert!(t["api"].get("token_file").is_none());
        assert_eq!(t["telemetry"]["log_format"].as_str(), Some("json"));
        assert_eq!(t["defaults"]["check"]["kind"].as_str(), Some("http"));
        assert!(t["defaults"]["check"].get("insecure").is_none());
        let e = t["endpoints"].as_array().unwrap();
        assert_eq!(e[0]["address"].as_str(), Some("127.16.0.1"));
        assert_eq!(e[0]["check"]["port"].as_integer(), Some(4001));
        assert_eq!(e[1]["check"]["kind"].as_str(), Some("tcp"));
        assert_eq!(e[1]["check"]["port"].as_integer(), Some(4002));
        assert_eq!(
            t["tenants"][0]["sinks"].as_array().unwrap(),
            &vec![Value::from("r53"), Value::from(RECORDER)]
        );
        assert_eq!(t["sinks"]["r53"]["hosted_zone_id"].as_str(), Some("Z1"));
        assert_eq!(
            t["sinks"][RECORDER]["url"].as_str(),
            Some("http://127.0.0.1:9001/")
        );
        assert_eq!(notes.len(), 3, "{notes:?}");
    }
}
