//! One AF_XDP socket with its own UMEM, bound to one queue.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::ring::{Ring, Side};
use super::{AfXdpError, BindMode, XskConfig};

/// The packet memory the socket and the kernel share, in frames of
/// `frame_size` bytes. Anonymous memory, populated up front.
pub struct Umem {
    base: *mut u8,
    len: usize,
    pub frame_size: u32,
    pub frames: u32,
}

// SAFETY: plain memory owned by this value.
unsafe impl Send for Umem {}

impl Umem {
    fn new(frames: u32, frame_size: u32) -> io::Result<Umem> {
        let len = frames as usize * frame_size as usize;
        // SAFETY: an anonymous private mapping; checked below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Umem {
            base: base as *mut u8,
            len,
            frame_size,
            frames,
        })
    }

    /// The frame holding UMEM address `addr` (aligned chunk mode) and the
    /// offset of `addr` in it.
    pub fn frame_mut(&mut self, addr: u64) -> Option<(&mut [u8], usize)> {
        let chunk = addr & !(u64::from(self.frame_size) - 1);
        let end = chunk as usize + self.frame_size as usize;
        if end > self.len {
            return None;
        }
        // SAFETY: chunk..end is inside the mapping; `&mut self` makes the
        // borrow exclusive on our side, and the kernel does not touch a
        // frame while user space owns it (it came off RX or completion).
        let frame = unsafe {
            std::slice::from_raw_parts_mut(self.base.add(chunk as usize), self.frame_size as usize)
        };
        Some((frame, (addr - chunk) as usize))
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: unmapping what `new` mapped (the socket is closed first:
        // `XskSocket` drops its fd and rings before its UMEM).
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// A bound AF_XDP socket and its rings.
pub struct XskSocket {
    // Field order is drop order: rings, then the socket, then the memory.
    pub fill: Ring<u64>,
    pub completion: Ring<u64>,
    pub rx: Ring<libc::xdp_desc>,
    pub tx: Ring<libc::xdp_desc>,
    fd: OwnedFd,
    pub umem: Umem,
    pub zero_copy: bool,
    pub queue: u32,
}

impl std::fmt::Debug for XskSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XskSocket")
            .field("queue", &self.queue)
            .field("zero_copy", &self.zero_copy)
            .finish_non_exhaustive()
    }
}

fn setsockopt<T>(
    fd: libc::c_int,
    level: libc::c_int,
    opt: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` is a live T of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            value as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL_BUDGET` (asm-generic/socket.h).
const SO_PREFER_BUSY_POLL: libc::c_int = 69;
const SO_BUSY_POLL_BUDGET: libc::c_int = 70;

impl XskSocket {
    /// Creates the socket and its UMEM, maps the rings and binds to
    /// `ifindex` queue `queue`, zero-copy first when `cfg.bind` allows.
    pub fn open(
        ifindex: u32,
        ifname: &str,
        queue: u32,
        cfg: &XskConfig,
    ) -> Result<XskSocket, AfXdpError> {
        let sys = |what: &'static str| {
            move |source: io::Error| AfXdpError::Sys {
                what,
                iface: ifname.to_string(),
                queue,
                source,
            }
        };
        let attempts: &[u16] = match cfg.bind {
            BindMode::Auto => &[libc::XDP_ZEROCOPY, libc::XDP_COPY],
            BindMode::ZeroCopy => &[libc::XDP_ZEROCOPY],
            BindMode::Copy => &[libc::XDP_COPY],
        };
        let mut last = None;
        for &mode in attempts {
            match Self::open_mode(ifindex, queue, cfg, mode) {
                Ok(s) => return Ok(s),
                Err((what, e)) => last = Some(sys(what)(e)),
            }
        }
        Err(last.unwrap_or(AfXdpError::Config("no bind mode".into())))
    }

    fn open_mode(
        ifindex: u32,
        queue: u32,
        cfg: &XskConfig,
        mode: u16,
    ) -> Result<XskSocket, (&'static str, io::Error)> {
        // SAFETY: plain socket(2).
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(("socket(AF_XDP)", io::Error::last_os_error()));
        }
        // SAFETY: a fresh fd we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let umem = Umem::new(cfg.umem_frames, cfg.frame_size).map_err(|e| ("UMEM mmap", e))?;
        // SAFETY: the struct is plain data; zero is valid for every field.
        let mut reg: libc::xdp_umem_reg = unsafe { std::mem::zeroed() };
        reg.addr = umem.base as u64;
        reg.len = umem.len as u64;
        reg.chunk_size = cfg.frame_size;
        reg.headroom = 0;
        setsockopt(raw, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg)
            .map_err(|e| ("XDP_UMEM_REG", e))?;
        let n = cfg.ring_size as libc::c_int;
        for opt in [
            libc::XDP_UMEM_FILL_RING,
            libc::XDP_UMEM_COMPLETION_RING,
            libc::XDP_RX_RING,
            libc::XDP_TX_RING,
        ] {
            setsockopt(raw, libc::SOL_XDP, opt, &n).map_err(|e| ("ring setup", e))?;
        }
        // SAFETY: zeroed plain data, filled by getsockopt.
        let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
        // SAFETY: `off` has `len` bytes.
        let rc = unsafe {
            libc::getsockopt(
                raw,
                libc::SOL_XDP,
                libc::XDP_MMAP_OFFSETS,
                &mut off as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        if rc != 0 {
            return Err(("XDP_MMAP_OFFSETS", io::Error::last_os_error()));
        }
        let size = cfg.ring_size;
        let map_err = |e| ("ring mmap", e);
        let fill = Ring::map(
            raw,
            libc::XDP_UMEM_PGOFF_FILL_RING,
            &off.fr,
            size,
            Side::Producer,
        )
        .map_err(map_err)?;
        let completion = Ring::map(
            raw,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING,
            &off.cr,
            size,
            Side::Consumer,
        )
        .map_err(map_err)?;
        let rx = Ring::map(
            raw,
            libc::XDP_PGOFF_RX_RING as u64,
            &off.rx,
            size,
            Side::Consumer,
        )
        .map_err(map_err)?;
        let tx = Ring::map(
            raw,
            libc::XDP_PGOFF_TX_RING as u64,
            &off.tx,
            size,
            Side::Producer,
        )
        .map_err(map_err)?;
        let mut flags = mode;
        if cfg.need_wakeup {
            flags |= libc::XDP_USE_NEED_WAKEUP;
        }
        if cfg.multi_buffer {
            flags |= libc::XDP_USE_SG;
        }
        let sxdp = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: flags,
            sxdp_ifindex: ifindex,
            sxdp_queue_id: queue,
            sxdp_shared_umem_fd: 0,
        };
        // SAFETY: `sxdp` is a valid sockaddr_xdp of the size passed.
        let rc = unsafe {
            libc::bind(
                raw,
                &sxdp as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            let what = if mode == libc::XDP_ZEROCOPY {
                "bind (zero-copy)"
            } else {
                "bind (copy mode)"
            };
            return Err((what, io::Error::last_os_error()));
        }
        if cfg.busy_poll {
            let on: libc::c_int = 1;
            let usecs: libc::c_int = 20;
            let budget: libc::c_int = 64;
            setsockopt(raw, libc::SOL_SOCKET, SO_PREFER_BUSY_POLL, &on)
                .and_then(|()| setsockopt(raw, libc::SOL_SOCKET, libc::SO_BUSY_POLL, &usecs))
                .and_then(|()| setsockopt(raw, libc::SOL_SOCKET, SO_BUSY_POLL_BUDGET, &budget))
                .map_err(|e| ("busy-poll socket options", e))?;
        }
        Ok(XskSocket {
            fill,
            completion,
            rx,
            tx,
            fd,
            umem,
            zero_copy: mode == libc::XDP_ZEROCOPY,
            queue,
        })
    }

    pub fn raw_fd(&self) -> libc::c_int {
        self.fd.as_raw_fd()
    }

    /// Kicks the kernel to transmit what the TX ring holds.
    pub fn kick_tx(&self) {
        // SAFETY: sendto with no data on our socket is the documented kick.
        unsafe {
            libc::sendto(
                self.raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            );
        }
    }

    /// Drives RX processing (needed with need-wakeup and with busy polling).
    pub fn kick_rx(&self) {
        // SAFETY: recvfrom with no buffer on our socket is the documented kick.
        unsafe {
            libc::recvfrom(
                self.raw_fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            );
        }
    }

    /// Frames the kernel could not deliver to this socket: dropped for
    /// lack of a fill-ring frame or RX-ring room (XDP_STATISTICS).
    pub fn kernel_drops(&self) -> u64 {
        // SAFETY: plain data, filled by getsockopt.
        let mut st: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
        // SAFETY: `st` has `len` bytes.
        let rc = unsafe {
            libc::getsockopt(
                self.raw_fd(),
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                &mut st as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        if rc != 0 {
            return 0;
        }
        // rx_ring_full and rx_fill_ring_empty_descs break rx_dropped down.
        st.rx_dropped
    }

    /// Waits up to `timeout_ms` for RX.
    pub fn wait_rx(&self, timeout_ms: i32) {
        let mut pfd = libc::pollfd {
            fd: self.raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    }
}
