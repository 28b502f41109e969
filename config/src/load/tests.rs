//! The loader's layering with the typed arrays, against figment's path for the same inputs:
//! the oracle layers built-in defaults, the files and the environment with figment alone,
//! as the loader did before the arrays were read into the typed model.

// figment::Jail closures return figment::Error, which is large; that is the API.
#![allow(clippy::result_large_err)]

use figment::providers::{Env, Format, Serialized, Toml};
use figment::{Figment, Jail};

use super::*;

/// xorshift64*: a seeded sequence, so a failing case is replayed from its seed.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) % n
    }

    pub(super) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// What figment alone makes of `files` and the environment, as JSON, or its error as the
/// loader words it.
pub(super) fn oracle(files: &[String]) -> Result<serde_json::Value, String> {
    let mut fig = Figment::from(Serialized::defaults(builtin()));
    for file in files {
        fig = fig.merge(Toml::file_exact(file));
    }
    fig.merge(Env::prefixed("HO_").split("__"))
        .extract::<Config>()
        .map(|c| serde_json::to_value(c).expect("a config serializes"))
        .map_err(|e| {
            ParseErrors {
                parse: Box::new(e),
                also: None,
            }
            .to_string()
        })
}

fn loaded(files: &[String]) -> Result<serde_json::Value, String> {
    load(files)
        .map(|c| serde_json::to_value(c).expect("a config serializes"))
        .map_err(|e| e.to_string())
}

/// Writes one element's keys and values, given its name.
type Make = fn(&mut Rng, &str) -> Vec<(&'static str, String)>;

/// One endpoint's keys and values: mostly valid, now and then an unknown key or a wrong type.
fn endpoint(rng: &mut Rng, name: &str) -> Vec<(&'static str, String)> {
    let mut keys = vec![
        ("name", format!("\"{name}\"")),
        (
            "address",
            format!("\"10.0.{}.{}\"", rng.below(4), rng.below(250)),
        ),
    ];
    let optional: [(u64, &'static str, String); 7] = [
        (30, "labels", r#"{ geo = "eu", tier = "1" }"#.into()),
        (
            30,
            "check",
            format!(r#"{{ port = {}, interval = "2s" }}"#, 8000 + rng.below(9)),
        ),
        (20, "weight", rng.below(10).to_string()),
        (10, "checks", r#"[{ kind = "tcp", port = 5432 }]"#.into()),
        (10, "require", r#""any""#.into()),
        (1, "bogus", "1".into()),
        (1, "priority", r#""first""#.into()),
    ];
    for (percent, key, value) in optional {
        if rng.chance(percent) {
            keys.push((key, value));
        }
    }
    keys
}

fn tenant(rng: &mut Rng, name: &str) -> Vec<(&'static str, String)> {
    let members = (0..rng.below(3))
        .map(|i| format!("\"e{i}\""))
        .collect::<Vec<_>>();
    let mut keys = vec![
        ("name", format!("\"{name}\"")),
        ("domains", format!("[\"{name}.example\"]")),
        ("endpoints", format!("[{}]", members.join(", "))),
    ];
    match rng.chance(2) {
        true => keys.push(("sinks", "\"local\"".into())),
        false => keys.push(("sinks", "[\"local\"]".into())),
    }
    keys
}

fn inline(keys: &[(&str, String)]) -> String {
    let pairs: Vec<String> = keys.iter().map(|(k, v)| format!("{k} = {v}")).collect();
    format!("{{ {} }}", pairs.join(", "))
}

fn lines(keys: &[(&str, String)]) -> String {
    keys.iter().map(|(k, v)| format!("{k} = {v}\n")).collect()
}

/// One array in one of the ways TOML writes it: absent, `[[key]]` tables (one with a
/// trailing comment on its header now and then), an inline array, `key = []`, or tables
/// with a sub-table of the last element.
fn array(rng: &mut Rng, key: &str, make: Make, layer: usize) -> (Option<String>, Vec<String>) {
    let items: Vec<_> = (0..1 + rng.below(5))
        .map(|i| make(rng, &format!("{}{layer}x{i}", &key[..1])))
        .collect();
    match rng.below(6) {
        0 => (None, Vec::new()),
        1 => {
            let all: Vec<String> = items.iter().map(|k| inline(k)).collect();
            (Some(format!("{key} = [{}]\n", all.join(", "))), Vec::new())
        }
        2 => (Some(format!("{key} = []\n")), Vec::new()),
        form => {
            let sub_table = form == 5 && key == "endpoints";
            let mut tables: Vec<String> = items
                .iter()
                .map(|k| match rng.chance(10) {
                    true => format!("[[{key}]] # one of them\n{}", lines(k)),
                    false => format!("[[{key}]]\n{}", lines(k)),
                })
                .collect();
            if let (true, Some(last)) = (sub_table, items.last()) {
                let keys: Vec<_> = last
                    .iter()
                    .filter(|(k, _)| *k != "check")
                    .cloned()
                    .collect();
                let last = tables.last_mut().expect("at least one element");
                *last = format!(
                    "[[{key}]]\n{}[endpoints.check]\nport = 9100\n",
                    lines(&keys)
                );
            }
            (None, tables)
        }
    }
}

/// One layer's TOML: top-level keys first, then the tables in a shuffled order.
fn layer(rng: &mut Rng, layer: usize) -> String {
    let mut top = String::from("# generated\n");
    if rng.chance(20) {
        // A multi-line string whose lines look like headers: not cut there.
        top.push_str("owner_id = \"\"\"\n[[endpoints]]\nname = \"trap\"\n[api]\n\"\"\"\n");
    } else if rng.chance(20) {
        top.push_str(&format!("owner_id = \"layer{layer}\"\n"));
    }
    let mut tables = Vec::new();
    let arrays: [(&str, Make); 2] = [("endpoints", endpoint), ("tenants", tenant)];
    for (key, make) in arrays {
        let (inline, elements) = array(rng, key, make, layer);
        top.push_str(&inline.unwrap_or_default());
        tables.extend(elements);
    }
    if rng.chance(50) {
        tables.push(format!(
            "[defaults.check]\ninterval = \"{}s\"\n",
            1 + rng.below(9)
        ));
    }
    if rng.chance(30) {
        tables.push("[sinks.local]\nkind = \"hosts_file\"\ndir = \"/tmp/h\"\n".into());
    }
    if rng.chance(20) {
        tables.push(format!("[api]\nlisten = \"127.0.0.1:{}\"\n", 9000 + layer));
    }
    for i in (1..tables.len()).rev() {
        tables.swap(i, rng.below(i as u64 + 1) as usize);
    }
    top + "\n" + &tables.join("\n")
}

/// Seeded generated layers (one to three files) and environments give what figment's path
/// gives: the same configuration, or among their errors the one naming the same file and
/// key path in the same words.
#[test]
fn generated_layers_load_as_figment_layers_them() {
    let (mut typed, mut failed) = (0, 0);
    for seed in 1..=300u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        Jail::expect_with(|jail| {
            let files: Vec<String> = (0..1 + rng.below(3) as usize)
                .map(|i| format!("layer{i}.toml"))
                .collect();
            for (i, file) in files.iter().enumerate() {
                jail.create_file(file, &layer(&mut rng, i))?;
            }
            match rng.below(8) {
                0 => jail.set_env("HO_DEFAULTS__CHECK__RISE", "3"),
                1 => jail.set_env("HO_ENDPOINTS", r#"[{name="env0", address="10.9.9.9"}]"#),
                2 => jail.set_env("HO_TENANTS__0__NAME", "t"),
                3 => jail.set_env("HO_OWNER_ID", "env"),
                _ => {}
            }
            let expected = oracle(&files);
            match (loaded(&files), &expected) {
                // Figment's path stops at its first error; the loader reports it among all.
                (Err(all), Err(first)) => assert!(
                    first.lines().all(|line| all.lines().any(|l| l == line)),
                    "seed {seed}: {first} not in {all}"
                ),
                // An element error in an array a later layer replaces: figment's path
                // does not see it (nor one the environment's replaces); it names a file that fails
                // alone, at an element.
                (Err(all), Ok(_)) => assert!(
                    all.lines().all(|line| files.iter().any(|file| {
                        ["endpoints[", "tenants["]
                            .iter()
                            .any(|a| line.starts_with(&format!("{file}: {a}")))
                            && Figment::from(Serialized::defaults(builtin()))
                                .merge(Toml::file_exact(file))
                                .extract::<Config>()
                                .is_err()
                    })),
                    "seed {seed}: {all}"
                ),
                (loaded, _) => assert_eq!(loaded, expected, "seed {seed}"),
            }
            typed += usize::from(arrays::load(&layers(&files, None).unwrap()).is_some());
            failed += usize::from(expected.is_err());
            Ok(())
        });
    }
    // Both paths are exercised: the typed arrays, and figment's for what they leave to it.
    assert!(typed > 150 && failed > 20, "typed {typed}, failed {failed}");
}

fn names(files: &[&str]) -> (Vec<String>, Vec<String>) {
    let config = load(files).unwrap_or_else(|e| panic!("{e}"));
    (
        config.endpoints.into_iter().map(|e| e.name).collect(),
        config.tenants.into_iter().map(|t| t.name).collect(),
    )
}

/// Figment's merge replaces an array by a later layer's, whole (no concatenation, no
/// element-wise merge): the last file that gives `endpoints` (or `tenants`) wins, `[]`
/// included, a file without it leaves the earlier one, and `HO_ENDPOINTS` replaces them all.
#[test]
fn the_last_layer_that_gives_an_array_wins_whole() {
    Jail::expect_with(|jail| {
        jail.create_file(
            "a.toml",
            "[[endpoints]]\nname = \"a1\"\naddress = \"10.0.0.1\"\n\
             [[endpoints]]\nname = \"a2\"\naddress = \"10.0.0.2\"\n\
             [[tenants]]\nname = \"ta\"\ndomains = []\nsinks = []\n",
        )?;
        jail.create_file(
            "b.toml",
            "endpoints = [{ name = \"b1\", address = \"10.0.0.3\", weight = 2 }]\n",
        )?;
        jail.create_file("c.toml", "tenants = []\n[defaults.check]\nport = 81\n")?;
        let (a, b, c) = ("a.toml", "b.toml", "c.toml");
        assert_eq!(names(&[a, b, c]), (vec!["b1".into()], vec![]));
        assert_eq!(names(&[a, c]), (vec!["a1".into(), "a2".into()], vec![]));
        assert_eq!(
            names(&[b, a]),
            (vec!["a1".into(), "a2".into()], vec!["ta".into()])
        );
        assert_eq!(names(&[c, b]), (vec!["b1".into()], vec![]));
        let b1 = &load(&[a, b, c]).unwrap().endpoints[0];
        assert_eq!((b1.weight, b1.check.port), (Some(2), None));
        jail.set_env("HO_ENDPOINTS", r#"[{name="env1", address="10.0.0.9"}]"#);
        assert_eq!(names(&[a, b]), (vec!["env1".into()], vec!["ta".into()]));
        Ok(())
    });
}

/// An error in an endpoint names the file and the element's path from the array's start.
#[test]
fn an_endpoint_error_names_the_file_and_the_element() {
    Jail::expect_with(|jail| {
        let endpoints: String = (0..5)
            .map(|i| match i {
                3 => "[[endpoints]]\nname = \"e3\"\naddress = \"10.0.0.3\"\ncheck = { port = \"x\" }\n".into(),
                _ => format!("[[endpoints]]\nname = \"e{i}\"\naddress = \"10.0.0.{i}\"\n"),
            })
            .collect();
        jail.create_file("gw.toml", &endpoints)?;
        let error = load(&["gw.toml"]).unwrap_err().to_string();
        assert!(
            error.starts_with("gw.toml: endpoints[3].check.port: "),
            "{error}"
        );
        Ok(())
    });
}

/// An error in a value an `HO_*` variable set names the variable, and says a number's range
/// in words, whether the variable holds the value or a whole array around it.
#[test]
fn an_environment_error_names_its_variable() {
    Jail::expect_with(|jail| {
        jail.create_file("base.toml", "")?;
        jail.set_env("HO_DEFAULTS__CHECK__PORT", "70000");
        let error = load(&["base.toml"]).unwrap_err().to_string();
        assert_eq!(
            error,
            "environment HO_DEFAULTS__CHECK__PORT: defaults.check.port: \
             70000 is not a port number from 1 to 65535"
        );
        jail.clear_env();
        jail.set_env(
            "HO_ENDPOINTS",
            r#"[{name="e0", address="10.0.0.1", check={port=-1}}]"#,
        );
        let error = load(&["base.toml"]).unwrap_err().to_string();
        assert!(
            error.starts_with("environment HO_ENDPOINTS: endpoints[0].check.port: "),
            "{error}"
        );
        jail.set_env(
            "HO_ENDPOINTS",
            r#"[{name="e0", address="10.0.0.1", weight="heavy"}, {name="e1", adress="10.0.0.2"}]"#,
        );
        let error = load(&["base.toml"]).unwrap_err().to_string();
        let lines: Vec<&str> = error.lines().collect();
        assert_eq!(lines.len(), 2, "{error}");
        assert!(lines[0].starts_with("environment HO_ENDPOINTS: endpoints[0].weight: "));
        assert!(lines[1].starts_with("environment HO_ENDPOINTS: endpoints[1].adress: unknown key"));
        jail.clear_env();
        jail.set_env("HO_DEFAULT__CHECK__PORT", "80");
        let error = load(&["base.toml"]).unwrap_err().to_string();
        assert!(
            error.starts_with("environment HO_DEFAULT__CHECK__PORT: default: unknown key"),
            "{error}"
        );
        // One underscore where a table and its key meet: the variable meant.
        for (set, meant) in [
            ("HO_API_LISTEN", "HO_API__LISTEN"),
            ("HO_DEFAULTS__CHECK_PORT", "HO_DEFAULTS__CHECK__PORT"),
        ] {
            jail.clear_env();
            jail.set_env(set, "80");
            let error = load(&["base.toml"]).unwrap_err().to_string();
            assert!(
                error.starts_with(&format!("environment {set}: "))
                    && error.ends_with(&format!(" (a table's key takes two underscores: {meant})")),
                "{error}"
            );
        }
        Ok(())
    });
}

/// `HO_ENDPOINTS` or `HO_TENANTS` whose TOML does not parse says so, with the line and column
/// within the variable's value and the parser's reason, not "expected a sequence" nor (as
/// figment's lenient reading of `address=}` gave) an empty value.
#[test]
fn an_environment_array_that_does_not_parse_says_where() {
    Jail::expect_with(|jail| {
        jail.create_file("base.toml", "")?;
        jail.set_env("HO_ENDPOINTS", r#"[{name="e0", address=}]"#);
        assert_eq!(
            load(&["base.toml"]).unwrap_err().to_string(),
            "environment HO_ENDPOINTS: endpoints: the variable's TOML does not parse: \
             line 1, column 22: invalid string; expected `\"`, `'`"
        );
        jail.clear_env();
        jail.set_env(
            "HO_TENANTS",
            "[\n  { name = \"t\", domains = [\"t.example\"] },\n  { name = \"u\" domains = [] },\n]",
        );
        assert_eq!(
            load(&["base.toml"]).unwrap_err().to_string(),
            "environment HO_TENANTS: tenants: the variable's TOML does not parse: \
             line 3, column 16: invalid inline table; expected `}`"
        );
        Ok(())
    });
}

/// Every error in the rest of the configuration (outside the arrays) is reported at once,
/// in both files and the environment, not only the first.
#[test]
fn every_error_of_the_rest_is_reported() {
    Jail::expect_with(|jail| {
        jail.create_file(
            "a.toml",
            "[api]\nlisten = 5\n[reload]\ninterval = \"fast\"\nwatch = \"yes\"\n",
        )?;
        jail.create_file(
            "b.toml",
            "[defaults.check]\nport = 70000\n[limits]\nmax_endpoints = -1\n",
        )?;
        jail.set_env("HO_TELEMETRY__QUEUE_SIZE", "many");
        let error = load(&["a.toml", "b.toml"]).unwrap_err().to_string();
        let mut lines: Vec<&str> = error.lines().collect();
        lines.sort_unstable();
        assert_eq!(
            lines,
            [
                "a.toml: api.listen: 5 is not an address and port such as \"127.0.0.1:8080\"",
                "a.toml: reload.interval: \"fast\" is not a duration (durations are strings such as \"250ms\", \"1m 30s\")",
                "a.toml: reload.watch: \"yes\" is not true or false",
                "b.toml: defaults.check.port: 70000 is not a port number from 1 to 65535",
                "b.toml: limits.max_endpoints: -1 is not a whole number, 0 or more",
                "environment HO_TELEMETRY__QUEUE_SIZE: telemetry.queue_size: \"many\" is not a whole number, 0 or more",
            ]
        );
        Ok(())
    });
}
