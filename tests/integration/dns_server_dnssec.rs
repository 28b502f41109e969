//! DNSSEC on the embedded server, judged by BIND: `delv` validates every answer from a
//! trust anchor made of the key-signing key, with keys from BIND's `dnssec-keygen` and
//! from `health-orchestrator dnssec keygen`, through failover and a ZSK rollover.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ho_testkit::Behaviour;
use tokio::time::Instant;

use crate::harness::*;

/// One `delv` answer: whether it validated, and what it printed.
struct Validated {
    secure: bool,
    text: String,
}

impl Validated {
    /// Addresses of the answer section, sorted.
    fn addresses(&self) -> Vec<String> {
        let mut a: Vec<String> = self
            .text
            .lines()
            .filter(|l| !l.starts_with(';'))
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() == 5 && f[3] == "A").then(|| f[4].to_owned())
            })
            .collect();
        a.sort();
        a
    }

    /// Key tags of the RRSIGs over `qtype` in the answer.
    fn signed_by(&self, qtype: &str) -> Vec<String> {
        self.text
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() > 10 && f[3] == "RRSIG" && f[4] == qtype).then(|| f[10].to_owned())
            })
            .collect()
    }
}

/// `delv` (BIND 9, from `.ci/test`'s bind9-dnsutils) asking `server` for `name qtype`,
/// with `anchors` as the only trust anchor (`+root=example.org`: no root zone involved).
async fn delv(server: SocketAddr, anchors: &Path, name: &str, qtype: &str) -> Validated {
    assert!(
        Path::new("/usr/bin/delv").exists(),
        "delv is missing: run the test command (bash .ci/test), which installs bind9-dnsutils"
    );
    let args: Vec<String> = vec![
        format!("@{}", server.ip()),
        "-p".into(),
        server.port().to_string(),
        "-a".into(),
        anchors.display().to_string(),
        "+root=example.org".into(),
        "+nocrypto".into(),
        name.into(),
        qtype.into(),
    ];
    let out = tokio::task::spawn_blocking(move || Command::new("delv").args(args).output())
        .await
        .unwrap()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Validated {
        secure: text.contains("fully validated"),
        text,
    }
}

/// A trust-anchor file for `delv` holding every key-signing key (flags 257) in `keys`.
fn anchors(keys: &Path, out: &Path) {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(keys).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "key") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let record = text.lines().find(|l| !l.starts_with(';')).unwrap();
        let f: Vec<&str> = record.split_whitespace().collect();
        let at = f.iter().position(|x| *x == "DNSKEY").unwrap();
        if f[at + 1] == "257" {
            lines.push(format!(
                "example.org. static-key 257 3 {} \"{}\";",
                f[at + 3],
                f[at + 4..].concat()
            ));
        }
    }
    assert!(!lines.is_empty(), "a key-signing key in {}", keys.display());
    std::fs::write(
        out,
        format!("trust-anchors {{\n{}\n}};\n", lines.join("\n")),
    )
    .unwrap();
}

/// Keys for `example.org` made by BIND's `dnssec-keygen` in `dir/keys` (a P-256 KSK, an
/// Ed25519 ZSK) and `delv`'s trust anchor for them: the key folder and the anchor file.
fn bind_keys(dir: &Path) -> (PathBuf, PathBuf) {
    let keys = dir.join("keys");
    std::fs::create_dir(&keys).unwrap();
    let anchor_file = dir.join("anchors.conf");
    run(
        &keys,
        "dnssec-keygen",
        &["-q", "-a", "ECDSAP256SHA256", "-f", "KSK", "example.org"],
    );
    run(
        &keys,
        "dnssec-keygen",
        &["-q", "-a", "ED25519", "example.org"],
    );
    anchors(&keys, &anchor_file);
    (keys, anchor_file)
}

/// Runs `program args` in `dir`, which must succeed.
fn run(dir: &Path, program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An engine answering `api.example.org` from `gateways` with a `dns_server` signing
/// with the keys in `keys`.
async fn signing_engine(
    dir: &Path,
    keys: &Path,
    gateways: &[ho_testkit::Gateway],
) -> (ho_engine::Engine, SocketAddr) {
    let server = SocketAddr::new(loopback_ip().into(), 5353);
    let tail = format!(
        "[[tenants]]\nname = \"a\"\ndomains = [\"api.example.org\"]\nsinks = [\"dns\"]\n\n\
         [sinks.dns]\nkind = \"dns_server\"\nlisten = [\"{server}\"]\nzones = [\"example.org\"]\n\
         dnssec = {{ keys = \"{}\" }}\n",
        keys.display()
    );
    let engine = start_engine(
        dir,
        &config(&Check::FAST, &gateways.iter().collect::<Vec<_>>(), &tail),
    )
    .await;
    (engine, server)
}

/// Polls `delv` until the validated answer of `api.example.org A` is `want`; every
/// answer on the way must validate.
async fn wait_validated(server: SocketAddr, anchors: &Path, want: &[String]) -> Validated {
    let start = Instant::now();
    let mut want = want.to_vec();
    want.sort();
    loop {
        let v = delv(server, anchors, "api.example.org", "A").await;
        if v.secure && v.addresses() == want {
            return v;
        }
        assert!(
            start.elapsed() < LIMIT,
            "wanted a validated {want:?}, got:\n{}",
            v.text
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Keys made by BIND's `dnssec-keygen` (a P-256 KSK, an Ed25519 ZSK): positive answers,
/// a name that does not exist, a type a name lacks and the apex's SOA all validate, and
/// so does the answer after a gateway fails.
#[actix_rt::test]
async fn bind_made_keys_sign_answers_that_delv_validates_through_a_failover() {
    let dir = tempfile::tempdir().unwrap();
    let (keys, anchor_file) = bind_keys(dir.path());
    let mut gws = gateways(2);
    let (_engine, server) = signing_engine(dir.path(), &keys, &gws).await;
    let both: Vec<String> = gws.iter().map(ip).collect();
    wait_validated(server, &anchor_file, &both).await;

    let nx = delv(server, &anchor_file, "nope.example.org", "A").await;
    assert!(
        nx.text.contains("negative response, fully validated"),
        "{}",
        nx.text
    );
    let nodata = delv(server, &anchor_file, "api.example.org", "AAAA").await;
    assert!(
        nodata.text.contains("negative response, fully validated"),
        "{}",
        nodata.text
    );
    let soa = delv(server, &anchor_file, "example.org", "SOA").await;
    assert!(soa.secure, "{}", soa.text);

    gws[0].set(Behaviour::Refuse).unwrap();
    wait_validated(server, &anchor_file, &[ip(&gws[1])]).await;
}

/// A pre-published ZSK rollover (RFC 6781 4.1.1.1) by key times, keys made with
/// `health-orchestrator dnssec keygen`: the new ZSK is in the DNSKEY set before it signs,
/// takes over signing at its `Activate` second, the old one leaves at its `Delete`; every
/// answer along the way validates.
#[actix_rt::test]
async fn a_zsk_rollover_by_key_times_keeps_every_answer_valid() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    let anchor_file = dir.path().join("anchors.conf");
    let keygen = |extra: &[&str]| {
        let mut args = vec![
            "dnssec",
            "keygen",
            "--zone",
            "example.org",
            "--out",
            keys.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        run(dir.path(), env!("CARGO_BIN_EXE_health-orchestrator"), &args);
    };
    keygen(&[]);
    keygen(&["--zsk", "--inactive", "+3", "--delete", "+6"]);
    keygen(&["--zsk", "--algorithm", "ed25519", "--activate", "+3"]);
    anchors(&keys, &anchor_file);
    // The ZSKs' tags, from their file names (`K<zone>.+<alg>+<tag>.key`).
    let tag_of = |algorithm: &str| -> String {
        let name = std::fs::read_dir(&keys)
            .unwrap()
            .filter_map(|e| e.unwrap().file_name().into_string().ok())
            .find(|n| {
                n.ends_with(".key")
                    && n.contains(&format!("+{algorithm}+"))
                    && std::fs::read_to_string(keys.join(n))
                        .unwrap()
                        .contains(" 256 3 ")
            })
            .unwrap();
        let tag = name.trim_end_matches(".key").rsplit('+').next().unwrap();
        tag.parse::<u16>().unwrap().to_string()
    };
    let (old, new) = (tag_of("013"), tag_of("015"));
    let gws = gateways(1);
    let (_engine, server) = signing_engine(dir.path(), &keys, &gws).await;
    let first = wait_validated(server, &anchor_file, &[ip(&gws[0])]).await;
    assert_eq!(
        first.signed_by("A"),
        vec![old.clone()],
        "the old ZSK signs first"
    );
    let dnskeys = |v: &Validated| {
        v.text
            .lines()
            .filter(|l| !l.starts_with(';') && l.split_whitespace().nth(3) == Some("DNSKEY"))
            .count()
    };
    assert_eq!(
        dnskeys(&delv(server, &anchor_file, "example.org", "DNSKEY").await),
        3,
        "the new ZSK is published before it signs"
    );

    let start = Instant::now();
    let mut seen_new = false;
    loop {
        let a = delv(server, &anchor_file, "api.example.org", "A").await;
        assert!(
            a.secure,
            "every answer validates during the rollover:\n{}",
            a.text
        );
        let keyset = delv(server, &anchor_file, "example.org", "DNSKEY").await;
        assert!(keyset.secure, "{}", keyset.text);
        if a.signed_by("A") == vec![new.clone()] {
            seen_new = true;
        }
        if seen_new && dnskeys(&keyset) == 2 {
            break;
        }
        assert!(
            start.elapsed() < LIMIT,
            "rollover not finished: signed by {:?}, {} keys published",
            a.signed_by("A"),
            dnskeys(&keyset)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Wildcard names on the embedded server, as RFC 4592 answers them, signed and judged by
/// `delv`: `*.apps.example.org` answers names under `apps` that do not exist, however deep
/// (`x.y.apps`: `y.apps` does not exist either); a name that exists (`api.apps`) answers
/// its own; a name under an existing one (`deep.api.apps`) is not caught by the wildcard
/// further up; `apps` itself exists with no records. Every answer validates: a wildcard's
/// answer is signed as the name asked (online signing), so it needs no wildcard proof.
#[actix_rt::test]
async fn wildcard_names_answer_as_rfc_4592_says_and_validate() {
    let dir = tempfile::tempdir().unwrap();
    let (keys, anchor_file) = bind_keys(dir.path());
    let gws = gateways(2);
    let server = SocketAddr::new(loopback_ip().into(), 5353);
    let tail = format!(
        "[[tenants]]\nname = \"apps\"\ndomains = [\"*.apps.example.org\"]\nendpoints = [\"gw-1\"]\nsinks = [\"dns\"]\n\n\
         [[tenants]]\nname = \"api\"\ndomains = [\"api.apps.example.org\"]\nendpoints = [\"gw-2\"]\nsinks = [\"dns\"]\n\n\
         [sinks.dns]\nkind = \"dns_server\"\nlisten = [\"{server}\"]\nzones = [\"example.org\"]\n\
         dnssec = {{ keys = \"{}\" }}\n",
        keys.display()
    );
    let _engine = start_engine(
        dir.path(),
        &config(&Check::FAST, &gws.iter().collect::<Vec<_>>(), &tail),
    )
    .await;
    let validated = |name: &'static str, want: String| {
        let anchors = anchor_file.clone();
        async move {
            let start = Instant::now();
            loop {
                let v = delv(server, &anchors, name, "A").await;
                if v.secure && v.addresses() == [want.clone()] {
                    return;
                }
                assert!(
                    start.elapsed() < LIMIT,
                    "{name}: wanted {want}, got:\n{}",
                    v.text
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    validated("foo.apps.example.org", ip(&gws[0])).await;
    validated("x.y.apps.example.org", ip(&gws[0])).await;
    validated("api.apps.example.org", ip(&gws[1])).await;
    for (name, status) in [
        ("deep.api.apps.example.org", "NXDOMAIN"),
        ("apps.example.org", "NOERROR"),
    ] {
        let answer = crate::services::dig::dig1(server, &[name, "A"]).await;
        assert_eq!(answer.status, status, "{name}");
        assert!(answer.sorted().is_empty(), "{name}: {answer:?}");
        let negative = delv(server, &anchor_file, name, "A").await;
        assert!(
            negative.text.contains("negative response, fully validated"),
            "{name}: {}",
            negative.text
        );
    }
}

/// Static records beside the tenants' names (`static_records`, zone-file text): MX and TXT
/// at the apex, CAA and TXT beside a tenant's addresses, a CNAME, an SRV and a name
/// server's address answer as written, and every one validates with `delv`; a static
/// address at a tenant's name is refused in the config.
#[actix_rt::test]
async fn static_records_are_served_beside_the_tenants_and_validate() {
    let dir = tempfile::tempdir().unwrap();
    let (keys, anchor_file) = bind_keys(dir.path());
    let gws = gateways(1);
    let server = SocketAddr::new(loopback_ip().into(), 5353);
    let statics = "@ 3600 IN MX 10 mail.example.org.\\n\
                   @ 3600 IN TXT \\\"site-verification=abc\\\"\\n\
                   api 3600 IN CAA 0 issue \\\"letsencrypt.org\\\"\\n\
                   api 3600 IN TXT \\\"owned-by=team-a\\\"\\n\
                   www 300 IN CNAME api.example.org.\\n\
                   _sip._tcp 3600 IN SRV 10 60 5060 sip.example.org.\\n\
                   ns1 3600 IN A 192.0.2.53\\n";
    let tail = |statics: &str| {
        format!(
            "[[tenants]]\nname = \"a\"\ndomains = [\"api.example.org\"]\nsinks = [\"dns\"]\n\n\
             [sinks.dns]\nkind = \"dns_server\"\nlisten = [\"{server}\"]\nzones = [\"example.org\"]\n\
             dnssec = {{ keys = \"{}\" }}\nstatic_records = \"{statics}\"\n",
            keys.display()
        )
    };
    let gw_list: Vec<&ho_testkit::Gateway> = gws.iter().collect();
    let _engine = start_engine(dir.path(), &config(&Check::FAST, &gw_list, &tail(statics))).await;
    wait_validated(server, &anchor_file, &[ip(&gws[0])]).await;
    for (name, qtype, want) in [
        ("example.org", "MX", "10 mail.example.org."),
        ("example.org", "TXT", "\"site-verification=abc\""),
        ("api.example.org", "CAA", "0 issue \"letsencrypt.org\""),
        ("api.example.org", "TXT", "\"owned-by=team-a\""),
        ("www.example.org", "CNAME", "api.example.org."),
        (
            "_sip._tcp.example.org",
            "SRV",
            "10 60 5060 sip.example.org.",
        ),
        ("ns1.example.org", "A", "192.0.2.53"),
    ] {
        let v = delv(server, &anchor_file, name, qtype).await;
        assert!(v.secure, "{name} {qtype}: {}", v.text);
        assert!(
            v.text.contains(want),
            "{name} {qtype}: wanted {want}:\n{}",
            v.text
        );
    }
    // The tenant's own answer is untouched, and a name under a static one is NODATA.
    let apex_a = crate::services::dig::dig1(server, &["_tcp.example.org", "A"]).await;
    assert_eq!(apex_a.status, "NOERROR");

    let bad_file = dir.path().join("bad.toml");
    std::fs::write(
        &bad_file,
        config(&Check::FAST, &gw_list, &tail("api 60 IN A 192.0.2.9\\n")),
    )
    .unwrap();
    let refused = ho_kinds::load_plan(&[&bad_file]).unwrap_err().to_string();
    assert!(
        refused.contains("\"api.example.org\" has a static A record"),
        "{refused}"
    );
}

/// An `answer = "cname"` tenant signed: its name answers a CNAME to the healthy load
/// balancer's host name (resolved by a real `pdns_server`, as a cloud's DNS answers it) and
/// the zone's apex, which cannot hold a CNAME, that balancer's addresses; both validate
/// with `delv`, and so do both after failover moves them to the other balancer.
#[actix_rt::test]
async fn a_cname_tenant_signed_validates_through_a_failover() {
    use crate::cname_answers::{balancers, lb_endpoints, LB_ZONE};
    let dir = tempfile::tempdir().unwrap();
    let (keys, anchor_file) = bind_keys(dir.path());
    let pdns = crate::services::pdns::PdnsServer::start(&format!("{LB_ZONE}."));
    let (mut east, west) = balancers(&pdns);
    let server = SocketAddr::new(loopback_ip().into(), 5353);
    let text = TestConfig::defaults(&Check::FAST)
        .with(&lb_endpoints(&pdns))
        .with(&format!(
            "[[tenants]]\nname = \"api\"\ndomains = [\"api.example.org\", \"example.org\"]\npolicy = \"failover\"\n\
             answer = \"cname\"\nsinks = [\"dns\"]\n\n\
             [sinks.dns]\nkind = \"dns_server\"\nlisten = [\"{server}\"]\nzones = [\"example.org\"]\n\
             dnssec = {{ keys = \"{}\" }}\n",
            keys.display()
        ))
        .render();
    let _engine = start_engine(dir.path(), &text).await;
    for (lb, address) in [("east", ip(&east)), ("west", ip(&west))] {
        let cname = format!("CNAME\tlb-{lb}.{LB_ZONE}.");
        let start = Instant::now();
        loop {
            let v = delv(server, &anchor_file, "api.example.org", "CNAME").await;
            let apex = delv(server, &anchor_file, "example.org", "A").await;
            if v.secure
                && v.text.contains(&cname)
                && apex.secure
                && apex.addresses() == [address.clone()]
            {
                assert_eq!(v.signed_by("CNAME").len(), 1, "{}", v.text);
                break;
            }
            assert!(
                start.elapsed() < LIMIT,
                "wanted a validated {cname} and apex {address}, got:\n{}\n{}",
                v.text,
                apex.text
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // East's address fails its probes: failover moves both to west.
        east.set(Behaviour::Refuse).unwrap();
    }
    let nodata = delv(server, &anchor_file, "example.org", "AAAA").await;
    assert!(
        nodata.text.contains("negative response, fully validated"),
        "{}",
        nodata.text
    );
}
