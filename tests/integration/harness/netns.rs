//! A network namespace of the test's own joined to this one by a veth pair: a second host
//! on the same machine whose traffic crosses a real interface. Needs root and iproute2
//! (`.ci/test` runs as root and installs iproute2); the namespace and the pair are removed
//! when the value is dropped.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// Runs `args` (a program and its arguments), panicking with its stderr if it fails; its
/// stdout.
pub fn run_checked(args: &[&str]) -> String {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (run the test command, bash .ci/test, which installs iproute2)",
                args[0]
            )
        });
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The namespace `ho-<tag>-<n>` with the peer end of the pair (`<short><n>b`, up, with `lo`
/// up); this side's end (`<short><n>a`) is up with no address.
pub struct VethNamespace {
    /// The namespace's name.
    pub name: String,
    /// This side's end of the pair.
    pub link: String,
    /// The end inside the namespace.
    pub peer: String,
    /// A number no other namespace of this process or a concurrent one took (from the
    /// process id), for the caller's addresses.
    pub n: u32,
}

impl VethNamespace {
    /// Makes the namespace and the pair; `tag` names the namespace, `short` (three letters:
    /// interface names are at most 15 bytes) the pair's ends.
    pub fn start(tag: &str, short: &str) -> VethNamespace {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = std::process::id() % 200 + NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("ho-{tag}-{n}");
        let (link, peer) = (format!("{short}{n}a"), format!("{short}{n}b"));
        run_checked(&["ip", "netns", "add", &name]);
        let ns = VethNamespace {
            name,
            link,
            peer,
            n,
        };
        run_checked(&[
            "ip", "link", "add", &ns.link, "type", "veth", "peer", "name", &ns.peer,
        ]);
        run_checked(&["ip", "link", "set", &ns.peer, "netns", &ns.name]);
        run_checked(&["ip", "link", "set", &ns.link, "up"]);
        ns.inside(&["ip", "link", "set", "lo", "up"]);
        ns.inside(&["ip", "link", "set", &ns.peer, "up"]);
        ns
    }

    /// Runs `args` inside the namespace; its stdout.
    pub fn inside(&self, args: &[&str]) -> String {
        let mut all = vec!["ip", "netns", "exec", self.name.as_str()];
        all.extend_from_slice(args);
        run_checked(&all)
    }
}

impl Drop for VethNamespace {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.name])
            .status();
        // Deleting the namespace deletes the pair with its end inside; this is for a pair
        // whose end never got there.
        let _ = Command::new("ip")
            .args(["link", "delete", &self.link])
            .stderr(std::process::Stdio::null())
            .status();
    }
}
