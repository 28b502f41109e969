//! Loopback addresses no two running tests share.
//!
//! nextest runs every test in its own process, so an in-process counter alone cannot keep
//! two tests apart. Each process claims a whole block `127.B1.B2.0/24` (B1 in 64..=127)
//! by taking an exclusive lock on a file named after it in the temp directory, then hands
//! out the block's addresses in order; another block is claimed when one runs out. The
//! kernel drops the lock when the process exits, however it exits, so there is nothing to
//! clean up, and a block is only ever in one live process's hands. Tests never write an
//! address by hand.

use std::fs::File;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Mutex;

/// The blocks are 127.64.0.0/10: `FIRST_BLOCK` is 127.64.0.0's block number, and nothing
/// else on the machine uses the range.
const FIRST_BLOCK: u32 = 64 << 8;
const BLOCKS: u32 = 64 << 8;

/// The blocks this process holds (every one until it exits: an earlier block's addresses
/// may still be in use) and the next free address, counted from the newest claim's first block.
struct Held {
    locks: Vec<File>,
    block: u32,
    next: u32,
}

static HELD: Mutex<Held> = Mutex::new(Held {
    locks: Vec::new(),
    block: 0,
    next: 256,
});

/// A loopback address no other running test holds (any port is free on it).
pub fn loopback_ip() -> Ipv4Addr {
    loopback_range(1)
}

/// [`loopback_ip`] with port 0, for listeners that pick their own port.
pub fn loopback() -> SocketAddr {
    SocketAddr::new(IpAddr::V4(loopback_ip()), 0)
}

/// The first of `n` consecutive loopback addresses that no other running test holds, for
/// farms that number their gateways.
pub fn loopback_range(n: u32) -> Ipv4Addr {
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    if held.next + n > 255 {
        // Addresses `.1` onwards: n of them need this many blocks.
        let blocks = (n + 1).div_ceil(256);
        let (locks, block) = claim_blocks(blocks);
        held.locks.extend(locks);
        held.block = block;
        held.next = 1;
    }
    let first = (held.block << 8) + held.next;
    held.next += n;
    Ipv4Addr::from((127 << 24) | first)
}

/// Locks `k` adjacent free blocks, trying from a random place so processes rarely contend.
fn claim_blocks(k: u32) -> (Vec<File>, u32) {
    let dir = std::env::temp_dir().join("ho-test-loopback");
    std::fs::create_dir_all(&dir).unwrap();
    let start = fastrand::u32(0..BLOCKS - k);
    'search: for i in 0..BLOCKS - k {
        let first = FIRST_BLOCK + (start + i) % (BLOCKS - k);
        let mut locks = Vec::new();
        for block in first..first + k {
            let file = File::options()
                .create(true)
                .truncate(false)
                .write(true)
                .open(dir.join(block.to_string()))
                .unwrap();
            if file.try_lock().is_err() {
                continue 'search;
            }
            locks.push(file);
        }
        return (locks, first);
    }
    panic!("no {k} adjacent free loopback blocks in {}", dir.display());
}

/// A port free on 127.0.0.1 for both UDP and TCP. BIND only listens on addresses an
/// interface has (127.0.0.1, not the rest of 127/8), so BIND instances differ by port.
pub fn free_port_pair() -> u16 {
    loop {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = udp.local_addr().unwrap().port();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_distinct_and_a_held_block_is_never_handed_out() {
        assert_ne!(loopback_ip(), loopback_ip());
        // A block locked through another open file, as another process holds it: the lock
        // is exclusive, and a range claimed meanwhile lies elsewhere.
        let (_held, block) = claim_blocks(1);
        let dir = std::env::temp_dir().join("ho-test-loopback");
        let other = File::open(dir.join(block.to_string())).unwrap();
        assert!(other.try_lock().is_err(), "the block's lock is exclusive");
        let first = u32::from(loopback_range(300)) & 0x00ff_ffff;
        let last = first + 299;
        assert!(first >> 8 >= FIRST_BLOCK && last >> 8 < FIRST_BLOCK + BLOCKS);
        assert!(
            !(first >> 8..=last >> 8).contains(&block),
            "{block} handed out twice"
        );
    }
}
