//! A cloud DNS API test server as a program, for the rehearsals (`bench/rehearsal/`): the
//! same servers the integration tests run in process (`ho_testkit::cloud`), on a fixed
//! address, with the provider's published request limit when one is given, writing its
//! request counts as JSON to `--stats FILE` every 200 ms.
//!
//! ```text
//! ho-cloud-fake --provider cloudflare|google|azure|external_dns --listen 127.0.0.1:5056 --zone Z
//!               [--limit PER_SECOND:BURST] [--window ALLOWANCE] [--stats FILE] [--key-dir DIR]
//! ```
//! `google` writes its service account key file into `--key-dir`. `--window` (external_dns
//! only) admits at most ALLOWANCE requests in any one second instead of a bucket, as DNS
//! APIs that count in a sliding second do; its stats then count the requests refused.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ho_testkit::cloud::{
    azure::AzureDns, cloudflare::Cloudflare, external_dns::ExternalDnsProvider, google::GoogleDns,
};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let usage = "usage: ho-cloud-fake --provider cloudflare|google|azure|external_dns --listen ADDR --zone ZONE [--limit PER_SECOND:BURST] [--window ALLOWANCE] [--stats FILE] [--key-dir DIR]";
    let (Some(provider), Some(listen), Some(zone)) =
        (arg("--provider"), arg("--listen"), arg("--zone"))
    else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let listen: SocketAddr = listen.parse().unwrap_or_else(|e| {
        eprintln!("--listen {listen}: {e}");
        std::process::exit(2)
    });
    let limit = arg("--limit").map(|l| {
        let (rate, burst) = l.split_once(':').unwrap_or((&l, &l));
        (
            rate.parse::<f64>().expect("--limit rate"),
            burst.parse::<f64>().expect("--limit burst"),
        )
    });
    let stats = arg("--stats").map(PathBuf::from);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async move {
        let count: Box<dyn Fn() -> String> = match provider.as_str() {
            "cloudflare" => {
                let s = Cloudflare::start_at(listen, &zone).await;
                if let Some((r, b)) = limit {
                    s.set_limit(r, b);
                }
                Box::new(move || {
                    format!(
                        "{{\"lists\": {}, \"batches\": {}}}",
                        s.lists.load(Ordering::Relaxed),
                        s.batches.load(Ordering::Relaxed)
                    )
                })
            }
            "google" => {
                let s = GoogleDns::start_at(listen, &zone).await;
                if let Some((r, b)) = limit {
                    s.set_limit(r, b);
                }
                let dir = arg("--key-dir").map_or_else(std::env::temp_dir, PathBuf::from);
                println!("key file: {}", s.key_file(&dir).display());
                Box::new(move || {
                    format!(
                        "{{\"lists\": {}, \"changes\": {}, \"tokens\": {}}}",
                        s.lists.load(Ordering::Relaxed),
                        s.changes.load(Ordering::Relaxed),
                        s.tokens_issued.load(Ordering::Relaxed)
                    )
                })
            }
            "azure" => {
                let s = AzureDns::start_at(listen, &zone).await;
                if let Some((r, b)) = limit {
                    s.set_limit(r, b);
                }
                Box::new(move || {
                    format!(
                        "{{\"list_pages\": {}, \"writes\": {}, \"refused_on_etag\": {}}}",
                        s.pages.load(Ordering::Relaxed),
                        s.writes.load(Ordering::Relaxed),
                        s.preconditions_failed.load(Ordering::Relaxed)
                    )
                })
            }
            "external_dns" => {
                let s = ExternalDnsProvider::start_at(listen, &[&zone], 0).await;
                if let Some((r, b)) = limit {
                    s.set_limit(r, b);
                }
                if let Some(allowance) = arg("--window") {
                    s.set_window(allowance.parse().expect("--window allowance"));
                }
                Box::new(move || {
                    format!(
                        "{{\"lists\": {}, \"adjusts\": {}, \"changes\": {}, \"refused\": {}}}",
                        s.lists.load(Ordering::Relaxed),
                        s.adjusts.load(Ordering::Relaxed),
                        s.applied.load(Ordering::Relaxed),
                        s.refused.load(Ordering::Relaxed)
                    )
                })
            }
            other => {
                eprintln!("unknown provider {other:?}; {usage}");
                std::process::exit(2);
            }
        };
        println!("{provider} API test server on {listen}, zone {zone}");
        loop {
            if let Some(file) = &stats {
                let _ = std::fs::write(file, count());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
}
