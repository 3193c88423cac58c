//! The exception path: packets the program hands back to the kernel.
//!
//! **XDP_PASS → TAP.** AF_XDP takes frames before the kernel stack sees
//! them, and no socket can push a frame into an interface's *receive* path
//! (AF_PACKET transmits). bpfjet therefore creates a TAP device, `pass-<IF>`
//! (same MAC and MTU as IF), writes every PASS frame into it, and the stack
//! receives it there. For the stack to own that traffic — answer ARP, keep
//! its neighbour entries, route replies — the host's addresses for IF belong
//! on the TAP (the DPDK exception-path model): IF is bpfjet's wire, the TAP
//! is the kernel's view of it. Frames the stack sends out of the TAP are
//! forwarded onto IF by a small thread through an AF_PACKET socket. The TAP
//! is not persistent: it disappears when bpfjet exits, however it exits.
//!
//! **XDP_REDIRECT to another interface → AF_PACKET**: transmitted by the
//! kernel on the target interface.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::AfXdpError;

/// `SIOCSIFFLAGS`, `SIOCGIFFLAGS`, `SIOCSIFHWADDR`, `SIOCSIFMTU`
/// (linux/sockios.h; the same on every architecture).
const SIOCGIFFLAGS: libc::c_ulong = 0x8913;
const SIOCSIFFLAGS: libc::c_ulong = 0x8914;
const SIOCSIFMTU: libc::c_ulong = 0x8922;
const SIOCSIFHWADDR: libc::c_ulong = 0x8924;
const ARPHRD_ETHER: u16 = 1;

fn ifreq(name: &str) -> libc::ifreq {
    // SAFETY: ifreq is plain data; zero is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req
        .ifr_name
        .iter_mut()
        .zip(name.bytes().take(libc::IFNAMSIZ - 1))
    {
        *dst = src as libc::c_char;
    }
    req
}

fn ioctl(fd: libc::c_int, op: libc::c_ulong, req: &mut libc::ifreq) -> io::Result<()> {
    // SAFETY: `req` is a valid ifreq for these interface ioctls.
    if unsafe { libc::ioctl(fd, op as _, req as *mut libc::ifreq) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A raw packet socket that transmits on any interface.
#[derive(Debug)]
pub struct PacketTx {
    fd: OwnedFd,
}

impl PacketTx {
    pub fn new() -> io::Result<PacketTx> {
        // Protocol 0: this socket never receives.
        // SAFETY: plain socket(2).
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fresh fd.
        Ok(PacketTx {
            fd: unsafe { OwnedFd::from_raw_fd(raw) },
        })
    }

    /// Transmits `frame` on `ifindex`.
    pub fn send(&self, ifindex: u32, frame: &[u8]) -> io::Result<()> {
        // SAFETY: sockaddr_ll is plain data.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = ifindex as i32;
        sll.sll_halen = 6;
        // SAFETY: `frame` and `sll` are valid for the lengths passed.
        let rc = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                frame.as_ptr() as *const libc::c_void,
                frame.len(),
                libc::MSG_DONTWAIT,
                &sll as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// The TAP device PASS frames go to.
#[derive(Debug)]
pub struct PassTap {
    fd: OwnedFd,
    pub name: String,
}

impl PassTap {
    /// Creates `pass-<ifname>` with `mac` and `mtu`, and brings it up.
    pub fn create(ifname: &str, mac: [u8; 6], mtu: u32) -> Result<PassTap, AfXdpError> {
        let name: String = format!("pass-{ifname}")
            .chars()
            .take(libc::IFNAMSIZ - 1)
            .collect();
        let err = |what: &str, e: io::Error| {
            AfXdpError::Kernel(format!(
                "TAP device {name} for XDP_PASS: {what}: {e}{}",
                super::permission_hint(&e)
            ))
        };
        let path = c"/dev/net/tun";
        // SAFETY: open(2) of a constant path.
        let raw = unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_RDWR | libc::O_CLOEXEC | libc::O_NONBLOCK,
            )
        };
        if raw < 0 {
            return Err(err("open /dev/net/tun", io::Error::last_os_error()));
        }
        // SAFETY: fresh fd.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut req = ifreq(&name);
        req.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI) as libc::c_short;
        // SAFETY: TUNSETIFF takes an ifreq.
        if unsafe { libc::ioctl(raw, libc::TUNSETIFF as _, &mut req as *mut libc::ifreq) } != 0 {
            return Err(err("TUNSETIFF", io::Error::last_os_error()));
        }
        // Interface ioctls go through any socket.
        // SAFETY: plain socket(2).
        let ctl = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if ctl < 0 {
            return Err(err("control socket", io::Error::last_os_error()));
        }
        // SAFETY: fresh fd.
        let ctl = unsafe { OwnedFd::from_raw_fd(ctl) };
        let mut req = ifreq(&name);
        // SAFETY: writing the hwaddr member of the union.
        unsafe {
            req.ifr_ifru.ifru_hwaddr.sa_family = ARPHRD_ETHER;
            for (d, s) in req.ifr_ifru.ifru_hwaddr.sa_data.iter_mut().zip(mac) {
                *d = s as libc::c_char;
            }
        }
        ioctl(ctl.as_raw_fd(), SIOCSIFHWADDR, &mut req).map_err(|e| err("set MAC", e))?;
        let mut req = ifreq(&name);
        req.ifr_ifru.ifru_mtu = mtu as libc::c_int;
        ioctl(ctl.as_raw_fd(), SIOCSIFMTU, &mut req).map_err(|e| err("set MTU", e))?;
        let mut req = ifreq(&name);
        ioctl(ctl.as_raw_fd(), SIOCGIFFLAGS, &mut req).map_err(|e| err("get flags", e))?;
        // SAFETY: reading and writing the flags member.
        unsafe { req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
        ioctl(ctl.as_raw_fd(), SIOCSIFFLAGS, &mut req).map_err(|e| err("bring up", e))?;
        Ok(PassTap { fd, name })
    }

    /// Hands `frame` to the kernel stack. A full TAP queue drops it (the
    /// stack is the bottleneck then, as a NIC's backlog would be). A frame
    /// its sender left to checksum offload (a veth peer) is completed
    /// first, as the device would have: the stack accepted it before XDP.
    pub fn inject(&self, frame: &[u8]) -> bool {
        let completed = crate::checksum::complete_partial_l4(frame);
        let frame = completed.as_deref().unwrap_or(frame);
        // SAFETY: `frame` is valid for its length.
        let rc = unsafe {
            libc::write(
                self.fd.as_raw_fd(),
                frame.as_ptr() as *const libc::c_void,
                frame.len(),
            )
        };
        rc == frame.len() as isize
    }

    /// Forwards what the stack sends out of the TAP onto `ifindex`, until
    /// `stop`. Returns the thread and its packet counter.
    pub fn spawn_egress(
        self: &Arc<Self>,
        ifindex: u32,
        stop: Arc<AtomicBool>,
    ) -> io::Result<(JoinHandle<()>, Arc<AtomicU64>)> {
        let tx = PacketTx::new()?;
        let count = Arc::new(AtomicU64::new(0));
        let tap = Arc::clone(self);
        let counter = Arc::clone(&count);
        let handle = std::thread::Builder::new()
            .name("bpfjet-tap".into())
            .spawn(move || {
                let mut buf = vec![0u8; 65536];
                while !stop.load(Ordering::Relaxed) {
                    let mut pfd = libc::pollfd {
                        fd: tap.fd.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    // SAFETY: one valid pollfd.
                    if unsafe { libc::poll(&mut pfd, 1, 100) } <= 0 {
                        continue;
                    }
                    loop {
                        // SAFETY: `buf` is valid for its length.
                        let n = unsafe {
                            libc::read(
                                tap.fd.as_raw_fd(),
                                buf.as_mut_ptr() as *mut libc::c_void,
                                buf.len(),
                            )
                        };
                        if n <= 0 {
                            break;
                        }
                        if tx.send(ifindex, &buf[..n as usize]).is_ok() {
                            counter.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })?;
        Ok((handle, count))
    }
}
