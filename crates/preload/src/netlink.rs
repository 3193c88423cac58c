//! The netlink XDP attach and query, interposed on `NETLINK_ROUTE` sockets.
//!
//! - `RTM_SETLINK` (or iproute2's `RTM_NEWLINK` on an existing ifindex)
//!   carrying only `IFLA_XDP` whose program is bpfjet's (or
//!   that detaches from an interface bpfjet serves) is served by bpfjet and
//!   never reaches the kernel: its `NLMSG_ERROR` reply (the ack) is queued
//!   on the socket and handed out by the next receive.
//! - `RTM_GETLINK` goes to the kernel; while bpfjet has attachments, the
//!   replies are read here and each `RTM_NEWLINK` of an interface with a
//!   bpfjet attachment gets bpfjet's `IFLA_XDP` (attached mode, program
//!   ids) in place of the kernel's, which shows bpfjet's own AF_XDP steering
//!   program.
//!
//! Every other message, and every other socket, goes through untouched.
//! Datagrams read here are kept per socket so `MSG_PEEK` followed by a
//! plain receive (libbpf's pattern) sees the same bytes.

use bpfjet_server::{attach::Attachment, BpfjetBackend, XdpRequest};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

const NLMSG_HDRLEN: usize = 16;
const IFINFOMSG_LEN: usize = 16;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const RTM_SETLINK: u16 = 19;
const NLM_F_MULTI: u16 = 2;
const NLM_F_ACK: u16 = 4;
const NLM_F_CAPPED: u16 = 0x100;
const NLA_TYPE_MASK: u16 = 0x3fff;
const IFLA_XDP: u16 = 43;
const IFLA_XDP_FD: u16 = 1;
const IFLA_XDP_ATTACHED: u16 = 2;
const IFLA_XDP_FLAGS: u16 = 3;
const IFLA_XDP_PROG_ID: u16 = 4;
const IFLA_XDP_DRV_PROG_ID: u16 = 5;
const IFLA_XDP_SKB_PROG_ID: u16 = 6;
const IFLA_XDP_EXPECTED_FD: u16 = 8;
/// Biggest datagram read from the kernel (dumps use at most 32 KiB).
const MAX_DATAGRAM: usize = 1 << 20;

#[derive(Default)]
struct Socket {
    /// Datagrams for the caller, first first.
    queue: VecDeque<Vec<u8>>,
    /// A `RTM_GETLINK` reply is still coming from the kernel.
    rewrite: bool,
}

static SOCKETS: Mutex<Option<HashMap<i32, Socket>>> = Mutex::new(None);
/// Whether SOCKETS holds anything (receives on other sockets skip the lock).
static TRACKING: AtomicBool = AtomicBool::new(false);

fn with_sockets<R>(f: impl FnOnce(&mut HashMap<i32, Socket>) -> R) -> R {
    let mut g = SOCKETS.lock().unwrap_or_else(PoisonError::into_inner);
    let map = g.get_or_insert_with(HashMap::new);
    let r = f(map);
    TRACKING.store(!map.is_empty(), Ordering::Release);
    r
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_ne_bytes([b[off], b[off + 1]])
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes(b[off..off + 4].try_into().unwrap())
}

/// The attributes in `b`: `(type as sent, payload)`, stopping at a
/// malformed one. Compare types through [`kind`].
fn attrs(mut b: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    while b.len() >= 4 {
        let len = u16_at(b, 0) as usize;
        if len < 4 || len > b.len() {
            break;
        }
        out.push((u16_at(b, 2), &b[4..len]));
        b = &b[align4(len).min(b.len())..];
    }
    out
}

/// An attribute's type without the nested/byte-order flags.
fn kind(ty: u16) -> u16 {
    ty & NLA_TYPE_MASK
}

fn push_attr(out: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    out.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
    out.extend_from_slice(&ty.to_ne_bytes());
    out.extend_from_slice(payload);
    out.resize(align4(out.len()), 0);
}

/// Whether `fd` is a `NETLINK_ROUTE` socket.
fn is_route_netlink(fd: i32) -> bool {
    let opt = |name| {
        let mut v: libc::c_int = -1;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: a c_int out-parameter of the right length.
        let r = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                name,
                (&mut v as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        (r == 0).then_some(v)
    };
    opt(libc::SO_DOMAIN) == Some(libc::AF_NETLINK)
        && opt(libc::SO_PROTOCOL) == Some(libc::NETLINK_ROUTE)
}

/// This socket's netlink port id (the `nlmsg_pid` of replies to it).
fn port_id(fd: i32) -> u32 {
    // SAFETY: sockaddr_nl is plain data.
    let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t;
    // SAFETY: a sockaddr_nl out-parameter of the right length.
    unsafe { libc::getsockname(fd, (&mut sa as *mut libc::sockaddr_nl).cast(), &mut len) };
    sa.nl_pid
}

/// The `IFLA_XDP` request of a `RTM_SETLINK` that carries nothing else.
fn xdp_request(msg: &[u8]) -> Option<XdpRequest> {
    if msg.len() < NLMSG_HDRLEN + IFINFOMSG_LEN {
        return None;
    }
    let ifindex = u32_at(msg, NLMSG_HDRLEN + 4);
    let top = attrs(&msg[NLMSG_HDRLEN + IFINFOMSG_LEN..]);
    let [(ty, xdp)] = top.as_slice() else {
        return None;
    };
    if kind(*ty) != IFLA_XDP {
        return None;
    }
    let mut r = XdpRequest {
        ifindex,
        fd: -1,
        flags: 0,
        expected_fd: None,
    };
    let mut has_fd = false;
    for (ty, p) in attrs(xdp) {
        if p.len() < 4 {
            return None;
        }
        match kind(ty) {
            IFLA_XDP_FD => {
                r.fd = u32_at(p, 0) as i32;
                has_fd = true;
            }
            IFLA_XDP_FLAGS => r.flags = u32_at(p, 0),
            IFLA_XDP_EXPECTED_FD => r.expected_fd = Some(u32_at(p, 0) as i32),
            _ => return None,
        }
    }
    (has_fd && ifindex != 0).then_some(r)
}

/// The `NLMSG_ERROR` answering `req` (error 0 is the ack).
fn error_reply(req: &[u8], errno: i32, port: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(NLMSG_HDRLEN * 2 + 4);
    out.extend_from_slice(&((NLMSG_HDRLEN * 2 + 4) as u32).to_ne_bytes());
    out.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
    out.extend_from_slice(&NLM_F_CAPPED.to_ne_bytes());
    out.extend_from_slice(&req[8..12]); // seq
    out.extend_from_slice(&port.to_ne_bytes());
    out.extend_from_slice(&(-errno).to_ne_bytes());
    out.extend_from_slice(&req[..NLMSG_HDRLEN]);
    out
}

/// A message about to be sent on `fd`: Some(bytes "sent") when bpfjet
/// served it, None to send it to the kernel.
pub fn outgoing(server: &BpfjetBackend, fd: i32, buf: &[u8]) -> Option<usize> {
    if buf.len() < NLMSG_HDRLEN {
        return None;
    }
    let ty = u16_at(buf, 4);
    let len = u32_at(buf, 0) as usize;
    // iproute2 changes a link with RTM_NEWLINK, libbpf with RTM_SETLINK.
    let change = ty == RTM_SETLINK || ty == RTM_NEWLINK;
    if !(ty == RTM_GETLINK || change) || len > buf.len() || len < NLMSG_HDRLEN {
        return None;
    }
    if !is_route_netlink(fd) {
        return None;
    }
    let msg = &buf[..len];
    if ty == RTM_GETLINK {
        if server.has_attachments() {
            with_sockets(|s| s.entry(fd).or_default().rewrite = true);
        }
        return None;
    }
    let req = xdp_request(msg)?;
    let result = server.netlink_xdp(&req)?;
    let flags = u16_at(msg, 6);
    let errno = result.err().map_or(0, |e| e.0);
    if errno != 0 || flags & NLM_F_ACK != 0 {
        let reply = error_reply(msg, errno, port_id(fd));
        with_sockets(|s| s.entry(fd).or_default().queue.push_back(reply));
    }
    Some(buf.len())
}

/// `msg` (one `RTM_NEWLINK`) with bpfjet's `IFLA_XDP` for `a`.
fn with_bpfjet_xdp(msg: &[u8], a: &Attachment) -> Vec<u8> {
    let mut out = msg[..NLMSG_HDRLEN + IFINFOMSG_LEN].to_vec();
    for (ty, p) in attrs(&msg[NLMSG_HDRLEN + IFINFOMSG_LEN..]) {
        if kind(ty) != IFLA_XDP {
            push_attr(&mut out, ty, p);
        }
    }
    // As the kernel's rtnl_xdp_fill orders them.
    let mut xdp = Vec::new();
    let mode = a.attached_mode();
    let per_mode = if mode == 2 {
        IFLA_XDP_SKB_PROG_ID
    } else {
        IFLA_XDP_DRV_PROG_ID
    };
    push_attr(&mut xdp, per_mode, &a.prog_id.to_ne_bytes());
    push_attr(&mut xdp, IFLA_XDP_ATTACHED, &[mode]);
    push_attr(&mut xdp, IFLA_XDP_PROG_ID, &a.prog_id.to_ne_bytes());
    push_attr(&mut out, IFLA_XDP, &xdp);
    let n = out.len() as u32;
    out[..4].copy_from_slice(&n.to_ne_bytes());
    out
}

/// A datagram from the kernel with bpfjet's attachments in its
/// `RTM_NEWLINK`s; whether the reply goes on after it.
fn rewrite(server: &BpfjetBackend, dgram: &[u8]) -> (Vec<u8>, bool) {
    let mut out = Vec::with_capacity(dgram.len() + 64);
    let mut more = false;
    let mut rest = dgram;
    while rest.len() >= NLMSG_HDRLEN {
        let len = u32_at(rest, 0) as usize;
        if len < NLMSG_HDRLEN || len > rest.len() {
            out.extend_from_slice(rest);
            break;
        }
        let msg = &rest[..len];
        let (ty, flags) = (u16_at(msg, 4), u16_at(msg, 6));
        more = flags & NLM_F_MULTI != 0 && ty != NLMSG_DONE;
        let attached = (ty == RTM_NEWLINK && len >= NLMSG_HDRLEN + IFINFOMSG_LEN)
            .then(|| server.xdp_attachment(u32_at(msg, NLMSG_HDRLEN + 4)))
            .flatten();
        match attached {
            Some(a) => out.extend_from_slice(&with_bpfjet_xdp(msg, &a)),
            None => out.extend_from_slice(msg),
        }
        out.resize(align4(out.len()), 0);
        rest = &rest[align4(len).min(rest.len())..];
    }
    (out, more)
}

/// What a receive on `fd` returns when bpfjet answers it: a queued reply,
/// or the kernel's next datagram rewritten. None: receive from the kernel
/// as usual. `real_recv` reads one datagram from the kernel (flags without
/// `MSG_PEEK`/`MSG_TRUNC`) into the buffer, returning its full length.
pub fn incoming(
    server: Option<&BpfjetBackend>,
    fd: i32,
    flags: i32,
    real_recv: impl FnOnce(&mut [u8], i32) -> isize,
) -> Option<Result<Vec<u8>, i32>> {
    if !TRACKING.load(Ordering::Acquire) {
        return None;
    }
    let peek = flags & libc::MSG_PEEK != 0;
    let rewriting = with_sockets(|s| {
        let sock = s.get_mut(&fd)?;
        if let Some(d) = if peek {
            sock.queue.front().cloned()
        } else {
            sock.queue.pop_front()
        } {
            return Some(Ok(d));
        }
        if sock.rewrite {
            return Some(Err(()));
        }
        s.remove(&fd);
        None
    })?;
    let server = match rewriting {
        Ok(d) => return Some(Ok(d)),
        Err(()) => server?,
    };
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let n = real_recv(&mut buf, flags & !(libc::MSG_PEEK | libc::MSG_TRUNC));
    if n < 0 {
        // SAFETY: errno is thread-local.
        return Some(Err(unsafe { *libc::__errno_location() }));
    }
    let n = (n as usize).min(buf.len());
    let (dgram, more) = rewrite(server, &buf[..n]);
    with_sockets(|s| {
        let sock = s.entry(fd).or_default();
        sock.rewrite = more;
        if peek {
            sock.queue.push_front(dgram.clone());
        }
    });
    Some(Ok(dgram))
}

/// `fd` is being closed.
pub fn forget(fd: i32) {
    if TRACKING.load(Ordering::Acquire) {
        with_sockets(|s| s.remove(&fd));
    }
}
