//! One script for every sink whose canary reads the provider's zone listing (Cloudflare,
//! Cloud DNS, Azure DNS): each provider's test server loses a name's records and has them
//! put back by hand, and the canary must see both through the listing alone.

use ho_testkit::Gateway;

use super::*;

/// A tenant `t` publishing `api.tenant-a.io` through `sink` (its table, header included)
/// with the canary listing the zone every 200 ms and reconciles an hour apart, so only the
/// canary can see a change made behind the sink's back. Once served as decided for longer
/// than the grace, `lose` drops the name's records at the provider: the name must be
/// reported stale, served nothing; `put_back` (given each gateway's address) restores them
/// by hand: the report must be withdrawn.
pub async fn listing_canary_sees_lost_records(
    sink: &str,
    table: &str,
    gws: &[Gateway],
    lose: impl Fn(),
    put_back: impl Fn(&str),
) {
    let dir = tempfile::tempdir().unwrap();
    let text = TestConfig::new(&Check::FAST, &gws.iter().collect::<Vec<_>>())
        .with(&format!(
            "[[tenants]]\nname = \"t\"\ndomains = [\"api.tenant-a.io\"]\nsinks = [\"{sink}\"]\nttl = \"60s\"\n"
        ))
        .with(&format!(
            "{table}canary = {{ every = \"200ms\", grace = \"1s\" }}\n\
             delivery = {{ reconcile_interval = \"1h\" }}\n"
        ))
        .render();
    let engine = start_engine(dir.path(), &text).await;
    let api = serve_api(&engine, None, None).await;
    // Served as decided for longer than the grace: a loss now is a drift nobody decided.
    wait_questions(api, sink, "match", 6.0).await;

    lose();
    let names = ["api.tenant-a.io".to_owned()];
    let seen = wait_stale(api, sink, &names, true).await;
    println!(
        "records lost at {sink}: reported stale after {} ms",
        seen.as_millis()
    );
    let stale = canary_stale(api, sink).await;
    assert_eq!(stale[0]["name"], "api.tenant-a.io");
    assert_eq!(stale[0]["served"], serde_json::json!([]), "{stale:?}");

    for g in gws {
        put_back(&ip(g));
    }
    wait_stale(api, sink, &names, false).await;
    drop(engine);
}
