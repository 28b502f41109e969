//! One AF_XDP socket: a region of memory shared with the kernel (the UMEM, cut into
//! frames) and four rings of frame references. The kernel writes received frames into
//! frames it took from the fill ring and lists them on the receive ring; frames put on the
//! transmit ring are sent and come back on the completion ring. Every unsafe step of that
//! sharing is here, behind [`Xsk::serve`], which lends each received frame to a closure as
//! a plain `&mut [u8]` and sends or recycles it according to the answer.

#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Bytes per frame. The kernel keeps 256 bytes of it in front of a received packet,
/// which leaves room for a DNS answer of 1,730 bytes (the default `max_udp_payload` is
/// 1,232); a bigger one is sent truncated and the client asks again over TCP.
pub const FRAME: usize = 2048;
/// Frames per socket (4 MiB, locked memory): as many as the fill ring holds, so a burst of
/// a whole ring finds room while the answers to the previous one are being sent.
const FRAMES: usize = 2048;
/// Entries per ring.
const RING: u32 = 2048;

/// `struct xdp_desc`: a frame's address in the UMEM and the packet's length.
#[derive(Clone, Copy)]
#[repr(C)]
struct Desc {
    addr: u64,
    len: u32,
    options: u32,
}

/// A memory mapping, unmapped when dropped.
struct Mapping {
    at: NonNull<u8>,
    len: usize,
}

impl Mapping {
    fn new(len: usize, fd: RawFd, offset: i64) -> io::Result<Mapping> {
        let (flags, fd) = if fd < 0 {
            (
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
            )
        } else {
            (libc::MAP_SHARED | libc::MAP_POPULATE, fd)
        };
        // SAFETY: a new mapping at an address the kernel picks; nothing else refers to it.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                offset,
            )
        };
        if at == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let at = NonNull::new(at.cast()).ok_or_else(|| io::Error::other("mmap gave null"))?;
        Ok(Mapping { at, len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: this mapping was made by `Mapping::new` with this length, and every
        // pointer into it lives in the `Xsk` being dropped with it.
        unsafe {
            libc::munmap(self.at.as_ptr().cast(), self.len);
        }
    }
}

/// A ring shared with the kernel: one side produces, the other consumes, each moving its
/// own index; entries are `T` (`u64` frame addresses or `Desc`).
struct Ring<T> {
    _map: Mapping,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    entries: *mut T,
    mask: u32,
}

impl<T: Copy> Ring<T> {
    fn map(fd: RawFd, offsets: &libc::xdp_ring_offset, pgoff: i64) -> io::Result<Ring<T>> {
        let len = offsets.desc as usize + RING as usize * std::mem::size_of::<T>();
        let map = Mapping::new(len, fd, pgoff)?;
        let base = map.at.as_ptr();
        // SAFETY: the kernel's offsets lie within the mapping it sized for them.
        let at = |off: u64| unsafe { base.add(off as usize) };
        Ok(Ring {
            producer: at(offsets.producer).cast(),
            consumer: at(offsets.consumer).cast(),
            flags: at(offsets.flags).cast(),
            entries: at(offsets.desc).cast(),
            mask: RING - 1,
            _map: map,
        })
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: an aligned u32 in the live mapping, written by the other side only
        // through atomic operations.
        unsafe { &*self.producer }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as `producer`.
        unsafe { &*self.consumer }
    }

    fn needs_wakeup(&self) -> bool {
        // SAFETY: as `producer`.
        unsafe { &*self.flags }.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    /// Entries the other side produced that this one has not consumed.
    fn ready(&self) -> u32 {
        let produced = self.producer().load(Ordering::Acquire);
        produced.wrapping_sub(self.consumer().load(Ordering::Relaxed))
    }

    /// Free entries this side may produce into.
    fn room(&self) -> u32 {
        let consumed = self.consumer().load(Ordering::Acquire);
        RING - self
            .producer()
            .load(Ordering::Relaxed)
            .wrapping_sub(consumed)
    }

    fn read(&self, i: u32) -> T {
        let at = (self.consumer().load(Ordering::Relaxed).wrapping_add(i) & self.mask) as usize;
        // SAFETY: `at` is within the ring's entries, and entry `i` was published by the
        // producer's release store that `ready` acquired.
        unsafe { self.entries.add(at).read() }
    }

    fn consume(&self, n: u32) {
        let c = self.consumer();
        c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Release);
    }

    fn write(&self, i: u32, value: T) {
        let at = (self.producer().load(Ordering::Relaxed).wrapping_add(i) & self.mask) as usize;
        // SAFETY: `at` is within the ring, and `room` said the consumer is done with it.
        unsafe { self.entries.add(at).write(value) }
    }

    fn produce(&self, n: u32) {
        let p = self.producer();
        p.store(p.load(Ordering::Relaxed).wrapping_add(n), Ordering::Release);
    }
}

/// An AF_XDP socket bound to one receive queue of one interface.
pub struct Xsk {
    fill: Ring<u64>,
    completion: Ring<u64>,
    rx: Ring<Desc>,
    tx: Ring<Desc>,
    umem: Mapping,
    /// Frames this side holds, neither with the kernel nor in a ring.
    free: Vec<u64>,
    fd: OwnedFd,
}

// SAFETY: the rings and the UMEM are used by one thread at a time (the one serving the
// queue); the pointers are into mappings this value owns.
unsafe impl Send for Xsk {}

fn sockopt<T>(fd: RawFd, name: i32, value: &T) -> io::Result<()> {
    // SAFETY: `value` is a live T of the size passed, as option `name` expects.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Registers `umem` as the socket's frame area.
fn register_umem(raw: RawFd, umem: &Mapping) -> io::Result<()> {
    let reg = libc::xdp_umem_reg {
        addr: umem.at.as_ptr() as u64,
        len: umem.len as u64,
        chunk_size: FRAME as u32,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    sockopt(raw, libc::XDP_UMEM_REG, &reg).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOBUFS) => io::Error::other(format!(
            "its {} MiB of frames exceed the locked-memory limit (raise RLIMIT_MEMLOCK: \
             LimitMEMLOCK=infinity under systemd)",
            (FRAMES * FRAME) >> 20
        )),
        _ => e,
    })
}

/// Where the kernel placed the four rings' producer, consumer and descriptors.
fn mmap_offsets(raw: RawFd) -> io::Result<libc::xdp_mmap_offsets> {
    // SAFETY: all-zero is a valid xdp_mmap_offsets; the kernel fills it.
    let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
    // SAFETY: `off` and `len` are live and sized as the option expects.
    let r = unsafe {
        libc::getsockopt(
            raw,
            libc::SOL_XDP,
            libc::XDP_MMAP_OFFSETS,
            (&mut off as *mut libc::xdp_mmap_offsets).cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(off)
}

/// Binds the socket to queue `queue` of interface `ifindex`.
fn bind(raw: RawFd, ifindex: u32, queue: u32) -> io::Result<()> {
    let addr = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: libc::XDP_USE_NEED_WAKEUP,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: queue,
        sxdp_shared_umem_fd: 0,
    };
    // SAFETY: `addr` is a live sockaddr_xdp of the size passed.
    let r = unsafe {
        libc::bind(
            raw,
            (&addr as *const libc::sockaddr_xdp).cast(),
            std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl Xsk {
    /// A socket on queue `queue` of interface `ifindex`, its fill ring stocked.
    pub fn open(ifindex: u32, queue: u32) -> io::Result<Xsk> {
        // SAFETY: a plain socket(2) call; the descriptor is owned right after.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a new descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let umem = Mapping::new(FRAMES * FRAME, -1, 0)?;
        register_umem(raw, &umem)?;
        for ring in [
            libc::XDP_UMEM_FILL_RING,
            libc::XDP_UMEM_COMPLETION_RING,
            libc::XDP_RX_RING,
            libc::XDP_TX_RING,
        ] {
            sockopt(raw, ring, &RING)?;
        }
        let off = mmap_offsets(raw)?;
        let fill = Ring::map(raw, &off.fr, libc::XDP_UMEM_PGOFF_FILL_RING as i64)?;
        let completion = Ring::map(raw, &off.cr, libc::XDP_UMEM_PGOFF_COMPLETION_RING as i64)?;
        let rx = Ring::map(raw, &off.rx, libc::XDP_PGOFF_RX_RING)?;
        let tx = Ring::map(raw, &off.tx, libc::XDP_PGOFF_TX_RING)?;
        bind(raw, ifindex, queue)?;
        let mut xsk = Xsk {
            fill,
            completion,
            rx,
            tx,
            umem,
            free: (0..FRAMES as u64).rev().map(|i| i * FRAME as u64).collect(),
            fd,
        };
        xsk.stock();
        Ok(xsk)
    }

    /// The descriptor, for the socket map.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Takes back sent frames and hands the kernel free frames to receive into.
    fn stock(&mut self) {
        let done = self.completion.ready();
        for i in 0..done {
            let addr = self.completion.read(i);
            self.free.push(addr - addr % FRAME as u64);
        }
        self.completion.consume(done);
        let n = self.fill.room().min(self.free.len() as u32);
        for i in 0..n {
            let frame = self.free.pop().expect("counted");
            self.fill.write(i, frame);
        }
        self.fill.produce(n);
    }

    /// Waits up to `timeout` for a frame to arrive.
    pub fn wait(&self, timeout: Duration) {
        let mut poll = libc::pollfd {
            fd: self.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd.
        unsafe {
            libc::poll(&mut poll, 1, timeout.as_millis() as libc::c_int);
        }
    }

    /// Serves up to `max` received frames: `answer` gets each frame (received bytes first,
    /// the rest of the frame free) with the received length and returns the length of the
    /// frame to send back in its place, or `None` to send nothing; the answers go with the
    /// next [`Xsk::send`]. Returns how many frames were received.
    pub fn serve(
        &mut self,
        max: u32,
        mut answer: impl FnMut(&mut [u8], usize) -> Option<usize>,
    ) -> u32 {
        self.stock();
        let n = self.rx.ready().min(max).min(self.tx.room());
        let mut sent = 0;
        for i in 0..n {
            let desc = self.rx.read(i);
            let start = desc.addr as usize;
            let frame_end = (start / FRAME + 1) * FRAME;
            let valid = frame_end <= self.umem.len && start + desc.len as usize <= frame_end;
            let reply = if valid {
                // SAFETY: the kernel handed this frame over on the receive ring; until it
                // goes back (transmit or fill ring, below) nothing else reads or writes it,
                // and [start, frame_end) lies within the UMEM.
                let frame = unsafe {
                    std::slice::from_raw_parts_mut(
                        self.umem.at.as_ptr().add(start),
                        frame_end - start,
                    )
                };
                answer(frame, desc.len as usize)
            } else {
                None
            };
            match reply {
                Some(len) => {
                    self.tx.write(
                        sent,
                        Desc {
                            addr: desc.addr,
                            len: len as u32,
                            options: 0,
                        },
                    );
                    sent += 1;
                }
                None => self.free.push(desc.addr - desc.addr % FRAME as u64),
            }
        }
        self.rx.consume(n);
        self.tx.produce(sent);
        n
    }

    /// Has the kernel send the frames [`Xsk::serve`] put on the transmit ring. Also after a
    /// batch that sent nothing: a kick the kernel turned away (a busy queue) leaves frames
    /// on the ring, and they go with the next one.
    pub fn send(&self) {
        if self.tx.room() < RING && self.tx.needs_wakeup() {
            // SAFETY: a zero-length send on our own socket: it only starts transmission.
            unsafe {
                libc::sendto(
                    self.fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                );
            }
        }
    }
}
