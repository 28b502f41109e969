//! The last-accepted rule, decided through admission with the helpers of `admit_tests`.

use super::admit::{Admitter, Verdict};
use super::admit_tests::{addresses, base, refusal, resource, verdict, World, CATALOG};
use super::resource::DNSFailover;

/// `team-a/api`, accepted as it is: `api.team-a.io` at 192.0.2.10.
fn team_a_api() -> DNSFailover {
    resource(
        "team-a",
        "api",
        0,
        &["api.team-a.io"],
        vec![addresses(&["192.0.2.10"])],
    )
}

/// An accepted resource edited into something refused (an invalid check, a domain its
/// namespace may not claim or someone else holds, a sink it may not use) keeps publishing
/// its last accepted generation; a valid edit replaces it; deleted and created again, a
/// refused resource publishes nothing.
#[test]
fn a_refused_edit_keeps_the_last_accepted_generation_publishing() {
    let mut admitter = Admitter::default();
    let world = World::default();
    let mut r = team_a_api();
    let a = admitter.admit(&base(), &[&r], &world, &CATALOG);
    assert!(matches!(
        verdict(&a, "team-a", "api"),
        Verdict::Accepted { .. }
    ));
    // The resource's tenant's domains and the addresses published.
    let published = |a: &super::admit::Admission| {
        let t = a
            .config
            .tenants
            .iter()
            .find(|t| t.name == "team-a_api")
            .map(|t| t.domains.clone());
        let addresses: Vec<String> = a
            .config
            .endpoints
            .iter()
            .map(|e| e.address.clone())
            .collect();
        (t, addresses)
    };
    let first = published(&a);
    assert_eq!(first.0, Some(vec!["api.team-a.io".to_string()]));
    assert!(first.1.contains(&"192.0.2.10".to_string()), "{first:?}");

    type Edit = fn(&mut DNSFailover);
    let edits: [(&str, Edit); 4] = [
        ("Invalid", |r| {
            r.spec.check = Some(toml::from_str("rise = 0").unwrap())
        }),
        ("DomainNotAllowed", |r| {
            r.spec.domains = vec!["api.team-b.io".into()]
        }),
        ("SinkNotAllowed", |r| r.spec.sinks = vec!["other".into()]),
        ("DomainClaimed", |r| {
            r.spec.domains = vec!["www.team-a.io".into()]
        }),
    ];
    for (generation, (reason, edit)) in (2..).zip(edits) {
        let mut edited = r.clone();
        edit(&mut edited);
        edited.metadata.generation = Some(generation);
        let a = admitter.admit(&base(), &[&edited], &world, &CATALOG);
        match verdict(&a, "team-a", "api") {
            Verdict::KeptLast {
                serving,
                reason: refused,
                ..
            } => {
                assert_eq!(*refused, reason);
                assert_eq!(*serving, Some(1), "generation 1 keeps publishing");
            }
            other => panic!("{reason}: expected the last generation kept, got {other:?}"),
        }
        assert_eq!(
            published(&a),
            first,
            "{reason}: the same names and endpoints"
        );
    }

    r.spec.domains = vec!["app.team-a.io".into()];
    r.metadata.generation = Some(6);
    let a = admitter.admit(&base(), &[&r], &world, &CATALOG);
    assert!(matches!(
        verdict(&a, "team-a", "api"),
        Verdict::Accepted { .. }
    ));
    let fixed = published(&a);
    assert_eq!(
        fixed.0,
        Some(vec!["app.team-a.io".to_string()]),
        "a valid edit replaces it"
    );

    // Deleted (no longer listed), then created again with an invalid spec: nothing kept.
    admitter.admit(&base(), &[], &world, &CATALOG);
    let mut again = r.clone();
    again.spec.check = Some(toml::from_str("rise = 0").unwrap());
    let a = admitter.admit(&base(), &[&again], &world, &CATALOG);
    assert_eq!(refusal(verdict(&a, "team-a", "api")).0, "Invalid");
    assert_eq!(published(&a).0, None);
}

/// With `state_dir`, the last accepted generation outlives the process: a restart with a
/// refused edit in place still publishes the generation before it. A file that cannot be
/// read starts admission from nothing.
#[test]
fn the_last_accepted_generation_is_kept_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let world = World::default();
    let mut r = team_a_api();
    let a = Admitter::keeping_in(Some(dir.path())).admit(&base(), &[&r], &world, &CATALOG);
    assert!(matches!(
        verdict(&a, "team-a", "api"),
        Verdict::Accepted { .. }
    ));

    r.spec.check = Some(toml::from_str("rise = 0").unwrap());
    r.metadata.generation = Some(2);
    let restarted = Admitter::keeping_in(Some(dir.path())).admit(&base(), &[&r], &world, &CATALOG);
    match verdict(&restarted, "team-a", "api") {
        Verdict::KeptLast { serving, .. } => assert_eq!(*serving, Some(1)),
        other => panic!("expected generation 1 kept after the restart, got {other:?}"),
    }
    assert!(restarted
        .config
        .endpoints
        .iter()
        .any(|e| e.address == "192.0.2.10"));

    std::fs::write(dir.path().join("accepted.json"), "{not json").unwrap();
    let a = Admitter::keeping_in(Some(dir.path())).admit(&base(), &[&r], &world, &CATALOG);
    assert_eq!(refusal(verdict(&a, "team-a", "api")).0, "Invalid");
}

/// A resource refused before admission (a Kuadrant record that no longer translates, by its
/// stand-in's key) keeps publishing its last accepted generation like any refused edit.
#[test]
fn a_record_that_stops_translating_keeps_its_last_accepted_generation() {
    let mut admitter = Admitter::default();
    let world = World::default();
    let stand_in = team_a_api();
    admitter.admit(&base(), &[&stand_in], &world, &CATALOG);
    let refused = Verdict::Refused {
        reason: "Invalid",
        message: "the record does not translate".into(),
    };
    let key = ("team-a".to_string(), "api".to_string());
    let a = admitter.admit_with(
        &base(),
        &[],
        vec![(key.clone(), refused.clone())],
        &world,
        &CATALOG,
    );
    assert!(
        matches!(verdict(&a, "team-a", "api"), Verdict::KeptLast { .. }),
        "{:?}",
        verdict(&a, "team-a", "api")
    );
    assert!(a.config.endpoints.iter().any(|e| e.address == "192.0.2.10"));
    // Never accepted: the refusal stands.
    let a = Admitter::default().admit_with(&base(), &[], vec![(key, refused)], &world, &CATALOG);
    assert_eq!(refusal(verdict(&a, "team-a", "api")).0, "Invalid");
}

/// A base-config reload that would refuse an accepted resource (its namespace's allowance
/// narrowed to another domain) keeps its last accepted generation publishing, as a refused
/// edit does; the allowance restored, it is accepted again.
#[test]
fn a_reload_that_would_refuse_a_resource_keeps_it_publishing() {
    let mut admitter = Admitter::default();
    let world = World::default();
    let r = team_a_api();
    let a = admitter.admit(&base(), &[&r], &world, &CATALOG);
    assert!(matches!(
        verdict(&a, "team-a", "api"),
        Verdict::Accepted { .. }
    ));

    let mut narrowed = base();
    let allow = narrowed
        .kubernetes
        .allow
        .iter_mut()
        .find(|a| a.namespace == "team-a")
        .unwrap();
    allow.domains = vec!["elsewhere.example".into()];
    let a = admitter.admit(&narrowed, &[&r], &world, &CATALOG);
    match verdict(&a, "team-a", "api") {
        Verdict::KeptLast { reason, .. } => assert_eq!(*reason, "DomainNotAllowed"),
        other => panic!("{other:?}"),
    }
    assert!(
        a.config.tenants.iter().any(|t| t.name == "team-a_api"),
        "still published"
    );

    let a = admitter.admit(&base(), &[&r], &world, &CATALOG);
    assert!(matches!(
        verdict(&a, "team-a", "api"),
        Verdict::Accepted { .. }
    ));
}
