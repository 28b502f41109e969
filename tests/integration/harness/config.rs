//! Test configs as data, not text edits.
//!
//! A test used to take a config string and `.replace()` a line in it; when the line moved,
//! the edit silently did nothing and the test checked something else. Here a config is a
//! TOML table: fragments are merged in (a key given twice is a panic, not an override),
//! and [`TestConfig::set`] writes one value at a dotted path, creating the tables on the
//! way. The text the engine loads is rendered from the table at the end.

use std::net::SocketAddr;

use ho_testkit::Gateway;
use toml::{Table, Value};

/// The `[defaults.check]` of a test, typed so a variant is `Check { fall: 4, ..Check::FAST }`.
#[derive(Clone, Copy, Debug)]
pub struct Check {
    /// `http` or `tcp`.
    pub kind: &'static str,
    /// The HTTP path; `None` for TCP checks.
    pub path: Option<&'static str>,
    /// Durations in the config's own syntax (`"200ms"`).
    pub interval: &'static str,
    pub timeout: &'static str,
    pub fast_interval: &'static str,
    pub rise: u32,
    pub fall: u32,
}

impl Check {
    /// The check most tests use: 200 ms interval, fall 2, rise 1, fast re-check 50 ms.
    pub const FAST: Check = Check {
        kind: "http",
        path: Some("/healthz"),
        interval: "200ms",
        timeout: "100ms",
        fast_interval: "50ms",
        rise: 1,
        fall: 2,
    };

    /// The same timing as a TCP connect check (no path).
    pub const fn tcp(self) -> Check {
        Check {
            kind: "tcp",
            path: None,
            ..self
        }
    }

    fn table(&self) -> Table {
        let mut t = Table::new();
        t.insert("kind".into(), self.kind.into());
        if let Some(path) = self.path {
            t.insert("path".into(), path.into());
        }
        for (key, value) in [
            ("interval", self.interval),
            ("timeout", self.timeout),
            ("fast_interval", self.fast_interval),
        ] {
            t.insert(key.into(), value.into());
        }
        t.insert("rise".into(), i64::from(self.rise).into());
        t.insert("fall".into(), i64::from(self.fall).into());
        t
    }
}

/// A config under construction; [`TestConfig::render`] gives the text to load.
#[derive(Clone, Debug)]
pub struct TestConfig(Table);

impl TestConfig {
    /// The API on a free port, `check` as the default check, and one endpoint per gateway
    /// named `gw-1`, `gw-2`, ...
    pub fn new(check: &Check, gateways: &[&Gateway]) -> TestConfig {
        TestConfig::at(check, gateways.iter().map(|g| g.addr()), |i| {
            format!("gw-{}", i + 1)
        })
    }

    /// [`TestConfig::new`] over addresses, with the endpoint names given.
    pub fn at(
        check: &Check,
        addrs: impl IntoIterator<Item = SocketAddr>,
        name: impl Fn(usize) -> String,
    ) -> TestConfig {
        TestConfig::defaults(check).with(&ho_testkit::endpoints_toml_at(addrs, name))
    }

    /// The API on a free port and `check` as the default check, no endpoint yet: for tests
    /// whose endpoints carry their own settings.
    pub fn defaults(check: &Check) -> TestConfig {
        TestConfig(Table::new())
            .set("api.listen", "127.0.0.1:0")
            .set("defaults.check", check.table())
    }

    /// Merges a TOML fragment (tenants, sinks, other sections): tables merge key by key,
    /// arrays of tables (`[[tenants]]`) are appended to, and a value already present is a
    /// panic naming it, so a fragment can never quietly replace what the test set before.
    pub fn with(mut self, fragment: &str) -> TestConfig {
        let more: Table = fragment
            .parse()
            .unwrap_or_else(|e| panic!("test config fragment is not TOML: {e}\n{fragment}"));
        merge(&mut self.0, more, "");
        self
    }

    /// Sets the value at a dotted path (`"defaults.startup_grace"`, `"sinks.pdns.zone"`,
    /// `"endpoints.1.weight"` for the second `[[endpoints]]`), creating missing tables;
    /// replaces a value that is there. An index past the end of an array is a panic.
    pub fn set(mut self, path: &str, value: impl Into<Value>) -> TestConfig {
        let parts: Vec<&str> = path.split('.').collect();
        let (key, parents) = parts.split_last().expect("split gives at least one part");
        walk(&mut self.0, parents, path).insert((*key).into(), value.into());
        self
    }

    /// The config text.
    pub fn render(&self) -> String {
        toml::to_string(&self.0).expect("a TOML table always renders")
    }
}

/// The table at `parts` under `table`, created where missing; a number after an array's
/// name picks one of its tables.
fn walk<'a>(table: &'a mut Table, parts: &[&str], path: &str) -> &'a mut Table {
    let Some((name, mut rest)) = parts.split_first() else {
        return table;
    };
    let mut value = table
        .entry(*name)
        .or_insert_with(|| Value::Table(Table::new()));
    if let Value::Array(items) = value {
        let (index, after) = rest
            .split_first()
            .unwrap_or_else(|| panic!("{name} in {path} is an array: give an index"));
        let len = items.len();
        value = index
            .parse::<usize>()
            .ok()
            .and_then(|i| items.get_mut(i))
            .unwrap_or_else(|| panic!("{path}: {name} has {len} entries, no {index}"));
        rest = after;
    }
    let table = value
        .as_table_mut()
        .unwrap_or_else(|| panic!("{name} in {path} is not a table"));
    walk(table, rest, path)
}

fn merge(into: &mut Table, from: Table, at: &str) {
    for (key, value) in from {
        let path = if at.is_empty() {
            key.clone()
        } else {
            format!("{at}.{key}")
        };
        match (into.get_mut(&key), value) {
            (None, value) => {
                into.insert(key, value);
            }
            (Some(Value::Table(mine)), Value::Table(theirs)) => merge(mine, theirs, &path),
            (Some(Value::Array(mine)), Value::Array(theirs))
                if mine.iter().chain(&theirs).all(Value::is_table) =>
            {
                mine.extend(theirs)
            }
            (Some(_), _) => panic!("{path} is set twice in the test config"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_merge_and_paths_reach_into_arrays() {
        let text = TestConfig::at(&Check::FAST, ["127.0.0.1:1".parse().unwrap()], |_| {
            "gw".into()
        })
        .with("[[tenants]]\nname = \"a\"\n")
        .with("[[tenants]]\nname = \"b\"\n\n[sinks.s]\nkind = \"hosts_file\"\n")
        .set("endpoints.0.weight", 3)
        .set("defaults.startup_grace", "1s")
        .render();
        let back: Table = text.parse().unwrap();
        assert_eq!(back["tenants"].as_array().unwrap().len(), 2);
        assert_eq!(back["endpoints"][0]["weight"].as_integer(), Some(3));
        assert_eq!(back["defaults"]["check"]["fall"].as_integer(), Some(2));
        assert_eq!(back["defaults"]["startup_grace"].as_str(), Some("1s"));
        assert_eq!(back["sinks"]["s"]["kind"].as_str(), Some("hosts_file"));
    }

    #[test]
    #[should_panic(expected = "api.listen is set twice")]
    fn a_fragment_cannot_override_a_value() {
        TestConfig::defaults(&Check::FAST).with("[api]\nlisten = \"127.0.0.1:1\"\n");
    }

    #[test]
    #[should_panic(expected = "endpoints has 0 entries, no 3")]
    fn an_index_past_the_end_is_refused() {
        TestConfig::defaults(&Check::FAST)
            .with("endpoints = []\n")
            .set("endpoints.3.weight", 1);
    }
}
