//! Every alert of the shipped rules has a `runbook_url` into docs/runbooks.md, at a heading
//! that is that alert's section: the anchor worked out as GitHub does (lower case, spaces to
//! `-`, other punctuation dropped), independently of how the rules spell it. The URL is
//! relative unless the workspace's Cargo.toml names a `repository` (or `homepage`): then it
//! must be `<repository>/blob/main/docs/runbooks.md#<anchor>`. Every section is some alert's,
//! and every in-page link of the runbooks resolves.

use std::collections::BTreeMap;

use crate::cli::repo;

const RUNBOOKS: &str = "docs/runbooks.md";

/// The anchor GitHub gives a heading's text.
fn github_anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every heading of `markdown` outside code blocks, by anchor (each anchor once).
fn headings(markdown: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut in_code = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        let Some(text) = line.strip_prefix('#').filter(|_| !in_code) else {
            continue;
        };
        let text = text.trim_start_matches('#').trim().to_owned();
        let anchor = github_anchor(&text);
        assert!(
            out.insert(anchor.clone(), text).is_none(),
            "two headings give #{anchor}"
        );
    }
    out
}

/// Where links into the docs start: `<repository>/blob/main/`, or nothing.
fn docs_base() -> String {
    let cargo: toml::Table = std::fs::read_to_string(repo("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let field = |table: Option<&toml::Value>| {
        let table = table?.as_table()?;
        ["repository", "homepage"]
            .iter()
            .find_map(|k| table.get(*k)?.as_str().map(str::to_owned))
    };
    let workspace_package = cargo.get("workspace").and_then(|w| w.get("package"));
    field(workspace_package)
        .or_else(|| field(cargo.get("package")))
        .map_or(String::new(), |r| {
            format!("{}/blob/main/", r.trim_end_matches('/'))
        })
}

/// Every alert of the shipped rules with its `runbook_url` (empty when missing).
fn alerts() -> Vec<(String, String)> {
    let rule: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(repo("deploy/kubernetes/monitoring/prometheusrule.yaml")).unwrap(),
    )
    .unwrap();
    (rule["spec"]["groups"].as_sequence().unwrap().iter())
        .flat_map(|g| g["rules"].as_sequence().unwrap())
        .filter_map(|r| {
            let alert = r["alert"].as_str()?;
            let url = r["annotations"]["runbook_url"].as_str().unwrap_or_default();
            Some((alert.to_owned(), url.to_owned()))
        })
        .collect()
}

#[test]
fn every_alert_has_a_runbook_section() {
    let text = std::fs::read_to_string(repo(RUNBOOKS)).unwrap();
    let sections = headings(&text);
    let prefix = format!("{}{RUNBOOKS}#", docs_base());
    let alerts = alerts();
    assert!(alerts.len() >= 16, "{alerts:?}");
    for (alert, url) in &alerts {
        let anchor = url
            .strip_prefix(&prefix)
            .unwrap_or_else(|| panic!("{alert}: runbook_url {url:?} does not start {prefix:?}"));
        let heading = sections
            .get(anchor)
            .unwrap_or_else(|| panic!("{alert}: no heading of {RUNBOOKS} gives #{anchor}"));
        assert_eq!(
            heading, alert,
            "{alert}'s runbook_url points at another section"
        );
    }
    let orphans: Vec<&String> = (sections.values())
        .filter(|h| *h != "Runbooks" && !alerts.iter().any(|(a, _)| a == *h))
        .collect();
    assert!(orphans.is_empty(), "sections of no alert: {orphans:?}");
    for link in text.split("](#").skip(1) {
        let anchor = &link[..link.find(')').unwrap()];
        assert!(
            sections.contains_key(anchor),
            "a link to #{anchor}, no such heading"
        );
    }
}

#[test]
fn anchors_are_made_as_github_makes_them() {
    assert_eq!(github_anchor("AllNodesDown"), "allnodesdown");
    assert_eq!(
        github_anchor("What resolvers were handed: the answer canary"),
        "what-resolvers-were-handed-the-answer-canary"
    );
    assert_eq!(
        github_anchor("Sharing the probing: `[ring]`"),
        "sharing-the-probing-ring"
    );
}
