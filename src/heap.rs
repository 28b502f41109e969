//! The process's use of glibc's allocator: one malloc arena, and the configuration's parse
//! memory handed back to the kernel.
//!
//! Loading a config parses the files, builds the typed config, validates it into the plan
//! and frees the rest: at 100,000 endpoints an 87 MiB heap peak of small blocks (heaptrack,
//! `check-config`), much of it freed once the plan stands. glibc returns only the top of a
//! heap to the kernel on free, so the freed blocks in the middle would stay resident for the
//! life of the process.
//!
//! glibc also gives each thread that allocates its own arena (up to 8 per core), and a block
//! freed in one arena is reused only by that arena's threads: the free space of each stays
//! resident beside the others'. The engine's threads (actix's system thread, the prober
//! threads, `ho-answers`, the DNS server's and telemetry's when configured) all allocate, and
//! a block is often made on one thread and freed on another. At 10,000 endpoints @ 1 s all
//! hanging (bench/README.md, "Memory", "glibc's arenas"; release build, 3 threads) glibc
//! held 65 MB for 41 MB in use in three arenas; with one arena the RSS peak is 76-81 MiB
//! where it was 84-86 (the binary's mapped pages are 21 of them), and 100,000 @ 30 s ends its
//! window at 318-320 MiB where it was 334-338. The threads then share one lock whenever
//! their per-thread cache (tcache) misses: CPU per probe is to be compared on a quiet
//! machine before and after (the commands are in bench/README.md).
//!
//! A trim once every target has a verdict was weighed and is not done: RSS rises all run
//! long (the peak is at the end of a run, not in start-up), and a trim in the start-up wave,
//! at 70 MB, returned 2.8 MB: the free space is in pieces among live blocks.

/// Arenas glibc may create: one, the main arena, shared by every thread.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const ARENAS: libc::c_int = 1;

/// Caps glibc's malloc arenas at [`ARENAS`]. Called first thing in `main`, before any thread
/// is started: a thread that already has its own arena keeps it. A no-op where the C library
/// is not glibc.
#[allow(unsafe_code)]
pub fn cap_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt sets one of the allocator's parameters under its own lock; it takes
    // and keeps no pointer.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, ARENAS);
    }
}

/// Returns every whole free page of every malloc arena to the kernel. Called right after a
/// config is loaded and applied (start and reload), the moments a large parse was just freed;
/// a no-op where the C library is not glibc.
#[allow(unsafe_code)]
pub fn release_freed_pages() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes the allocator's own locks and touches only free chunks; it
    // holds no pointer into Rust data.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use std::sync::{Arc, Barrier};

    /// glibc's own account of its arenas (`malloc_info`): one `<heap nr=...>` element each.
    #[allow(unsafe_code)]
    fn arenas() -> usize {
        let mut buf: *mut libc::c_char = std::ptr::null_mut();
        let mut len: libc::size_t = 0;
        // SAFETY: open_memstream owns `buf` until fclose, which flushes and leaves `buf`
        // NUL-terminated with `len` bytes; read once, then freed with the allocator that
        // made it.
        let xml = unsafe {
            let stream = libc::open_memstream(&mut buf, &mut len);
            assert!(!stream.is_null(), "open_memstream");
            assert_eq!(libc::malloc_info(0, stream), 0, "malloc_info");
            libc::fclose(stream);
            let xml = std::ffi::CStr::from_ptr(buf).to_string_lossy().into_owned();
            libc::free(buf.cast());
            xml
        };
        xml.matches("<heap nr=").count()
    }

    /// Threads started after the cap, each allocating while all of them are alive, get no
    /// arena of their own: glibc's count stays where it was. Without the cap each would get
    /// a new one (up to 8 per core), so the count would grow by up to `THREADS`.
    #[test]
    fn threads_started_after_the_cap_share_the_existing_arenas() {
        const THREADS: usize = 4;
        super::cap_arenas();
        let before = arenas();
        let all_allocated = Arc::new(Barrier::new(THREADS + 1));
        let threads: Vec<_> = (0..THREADS)
            .map(|i| {
                let all_allocated = all_allocated.clone();
                std::thread::spawn(move || {
                    let block = vec![i as u8; 4096];
                    all_allocated.wait();
                    all_allocated.wait();
                    block.len()
                })
            })
            .collect();
        all_allocated.wait();
        let during = arenas();
        all_allocated.wait();
        for t in threads {
            assert_eq!(t.join().unwrap(), 4096);
        }
        assert!(
            during == before,
            "{THREADS} new threads took {} new arenas; the cap allows none past {}",
            during.saturating_sub(before),
            super::ARENAS
        );
    }
}
