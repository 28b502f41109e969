//! Names a tenant source may still declare: SERVFAIL (not authoritative, never kept) until
//! its first round is applied or the hold runs out, then NXDOMAIN as before.

use std::time::{Duration, Instant};

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use ho_config::RoutingPolicy;
use ho_engine::snapshot::TenantSnapshot;

use super::tests::{address, ask, config};
use super::Authority;
use crate::server::build;
use crate::server::records::Records;

/// A server holding for `hold`, publishing `api.example.org`.
fn holding(hold: Duration) -> Authority {
    let mut records = Records::default();
    records.await_source(Instant::now() + hold);
    let addresses = vec![address("192.0.2.1", 1, "US")];
    let snapshot =
        TenantSnapshot::healthy("t", &["api.example.org"], RoutingPolicy::All, addresses);
    records.publish(&snapshot);
    build::authority(&config(), records).unwrap()
}

fn rcode(a: &Authority, name: &str) -> (ResponseCode, bool) {
    let m = ask(a, name, RecordType::A);
    (m.metadata.response_code, m.metadata.authoritative)
}

#[test]
fn an_unknown_name_is_servfail_until_the_source_arrives_then_nxdomain() {
    let a = holding(Duration::from_secs(600));
    // Asked twice: the held answer is not kept past the hold.
    for _ in 0..2 {
        assert_eq!(
            rcode(&a, "later.example.org."),
            (ResponseCode::ServFail, false)
        );
    }
    assert_eq!(rcode(&a, "api.example.org."), (ResponseCode::NoError, true));
    assert_eq!(rcode(&a, "example.org."), (ResponseCode::NoError, true));
    assert_eq!(rcode(&a, "example.com."), (ResponseCode::Refused, false));

    // The source's first round declares `later`: it waits for its first snapshot.
    let later = ["later.example.org".to_owned()];
    a.follow_plan(
        [
            ("t", &["api.example.org".to_owned()][..]),
            ("k", &later[..]),
        ],
        true,
    );
    assert_eq!(
        rcode(&a, "later.example.org."),
        (ResponseCode::ServFail, false)
    );
    assert_eq!(
        rcode(&a, "gone.example.org."),
        (ResponseCode::NXDomain, true)
    );

    // `k` leaves before it ever published: its name does not exist.
    a.follow_plan([("t", &["api.example.org".to_owned()][..])], true);
    assert_eq!(
        rcode(&a, "later.example.org."),
        (ResponseCode::NXDomain, true)
    );
    assert_eq!(rcode(&a, "api.example.org."), (ResponseCode::NoError, true));
}

#[test]
fn the_hold_ends_by_itself_when_the_source_never_arrives() {
    let a = holding(Duration::from_millis(30));
    assert_eq!(
        rcode(&a, "later.example.org."),
        (ResponseCode::ServFail, false)
    );
    let until = Instant::now() + Duration::from_secs(5);
    while rcode(&a, "later.example.org.").0 == ResponseCode::ServFail {
        assert!(Instant::now() < until, "still SERVFAIL after the hold");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        rcode(&a, "later.example.org."),
        (ResponseCode::NXDomain, true)
    );
}

#[test]
fn a_plan_applied_before_the_source_arrives_keeps_the_hold() {
    let a = holding(Duration::from_secs(600));
    a.follow_plan([("t", &["api.example.org".to_owned()][..])], false);
    assert_eq!(
        rcode(&a, "later.example.org."),
        (ResponseCode::ServFail, false)
    );
}
