//! Loading, layering and validation, from real files and a real (jailed) environment,
//! with the real sink kinds (which parse the `[sinks.*]` tables, hence here, not in the
//! config crate).

// figment::Jail closures return figment::Error, which is large; that is the API.
#![allow(clippy::result_large_err)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use figment::Jail;
use ho_config::{load, validate, ConfigError};
use ho_engine::probe::HttpCheck;
use ho_kinds::{load_plan, CATALOG};

/// A path inside the config crate, where the examples and the bad corpus live.
fn dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../config")
        .join(name)
}

fn toml_files(folder: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
}

/// Every example in the repository loads and validates.
#[test]
fn every_example_is_valid() {
    let examples = toml_files(&dir("examples"));
    assert!(examples.len() >= 2, "examples missing");
    for file in examples {
        let plan = load_plan(&[&file]).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(!plan.tenants.is_empty());
    }
}

/// Each broken config yields exactly the errors written in its `# expect:` lines; one that
/// only a start refuses (`# expect at start:`, a host name that does not resolve) loads.
#[test]
fn every_bad_config_reports_its_exact_errors() {
    let bad = toml_files(&dir("tests/bad"));
    assert!(bad.len() >= 5, "bad corpus missing");
    let mut mismatches = Vec::new();
    for file in bad {
        let text = std::fs::read_to_string(&file).unwrap();
        if text.lines().any(|l| l.starts_with("# expect at start: ")) {
            Jail::expect_with(|_| {
                load_plan(&[&file]).map_err(|e| e.to_string())?;
                Ok(())
            });
            continue;
        }
        let expected: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# expect: "))
            .collect();
        assert!(
            !expected.is_empty(),
            "{} has no # expect: lines",
            file.display()
        );
        let mut err = String::new();
        Jail::expect_with(|_| {
            err = load_plan(&[&file])
                .expect_err("config must be rejected")
                .to_string();
            Ok(())
        });
        let folder = format!("{}/", file.parent().unwrap().display());
        let got = err.replace(&folder, "");
        let got: Vec<&str> = got.lines().collect();
        if got != expected {
            mismatches.push(format!(
                "{}:\n  got:\n    {}",
                file.display(),
                got.join("\n    ")
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

/// Built-in defaults < first file < second file < environment, field by field.
#[test]
fn layers_override_in_order() {
    Jail::expect_with(|jail| {
        jail.create_file(
            "a.toml",
            r#"
            [defaults.check]
            port = 8080
            interval = "2s"
            timeout = "1s"
            [[endpoints]]
            name = "a"
            address = "10.0.0.1"
            check = { path = "/ready" }
            [[tenants]]
            name = "t"
            domains = ["t.example"]
            sinks = ["local"]
            [sinks.local]
            kind = "hosts_file"
            dir = "/tmp/h"
            "#,
        )?;
        jail.create_file("b.toml", "[defaults.check]\ninterval = \"3s\"\nfall = 4\n")?;
        jail.set_env("HO_DEFAULTS__CHECK__INTERVAL", "250ms");
        jail.set_env("HO_DEFAULTS__CHECK__TIMEOUT", "100ms");
        jail.set_env("HO_API__LISTEN", "127.0.0.1:9999");
        let plan = load_plan(&["a.toml", "b.toml"]).map_err(|e| e.to_string())?;
        let check = &plan.targets[0].check;
        assert_eq!(check.port, 8080, "from a.toml");
        assert_eq!(check.timing.fall, 4, "from b.toml");
        assert_eq!(
            check.timing.interval,
            Duration::from_millis(250),
            "env wins"
        );
        assert_eq!(check.timing.timeout, Duration::from_millis(100), "env wins");
        assert_eq!(check.timing.rise, 1, "built-in default");
        assert_eq!(
            check.timing.fast_interval,
            Duration::from_millis(100),
            "built-in default"
        );
        assert_eq!(plan.api_listen.to_string(), "127.0.0.1:9999");
        match check.settings.downcast::<HttpCheck>() {
            Some(h) => {
                assert_eq!(h.path, "/ready", "endpoint override");
                assert_eq!(h.expect_status, vec![200]);
            }
            None => panic!("expected http, got {:?}", check.settings),
        }
        assert_eq!(
            plan.startup_grace,
            Duration::from_millis(750),
            "3 x longest interval"
        );
        Ok(())
    });
}

/// `interval` alone is a valid check: timeout and fast_interval follow it unless set; and
/// `expect_status` takes ranges.
#[test]
fn timing_defaults_follow_the_interval_and_status_ranges_expand() {
    Jail::expect_with(|jail| {
        jail.create_file(
            "a.toml",
            r#"
            [defaults.check]
            interval = "300ms"
            expect_status = [201, "200-204"]

            [[endpoints]]
            name = "a"
            address = "10.0.0.1"

            [[endpoints]]
            name = "b"
            address = "10.0.0.2"
            check = { interval = "5s" }

            [[tenants]]
            name = "t"
            domains = ["t.example"]
            sinks = ["local"]

            [sinks.local]
            kind = "hosts_file"
            dir = "/tmp/h"
            "#,
        )?;
        let plan = load_plan(&["a.toml"]).map_err(|e| e.to_string())?;
        let timing = |i: usize| plan.targets[i].check.timing;
        assert_eq!(timing(0).timeout, Duration::from_millis(240), "0.8 x 300ms");
        assert_eq!(timing(0).fast_interval, Duration::from_millis(100));
        assert_eq!(
            timing(1).timeout,
            Duration::from_millis(500),
            "capped at 500ms"
        );
        match plan.targets[0].check.settings.downcast::<HttpCheck>() {
            Some(h) => assert_eq!(h.expect_status, vec![201, 200, 201, 202, 203, 204]),
            None => panic!("expected http, got {:?}", plan.targets[0].check.settings),
        }
        jail.create_file("b.toml", "[defaults.check]\ninterval = \"50ms\"\n")?;
        let plan = load_plan(&["a.toml", "b.toml"]).map_err(|e| e.to_string())?;
        assert_eq!(
            plan.targets[0].check.timing.timeout,
            Duration::from_millis(40)
        );
        assert_eq!(
            plan.targets[0].check.timing.fast_interval,
            Duration::from_millis(50)
        );
        jail.create_file(
            "c.toml",
            "[defaults.check]\nexpect_status = [\"299-200\"]\n",
        )?;
        let err = load_plan(&["a.toml", "c.toml"]).unwrap_err().to_string();
        assert!(
            err.contains("\"299-200\" is neither a status code nor a range like \"200-299\""),
            "{err}"
        );
        Ok(())
    });
}

/// Endpoints with the same address and check share one target, hence one prober.
#[test]
fn identical_checks_share_a_target() {
    let plan = load_plan(&[dir("examples/multi-tenant.toml")]).unwrap();
    assert_eq!(plan.endpoints.len(), 4);
    assert_eq!(plan.targets.len(), 4);
    let t = &plan.tenants[0];
    let names: Vec<&str> = t
        .endpoints
        .iter()
        .map(|&i| plan.endpoints[i].name.as_ref())
        .collect();
    assert_eq!(names, ["ie-1", "ie-2"], "selector geo=IE");

    let mut config = load(&[dir("examples/minimal.toml")]).unwrap();
    let mut twin = config.endpoints[0].clone();
    twin.name = "node-1-again".into();
    config.endpoints.push(twin);
    config.tenants[0].endpoints = ho_config::EndpointSelection::Names(vec!["node-1-again".into()]);
    let plan = validate(&config, &CATALOG).unwrap();
    assert_eq!(plan.endpoints.len(), 4);
    assert_eq!(
        plan.targets.len(),
        3,
        "node-1 and node-1-again share a prober"
    );
    assert_eq!(plan.endpoints[3].target(), plan.endpoints[0].target());
}

/// Targets with equal checks hold one copy of the check, whether they inherit
/// `defaults.check` or repeat the same override: at 100,000 endpoints a copy each was
/// tens of MiB of RSS (bench/CHANGELOG.md).
#[test]
fn equal_checks_are_one_copy() {
    let mut config = load(&[dir("examples/minimal.toml")]).unwrap();
    let plan = validate(&config, &CATALOG).unwrap();
    let check = |e: usize| &plan.targets[plan.endpoints[e].target()].check;
    assert!(
        std::sync::Arc::ptr_eq(check(0), check(1)),
        "endpoints inheriting defaults.check share it"
    );

    for i in [1, 2] {
        config.endpoints[i].check.port = Some(9000);
    }
    let plan = validate(&config, &CATALOG).unwrap();
    let check = |e: usize| &plan.targets[plan.endpoints[e].target()].check;
    assert!(
        std::sync::Arc::ptr_eq(check(1), check(2)),
        "the same override resolves to one shared check"
    );
    assert!(!std::sync::Arc::ptr_eq(check(0), check(1)));
    assert_eq!(check(1).port, 9000);
    assert_ne!(check(0).port, 9000);
}

/// A missing file is an error naming the file, not an empty layer.
#[test]
fn missing_file_is_an_error() {
    let err = load(&["/nonexistent/ho.toml"]).unwrap_err();
    assert!(matches!(err, ConfigError::Unreadable { .. }));
    assert!(
        err.to_string()
            .starts_with("config file /nonexistent/ho.toml: "),
        "{err}"
    );
}

/// A bad environment override names the variable's key path.
#[test]
fn bad_environment_value_is_reported() {
    Jail::expect_with(|jail| {
        jail.set_env("HO_DEFAULTS__CHECK__RISE", "many");
        let err = load(&[dir("examples/minimal.toml")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("defaults.check.rise"), "{err}");
        assert!(
            err.contains("HO_"),
            "names the environment as the source: {err}"
        );
        Ok(())
    });
}

/// Addresses other clusters report join their voting tenant as endpoints probed with the
/// tenant's check; addresses the tenant has, and tenants that do not vote, are left alone.
#[test]
fn discovered_addresses_join_their_voting_tenant_once() {
    let plan = load_plan(&[dir("examples/multi-cluster.toml")]).unwrap();
    let found = |address: &str, name: &str| ho_config::Discovered {
        tenant: "tenant-a".into(),
        cluster: "us1".into(),
        address: address.parse().unwrap(),
        name: name.into(),
    };
    let more = plan.with_discovered(&[
        found("10.2.0.1", "us1-gw-1"),
        found("10.1.0.1", "same-address"),
        ho_config::Discovered {
            tenant: "no-such-tenant".into(),
            ..found("10.3.0.1", "x")
        },
    ]);
    assert_eq!(more.endpoints.len(), plan.endpoints.len() + 1);
    let added = more.endpoints.last().unwrap();
    assert_eq!(&*added.name, "us1/us1-gw-1");
    assert_eq!(added.cluster(), Some("us1"));
    assert_eq!(more.tenants[0].endpoints.len(), 3);
    let check = &more.targets[added.target()].check;
    assert_eq!(check, &plan.targets[plan.endpoints[0].target()].check);
    assert_eq!(more.targets.len(), plan.targets.len() + 1);
}

/// The running plan is the configured one itself unless host names or other clusters add
/// endpoints: a plan of every endpoint is not held twice.
#[test]
fn the_running_plan_shares_the_configured_one_unless_something_joins_it() {
    let plan = std::sync::Arc::new(load_plan(&[dir("examples/multi-cluster.toml")]).unwrap());
    let nothing = std::collections::BTreeMap::new();
    assert!(std::sync::Arc::ptr_eq(&plan.compose(&nothing, &[]), &plan));
    let found = ho_config::Discovered {
        tenant: "tenant-a".into(),
        cluster: "us1".into(),
        address: "10.2.0.1".parse().unwrap(),
        name: "us1-gw-1".into(),
    };
    let joined = plan.compose(&nothing, &[found]);
    assert!(!std::sync::Arc::ptr_eq(&joined, &plan));
    assert_eq!(joined.endpoints.len(), plan.endpoints.len() + 1);
}

/// An endpoint given by host name is kept apart until resolved, then becomes one endpoint
/// per address in each tenant that selects it (by name or label), probed with its check; an
/// address a tenant already has is not added twice.
#[test]
fn host_name_endpoints_become_one_endpoint_per_address() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hosts.toml");
    std::fs::write(
        &path,
        r#"
[[endpoints]]
name = "gw"
address = "10.0.0.1"
labels = { geo = "IE" }

[[endpoints]]
name = "lb"
address = "My-LB-123.elb.amazonaws.com."
labels = { geo = "US" }
weight = 5
check = { kind = "tcp", port = 443 }

[[tenants]]
name = "by-name"
domains = ["a.example.com"]
endpoints = ["gw", "lb"]
sinks = ["local"]

[[tenants]]
name = "by-label"
domains = ["b.example.com"]
selector = { geo = "US" }
sinks = ["local"]

[sinks.local]
kind = "hosts_file"
dir = "/tmp/hosts-test"
"#,
    )
    .unwrap();
    let plan = load_plan(&[&path]).unwrap();
    assert_eq!(plan.endpoints.len(), 1, "only gw until resolved");
    assert_eq!(plan.hosts.len(), 1);
    assert_eq!(plan.hosts[0].host, "my-lb-123.elb.amazonaws.com");
    assert_eq!(plan.hosts[0].tenants, vec![0, 1]);
    assert_eq!(plan.tenants[0].endpoints, vec![0]);
    assert!(plan.tenants[1].endpoints.is_empty());
    let resolved = std::collections::BTreeMap::from([(
        "my-lb-123.elb.amazonaws.com".to_string(),
        vec!["10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap()],
    )]);
    let run = plan.with_resolved(&resolved);
    let names: Vec<&str> = run.endpoints.iter().map(|e| e.name.as_ref()).collect();
    assert_eq!(names, ["gw", "lb@10.0.0.1", "lb@10.0.0.2"]);
    assert_eq!(
        run.tenants[0].endpoints,
        vec![0, 2],
        "10.0.0.1 is gw's already"
    );
    assert_eq!(run.tenants[1].endpoints, vec![1, 2]);
    let lb = &run.endpoints[2];
    assert_eq!((lb.weight, lb.labels()["geo"].as_str()), (Some(5), "US"));
    assert_eq!(run.targets[lb.target()].check.port, 443);
    assert_eq!(
        run.targets.len(),
        3,
        "gw's check, and the lb's at each address"
    );
}

/// A validation error names the file or variable its value came from, as a parse error
/// does: the last layer that gave it, file or variable (`HO_ENDPOINTS` for its elements).
/// A value an endpoint's check inherits is not named, nor a built-in default (`endpoints:
/// none configured` in config/tests/bad).
#[test]
fn a_validation_error_names_where_its_value_came_from() {
    Jail::expect_with(|jail| {
        jail.create_file(
            "base.toml",
            "[[endpoints]]\nname = \"a\"\naddress = \"10.0.0.1\"\n\
             [[endpoints]]\nname = \"b\"\naddress = \"10.0.0.2\"\ncheck = { port = 0 }\n\
             [[tenants]]\nname = \"t\"\ndomains = [\"t.example\"]\nsinks = [\"local\"]\n\
             [[tenants]]\nname = \"u\"\ndomains = [\"u.example\"]\nsinks = []\n\
             [sinks.local]\nkind = \"hosts_file\"\ndir = \"/tmp/ho-a\"\n\
             [sinks.local.delivery]\nmax_in_flight = 4\n",
        )?;
        jail.create_file("over.toml", "[sinks.local.delivery]\nmax_in_flight = 0\n")?;
        jail.set_env("HO_DEFAULTS__CHECK__RISE", "0");
        let err = load_plan(&["base.toml", "over.toml"])
            .unwrap_err()
            .to_string();
        assert_eq!(
            err.lines().collect::<Vec<_>>(),
            [
                "environment HO_DEFAULTS__CHECK__RISE: defaults.check.rise: must be at least 1 (inherited by endpoints[1].check)",
                "base.toml: endpoints[1].check.port: 0 is not a port number from 1 to 65535",
                "over.toml: sinks.local.delivery.max_in_flight: must be at least 1 (0 would never write)",
                "base.toml: tenants[1].sinks: must name at least one sink: nothing would be published",
            ]
        );
        jail.set_env(
            "HO_ENDPOINTS",
            r#"[{name="a", address="10.0.0.1", check={port=0}}]"#,
        );
        let err = load_plan(&["base.toml"]).unwrap_err().to_string();
        assert_eq!(
            err.lines().collect::<Vec<_>>(),
            [
                "environment HO_DEFAULTS__CHECK__RISE: defaults.check.rise: must be at least 1 (inherited by endpoints[0].check)",
                "environment HO_ENDPOINTS: endpoints[0].check.port: 0 is not a port number from 1 to 65535",
                "base.toml: tenants[1].sinks: must name at least one sink: nothing would be published",
            ]
        );
        Ok(())
    });
}
