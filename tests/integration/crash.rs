//! The process killed with SIGKILL in the middle of a flap, and restarted: the published
//! file is whole at every instant (never empty, never partial), the restarted process
//! publishes nothing until it has verdicts, and it converges.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ho_testkit::Behaviour;
use tokio::time::Instant;

use crate::harness::*;

/// Reads `file` every millisecond until `stop`, recording every distinct content seen
/// (an unreadable or missing file is recorded as `<missing>`).
fn watch(file: &Path, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<BTreeSet<String>> {
    let file = file.to_path_buf();
    std::thread::spawn(move || {
        let mut seen = BTreeSet::new();
        while !stop.load(Ordering::SeqCst) {
            let content =
                std::fs::read_to_string(&file).unwrap_or_else(|_| "<missing>".to_string());
            seen.insert(content);
            std::thread::sleep(Duration::from_millis(1));
        }
        seen
    })
}

fn spawn(dir: &Path, gws: &[ho_testkit::Gateway], tail: &str) -> Running {
    Running(run_command(dir, gws, tail).spawn().unwrap())
}

#[tokio::test]
async fn killed_mid_flap_and_restarted_the_file_is_always_whole() {
    let dir = tempfile::tempdir().unwrap();
    let gws = Arc::new(Mutex::new(gateways(3)));
    let (steady_1, flappy, steady_3) = {
        let g = gws.lock().unwrap();
        (ip(&g[0]), ip(&g[1]), ip(&g[2]))
    };
    let hosts = dir.path().join("hosts");
    let tail = format!(
        "[defaults]\nstartup_grace = \"5s\"\n\n\
         [[tenants]]\nname = \"t\"\ndomains = [\"t.example\"]\nsinks = [\"local\"]\n\n\
         [sinks.local]\nkind = \"hosts_file\"\ndir = {:?}\n",
        hosts.display().to_string()
    );
    let file = hosts.join("t.hosts");
    let mut child = spawn(dir.path(), &gws.lock().unwrap(), &tail);
    wait_for_file(&file, "the first publish", |c| addresses(c).len() == 3).await;

    let stop = Arc::new(AtomicBool::new(false));
    let watcher = watch(&file, stop.clone());
    // gw-2 flaps: 503 for 600 ms, healthy for 300 ms, ...
    let flapping = Arc::new(AtomicBool::new(true));
    let flapper = {
        let (gws, flapping) = (gws.clone(), flapping.clone());
        tokio::spawn(async move {
            let mut down = true;
            while flapping.load(Ordering::SeqCst) {
                let b = if down {
                    Behaviour::Status(503)
                } else {
                    Behaviour::Healthy
                };
                gws.lock().unwrap()[1].set(b).unwrap();
                // Down longer than the detection bound (200 + 50 + 100 ms), so every down
                // phase is published.
                let phase = if down { 600 } else { 300 };
                down = !down;
                tokio::time::sleep(Duration::from_millis(phase)).await;
            }
            gws.lock().unwrap()[1].set(Behaviour::Healthy).unwrap();
        })
    };
    // Several publishes happen, then SIGKILL lands between or during writes.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let killed_with = std::fs::read_to_string(&file).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let restarted = Instant::now();
    child = spawn(dir.path(), &gws.lock().unwrap(), &tail);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    flapping.store(false, Ordering::SeqCst);
    flapper.await.unwrap();
    wait_for_file(&file, "convergence after the restart", |c| {
        addresses(c).len() == 3
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    let seen = watcher.join().unwrap();
    drop(child);

    let mut sets = BTreeSet::new();
    for content in &seen {
        assert_ne!(content, "<missing>", "the file disappeared");
        let addrs = addresses(content);
        assert!(
            addrs.contains(&steady_1) && addrs.contains(&steady_3),
            "a partial or empty file was visible:\n{content}"
        );
        assert!(
            content.ends_with('\n'),
            "a cut-off file was visible:\n{content}"
        );
        sets.insert(addrs);
    }
    // Both sets of the flap were published, and nothing else.
    let mut all = vec![steady_1.clone(), flappy.clone(), steady_3.clone()];
    all.sort();
    let mut without = vec![steady_1, steady_3];
    without.sort();
    assert_eq!(sets, BTreeSet::from([all, without]), "{seen:#?}");
    println!(
        "{} distinct file contents seen; killed with {} addresses published; converged {:?} after the restart",
        seen.len(),
        addresses(&killed_with).len(),
        restarted.elapsed()
    );
}
