//! The XDP filter program, written as eBPF instructions here (no compiler, no object
//! file): it sends UDP packets addressed to the served addresses and ports to the AF_XDP
//! socket of the queue they arrived on, and passes everything else (ARP, TCP, other ports,
//! fragments, IPv4 options, IPv6 extension headers, VLAN tags) on to the kernel as if it
//! were not there; a DNS query passed on is answered by the ordinary sockets.
//!
//! Also the `bpf(2)` calls that make the socket map, load the program and attach it to the
//! interface with a link, which the kernel detaches when the process ends, however it ends.

#![allow(unsafe_code)]

use super::error::XdpError;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// One eBPF instruction, as the kernel reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

// Opcodes (linux/bpf.h, linux/bpf_common.h): class | size or operation | source.
const LDX_W: u8 = 0x61;
const LDX_H: u8 = 0x69;
const LDX_B: u8 = 0x71;
const MOV64_X: u8 = 0xbf;
const MOV64_K: u8 = 0xb7;
const ADD64_K: u8 = 0x07;
const AND64_K: u8 = 0x57;
const JGT_X: u8 = 0x2d;
const JNE32_K: u8 = 0x56;
const JEQ32_K: u8 = 0x16;
const JA: u8 = 0x05;
const CALL: u8 = 0x85;
const EXIT: u8 = 0x95;
const LD_IMM64: u8 = 0x18;
const PSEUDO_MAP_FD: u8 = 1;
const FUNC_REDIRECT_MAP: i32 = 51;
const XDP_PASS: i32 = 2;

// Offsets in `struct xdp_md`.
const MD_DATA: i16 = 0;
const MD_DATA_END: i16 = 4;
const MD_RX_QUEUE_INDEX: i16 = 16;

// Registers: r1 argument (context), r6 the context kept, r2 packet start, r3 packet end,
// r4 bounds checks, r5 the field being compared.
const R0: u8 = 0;
const R1: u8 = 1;
const R2: u8 = 2;
const R3: u8 = 3;
const R4: u8 = 4;
const R5: u8 = 5;
const R6: u8 = 6;

/// Where a jump goes, resolved when the program is complete.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Label {
    Pass,
    Redirect,
    Ipv6,
}

/// The program under construction.
#[derive(Default)]
struct Asm {
    insns: Vec<Insn>,
    jumps: Vec<(usize, Label)>,
    labels: Vec<(Label, usize)>,
}

impl Asm {
    fn op(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) {
        self.insns.push(Insn {
            code,
            regs: dst | (src << 4),
            off,
            imm,
        });
    }

    fn jump(&mut self, code: u8, dst: u8, src: u8, imm: i32, to: Label) {
        self.jumps.push((self.insns.len(), to));
        self.op(code, dst, src, 0, imm);
    }

    fn place(&mut self, label: Label) {
        self.labels.push((label, self.insns.len()));
    }

    /// r5 = the field at packet offset `at`, read little-endian: every constant compared
    /// with it is written as its wire bytes read the same way.
    fn load(&mut self, code: u8, at: i16) {
        self.op(code, R5, R2, at, 0);
    }

    /// Goes to `Pass` unless the packet holds at least `len` bytes (the check the verifier
    /// needs before any read).
    fn need(&mut self, len: i32) {
        self.op(MOV64_X, R4, R2, 0, 0);
        self.op(ADD64_K, R4, 0, 0, len);
        self.jump(JGT_X, R4, R3, 0, Label::Pass);
    }

    /// Goes to `Redirect` when the packet's destination is one of `served` (the port at
    /// `port_at`, the address's 32-bit words from `addr_at`), else falls through.
    fn redirect_served(&mut self, served: &[(Vec<u32>, u16)], port_at: i16, addr_at: i16) {
        for (words, port) in served {
            let mut misses = vec![self.insns.len() + 1];
            self.load(LDX_H, port_at);
            self.op(JNE32_K, R5, 0, 0, i32::from(port.swap_bytes()));
            for (i, word) in (0i16..).zip(words) {
                self.load(LDX_W, addr_at + 4 * i);
                misses.push(self.insns.len());
                self.op(JNE32_K, R5, 0, 0, *word as i32);
            }
            self.jump(JA, 0, 0, 0, Label::Redirect);
            let next = self.insns.len();
            for m in misses {
                self.insns[m].off = (next - m - 1) as i16;
            }
        }
    }

    fn finish(mut self) -> Vec<Insn> {
        for &(at, to) in &self.jumps {
            let (_, target) = self.labels.iter().find(|(l, _)| *l == to).expect("placed");
            self.insns[at].off = (*target as isize - at as isize - 1) as i16;
        }
        self.insns
    }
}

/// The filter for `served` addresses: a packet to any of them goes to the socket in map
/// `xsks` at its receive queue's index (or on to the kernel when that queue has none).
fn filter(served: &[SocketAddr], xsks: RawFd) -> Vec<Insn> {
    let (mut v4, mut v6) = (vec![], vec![]);
    for a in served {
        match a.ip() {
            IpAddr::V4(ip) => v4.push((vec![u32::from_le_bytes(ip.octets())], a.port())),
            IpAddr::V6(ip) => {
                let octets = ip.octets();
                let words = octets
                    .chunks(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
                v6.push((words.collect(), a.port()));
            }
        }
    }
    let mut p = Asm::default();
    p.op(MOV64_X, R6, R1, 0, 0);
    p.op(LDX_W, R2, R1, MD_DATA, 0);
    p.op(LDX_W, R3, R1, MD_DATA_END, 0);
    // Ethernet (14) + IPv4 (20) + UDP (8).
    p.need(42);
    p.load(LDX_H, 12);
    if !v6.is_empty() {
        p.jump(JEQ32_K, R5, 0, 0xdd86, Label::Ipv6);
    }
    p.jump(JNE32_K, R5, 0, 0x0008, Label::Pass);
    // Version 4, a 20-byte header (no options).
    p.load(LDX_B, 14);
    p.jump(JNE32_K, R5, 0, 0x45, Label::Pass);
    p.load(LDX_B, 23);
    p.jump(JNE32_K, R5, 0, 17, Label::Pass);
    // More Fragments or an offset: fragments go to the kernel, which reassembles them.
    p.load(LDX_H, 20);
    p.op(AND64_K, R5, 0, 0, 0xff3f);
    p.jump(JNE32_K, R5, 0, 0, Label::Pass);
    p.redirect_served(&v4, 36, 30);
    p.jump(JA, 0, 0, 0, Label::Pass);
    p.place(Label::Ipv6);
    if !v6.is_empty() {
        // Ethernet (14) + IPv6 (40) + UDP (8); UDP must be the first next header.
        p.need(62);
        p.load(LDX_B, 20);
        p.jump(JNE32_K, R5, 0, 17, Label::Pass);
        p.redirect_served(&v6, 56, 38);
        p.jump(JA, 0, 0, 0, Label::Pass);
    }
    p.place(Label::Redirect);
    p.op(LDX_W, R2, R6, MD_RX_QUEUE_INDEX, 0);
    p.op(LD_IMM64, R1, PSEUDO_MAP_FD, 0, xsks);
    p.op(0, 0, 0, 0, 0);
    p.op(MOV64_K, R3, 0, 0, XDP_PASS);
    p.op(CALL, 0, 0, 0, FUNC_REDIRECT_MAP);
    p.op(EXIT, 0, 0, 0, 0);
    p.place(Label::Pass);
    p.op(MOV64_K, R0, 0, 0, XDP_PASS);
    p.op(EXIT, 0, 0, 0, 0);
    p.finish()
}

// bpf(2) commands, map and program types, the attach type.
const MAP_CREATE: i32 = 0;
const MAP_UPDATE_ELEM: i32 = 2;
const PROG_LOAD: i32 = 5;
const LINK_CREATE: i32 = 28;
const MAP_TYPE_XSKMAP: u32 = 17;
const PROG_TYPE_XDP: u32 = 6;
const ATTACH_XDP: u32 = 37;

#[repr(C)]
struct MapCreate {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
}

#[repr(C)]
struct MapUpdate {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
struct LinkCreate {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// `bpf(cmd, attr)`; a new descriptor where the command makes one.
fn bpf<T>(cmd: i32, attr: &mut T) -> std::io::Result<i64> {
    // SAFETY: `attr` is a live, initialised `repr(C)` prefix of `union bpf_attr` for `cmd`
    // and its exact size is passed; every pointer inside it points at memory that outlives
    // the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>() as u32,
        )
    };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn owned(fd: i64) -> OwnedFd {
    // SAFETY: `bpf` returned this new descriptor, owned by no one else.
    unsafe { OwnedFd::from_raw_fd(fd as RawFd) }
}

/// The program attached to an interface, with its socket map; detached when dropped.
pub struct Filter {
    map: OwnedFd,
    program: OwnedFd,
    /// Held: closing it detaches the program.
    link: Option<OwnedFd>,
}

impl Filter {
    /// Loads the program for `served` with a map of `queues` sockets; nothing is attached
    /// until [`Filter::attach`].
    pub fn load(served: &[SocketAddr], queues: u32) -> Result<Filter, XdpError> {
        let mut create = MapCreate {
            map_type: MAP_TYPE_XSKMAP,
            key_size: 4,
            value_size: 4,
            max_entries: queues,
            map_flags: 0,
        };
        let map = owned(
            bpf(MAP_CREATE, &mut create).map_err(|e| match e.raw_os_error() {
                Some(libc::EPERM) => XdpError::NotPermitted(e),
                _ => XdpError::Map(e),
            })?,
        );
        let insns = filter(served, map.as_raw_fd());
        let mut log = vec![0u8; 64 * 1024];
        let license = c"GPL";
        let mut name = [0u8; 16];
        name[..7].copy_from_slice(b"ho_dns\0");
        let mut load = ProgLoad {
            prog_type: PROG_TYPE_XDP,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: license.as_ptr() as u64,
            log_level: 1,
            log_size: log.len() as u32,
            log_buf: log.as_mut_ptr() as u64,
            kern_version: 0,
            prog_flags: 0,
            prog_name: name,
            prog_ifindex: 0,
            expected_attach_type: ATTACH_XDP,
        };
        let program = match bpf(PROG_LOAD, &mut load) {
            Ok(fd) => owned(fd),
            Err(e) => {
                let end = log.iter().position(|b| *b == 0).unwrap_or(log.len());
                let said = String::from_utf8_lossy(&log[..end]);
                return Err(XdpError::Refused {
                    source: e,
                    log: said.into_owned(),
                });
            }
        };
        Ok(Filter {
            map,
            program,
            link: None,
        })
    }

    /// Sends queue `queue`'s served packets to socket `fd`.
    pub fn add_socket(&self, queue: u32, fd: RawFd) -> Result<(), XdpError> {
        let (key, value) = (queue, fd as u32);
        let mut update = MapUpdate {
            map_fd: self.map.as_raw_fd() as u32,
            _pad: 0,
            key: &key as *const u32 as u64,
            value: &value as *const u32 as u64,
            flags: 0,
        };
        bpf(MAP_UPDATE_ELEM, &mut update)
            .map(drop)
            .map_err(|source| XdpError::Socket {
                step: "add to the XDP map the socket",
                queue,
                source,
            })
    }

    /// Attaches the program to interface `ifindex` (in the driver where it supports XDP,
    /// else in the kernel's generic path) until this is dropped.
    pub fn attach(&mut self, ifindex: u32) -> Result<(), XdpError> {
        let mut link = LinkCreate {
            prog_fd: self.program.as_raw_fd() as u32,
            target_ifindex: ifindex,
            attach_type: ATTACH_XDP,
            flags: 0,
        };
        let fd = bpf(LINK_CREATE, &mut link).map_err(XdpError::Attach)?;
        self.link = Some(owned(fd));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every jump lands inside the program, and the program ends in an exit on each path
    /// the labels lead to.
    fn well_formed(p: &[Insn]) {
        for (i, insn) in p.iter().enumerate() {
            let class = insn.code & 0x07;
            if (class == 0x05 || class == 0x06) && insn.code != CALL && insn.code != EXIT {
                let to = i as isize + 1 + insn.off as isize;
                assert!((0..p.len() as isize).contains(&to), "jump {i} to {to}");
            }
        }
        assert_eq!(p.last().map(|i| i.code), Some(EXIT));
    }

    #[test]
    fn the_filter_compares_each_served_address_and_port_as_the_wire_has_them() {
        let served: Vec<SocketAddr> = vec![
            "192.0.2.1:53".parse().unwrap(),
            "[2001:db8::1]:5353".parse().unwrap(),
            "192.0.2.1:8053".parse().unwrap(),
        ];
        let p = filter(&served, 7);
        well_formed(&p);
        let imms: Vec<i32> = p
            .iter()
            .filter(|i| i.code == JNE32_K)
            .map(|i| i.imm)
            .collect();
        assert!(imms.contains(&i32::from(53u16.swap_bytes())));
        assert!(imms.contains(&i32::from(8053u16.swap_bytes())));
        assert!(imms.contains(&(u32::from_le_bytes([192, 0, 2, 1]) as i32)));
        assert!(imms.contains(&(u32::from_le_bytes([0x20, 0x01, 0x0d, 0xb8]) as i32)));
        let map = p.iter().find(|i| i.code == LD_IMM64).expect("the map");
        assert_eq!((map.imm, map.regs >> 4), (7, PSEUDO_MAP_FD));
    }
}
