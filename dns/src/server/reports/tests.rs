use std::net::IpAddr;
use std::sync::atomic::Ordering;

use super::shelf::RELAY_BUDGET;
use super::*;
use hickory_proto::rr::rdata::tsig::TsigAlgorithm;

fn peers() -> Peers {
    let key = TSigner::new(
        vec![7; 32],
        TsigAlgorithm::HmacSha256,
        Name::from_ascii("reports.").unwrap(),
        300,
    )
    .unwrap();
    let config = ReportsConfig {
        peers: vec!["127.0.0.1:1".parse().unwrap()],
        tsig: crate::wire::key::TsigConfig {
            name: "reports".into(),
            algorithm: "hmac-sha256".into(),
            secret_file: "/dev/null".into(),
        },
        timeout: Duration::from_secs(1),
    };
    let store = DnsReports::new(
        &config,
        key,
        Arc::default(),
        (Duration::from_secs(2), Duration::from_secs(60)),
        None,
    );
    Arc::try_unwrap(store.0).ok().unwrap()
}

fn report(cluster: &str, at_ms: u64) -> Vec<String> {
    Report {
        owner: "o".into(),
        cluster: cluster.into(),
        at_ms,
        owned: Vec::new(),
        down: vec!["192.0.2.1".parse().unwrap()],
    }
    .encode()
}

fn answered(suffix: &str, own: Option<Vec<String>>) -> Answered {
    Answered {
        suffix: suffix.into(),
        own,
        relayed: Vec::new(),
    }
}

#[test]
fn report_names_are_told_from_others() {
    assert_eq!(
        report_question("_ho-report.api.example.org"),
        Some(("._ho-report.api.example.org".into(), None))
    );
    assert_eq!(
        report_question("eu1._ho-report.api.example.org"),
        Some(("._ho-report.api.example.org".into(), Some("eu1")))
    );
    assert_eq!(report_question("api.example.org"), None);
    assert_eq!(report_question("_ho-reporter.api.example.org"), None);
    assert_eq!(report_question("a.b._ho-report.api.example.org"), None);
}

#[test]
fn the_shelf_answers_its_own_report_by_suffix_or_full_name() {
    let shelf = Shelf::default();
    let client: IpAddr = "192.0.2.9".parse().unwrap();
    let qname = Name::from_ascii("_ho-report.api.example.org.").unwrap();
    let suffix = "._ho-report.api.example.org";
    assert_eq!(
        shelf.answer(&qname, suffix, None, client),
        None,
        "nothing written since the start: not \"no report\" but SERVFAIL"
    );
    let texts = vec!["x".repeat(300)];
    shelf.hold(vec![Rrset::new(
        "EU1._ho-report.api.example.org",
        texts.clone(),
    )]);
    let records = shelf.answer(&qname, suffix, None, client).unwrap();
    assert_eq!(records.len(), 1);
    let RData::TXT(txt) = &records[0].data else {
        panic!("TXT");
    };
    assert_eq!(txt.txt_data.len(), 2, "split in 255-character strings");
    assert_eq!(txt.txt_data.concat(), texts[0].as_bytes());
    let answer = |cluster, suffix| shelf.answer(&qname, suffix, cluster, client).unwrap();
    assert_eq!(answer(Some("eu1"), suffix).len(), 1);
    assert!(answer(Some("eu2"), suffix).is_empty());
    assert!(answer(None, "._ho-report.other.org").is_empty());
    assert!(shelf.told_absent.lock().unwrap().contains(&client));
}

#[test]
fn a_peer_that_cannot_be_asked_keeps_its_last_report_and_one_without_loses_it() {
    let p = peers();
    let peer: SocketAddr = "127.0.0.1:1".parse().unwrap();
    let suffixes = vec![
        "._ho-report.a.org".to_string(),
        "._ho-report.b.org".to_string(),
    ];
    let first = p.remember(
        peer,
        &suffixes,
        Ok(vec![
            answered(&suffixes[0], Some(report("us1", 1))),
            answered(&suffixes[1], Some(report("us1", 1))),
        ]),
    );
    assert_eq!(first.len(), 2);
    assert_eq!(
        first[0].name, "us1._ho-report.a.org",
        "named by the report's cluster"
    );
    let unreachable = p.remember(peer, &suffixes, Err("refused".into()));
    assert_eq!(unreachable, first, "the last answers, stamps unchanged");
    assert!(p.last.lock().unwrap()[&peer].failing);
    let garbled = p.remember(
        peer,
        &suffixes,
        Ok(vec![
            answered(&suffixes[0], Some(vec!["garbage".into()])),
            answered(&suffixes[1], None),
        ]),
    );
    assert_eq!(
        garbled,
        vec![Rrset::new(
            "us1._ho-report.a.org",
            vec!["garbage".to_string()]
        )],
        "a report that does not parse stays under its name (the rounds keep its last good \
         content); one the peer no longer holds is gone"
    );
    assert!(!p.last.lock().unwrap()[&peer].failing);
}

#[test]
fn the_first_count_waits_for_every_peer_until_the_patience_runs_out() {
    let p = peers();
    let peer: SocketAddr = "127.0.0.1:1".parse().unwrap();
    let suffixes = vec!["._ho-report.a.org".to_string()];
    p.remember(peer, &suffixes, Err("refused".into()));
    let waiting = p.unheard_within_patience().unwrap_err();
    assert!(waiting.to_string().contains("127.0.0.1:1"), "{waiting}");
    p.remember(peer, &suffixes, Ok(vec![answered(&suffixes[0], None)]));
    assert!(
        p.unheard_within_patience().is_ok(),
        "answered \"no report\""
    );
    p.remember(peer, &suffixes, Err("refused".into()));
    assert!(p.unheard_within_patience().is_ok(), "heard once: enough");
    let mut q = peers();
    q.patience = std::time::Instant::now();
    assert!(q.unheard_within_patience().is_ok(), "patience over");
}

#[test]
fn the_shelf_relays_whole_reports_within_its_budget() {
    let shelf = Shelf::default();
    let client: IpAddr = "192.0.2.9".parse().unwrap();
    let qname = Name::from_ascii("_ho-relay._ho-report.api.example.org.").unwrap();
    let suffix = "._ho-report.api.example.org";
    shelf.prime();
    let relay = |reports: Vec<Vec<String>>| {
        shelf.relay(HashMap::from([(suffix.to_string(), reports)]));
        shelf
            .answer(&qname, suffix, Some(RELAY_LABEL), client)
            .unwrap()
    };
    assert!(relay(Vec::new()).is_empty());
    let small = report("us1", 1);
    let large = vec!["y".repeat(RELAY_BUDGET)];
    let records = relay(vec![small.clone(), large, report("eu2", 1)]);
    assert_eq!(records.len(), 2, "us1's and eu2's, the large one left out");
    assert!(shelf.over_budget.load(Ordering::Relaxed));
    assert!(
        shelf.told_absent.lock().unwrap().is_empty(),
        "a relay is no \"no report\""
    );
    let texts: Vec<String> = records
        .iter()
        .map(|r| match &r.data {
            RData::TXT(txt) => String::from_utf8(txt.txt_data.concat()).unwrap(),
            _ => panic!("TXT"),
        })
        .collect();
    assert_eq!(texts[0], small[0]);
    assert_eq!(cluster_of(&texts[1]), Some("eu2"));
}

/// What peers relay reaches the rounds named per cluster, except a cluster that itself
/// answers "no report" (it left); what this server relays is each peer's own report.
#[test]
fn relays_are_named_by_cluster_and_a_cluster_that_left_is_not_relayed() {
    let mut p = peers();
    let (first, second): (SocketAddr, SocketAddr) = (
        "127.0.0.1:1".parse().unwrap(),
        "127.0.0.1:2".parse().unwrap(),
    );
    p.peers.push(second);
    let suffix = "._ho-report.a.org".to_string();
    let suffixes = vec![suffix.clone()];
    let mut relayed = report("eu2", 5);
    relayed.extend(report("ap3", 5));
    let from_first = Answered {
        suffix: suffix.clone(),
        own: Some(report("us1", 1)),
        relayed,
    };
    p.remember(first, &suffixes, Ok(vec![from_first]));
    let restarted = Answered {
        suffix: suffix.clone(),
        own: Some(report("us1", 2)),
        relayed: report("eu2", 6),
    };
    p.remember(first, &suffixes, Ok(vec![restarted]));
    let relays = p.relays(&suffixes);
    let names: Vec<&str> = relays.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "ap3._ho-relay._ho-report.a.org",
            "eu2._ho-relay._ho-report.a.org"
        ],
        "ap3's last relay kept though the peer no longer relays it"
    );
    assert_eq!(relays[1].texts, report("eu2", 6), "the newer relay of eu2");
    let eu2 = answered(&suffix, Some(report("eu2", 6)));
    p.remember(second, &suffixes, Ok(vec![eu2]));
    assert_eq!(
        p.to_relay(&suffixes)[&suffix],
        [report("us1", 2), report("eu2", 6)],
        "each peer's own report, not what it relays"
    );
    p.remember(second, &suffixes, Ok(vec![answered(&suffix, None)]));
    let names: Vec<String> = p.relays(&suffixes).into_iter().map(|r| r.name).collect();
    assert_eq!(names, ["ap3._ho-relay._ho-report.a.org"], "eu2 left");
    let gone = Report::decode(&p.to_relay(&suffixes)[&suffix][1]).unwrap();
    assert_eq!(
        (
            gone.cluster.as_str(),
            gone.at_ms,
            gone.owned.len(),
            gone.down.len()
        ),
        ("eu2", 7, 0, 0),
        "what eu2 left: its last report emptied, one millisecond newer"
    );
}

/// Reports recalled after a restart are relayed (but for a cluster read itself) until
/// every peer has answered.
#[test]
fn recalled_reports_are_relayed_until_every_peer_has_answered() {
    let mut p = peers();
    let suffix = "._ho-report.a.org".to_string();
    let suffixes = vec![suffix.clone()];
    let mut recalled = report("us1", 0);
    recalled.extend(report("ap3", 0));
    p.recall = Recall::new(HashMap::from([(suffix.clone(), recalled)]), None);
    let peer = p.peers[0];
    let us1 = answered(&suffix, Some(report("us1", 7)));
    p.remember(peer, &suffixes, Ok(vec![us1]));
    assert_eq!(
        p.to_relay(&suffixes)[&suffix],
        [report("us1", 7), report("ap3", 0)],
        "us1 as read, ap3 as recalled"
    );
    p.recall.forget();
    assert_eq!(p.to_relay(&suffixes)[&suffix], [report("us1", 7)]);
}
