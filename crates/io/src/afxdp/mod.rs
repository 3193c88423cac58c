//! AF_XDP: `bpfjet run --iface IF[:QUEUES]`.
//!
//! Per queue, one AF_XDP socket with its own UMEM, bound zero-copy where
//! the driver supports it and in copy mode otherwise (veth), served by one
//! worker thread that runs the program on each frame in place in the UMEM.
//! A tiny kernel program (`examples/xdp_kern/xsk_redirect.c`) steers every
//! frame of those queues to the sockets.
//!
//! Actions: `XDP_TX` (and a redirect to the same interface) go back out on
//! the same queue's TX ring with no copy; `XDP_REDIRECT` to another
//! interface is transmitted by the kernel through AF_PACKET; `XDP_PASS`
//! enters the kernel stack through a TAP device (see [`exception`] for why
//! and how); `XDP_DROP`/`XDP_ABORTED` recycle the frame to the fill ring.
//! A redirect to an XSKMAP or CPUMAP entry has no consumer in bpfjet and is
//! counted as an output drop.

mod config;
pub mod exception;
mod iface;
mod kern;
mod ring;
mod session;
mod worker;
mod xsk;

pub use config::{AttachMode, BindMode, IfaceSpec, XskConfig};
pub use iface::Interface;
pub use kern::{default_object, KernelSteering};
pub use session::{MakeProgram, Session, Teardown};

use std::io;

/// Why an AF_XDP session could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AfXdpError {
    #[error("{0}")]
    Config(String),

    #[error("interface {0} does not exist")]
    NoInterface(String),

    #[error("interface {0} is down; bring it up first (`ip link set dev {0} up`)")]
    InterfaceDown(String),

    #[error(
        "interface {iface} has {available} receive queue(s); queue {queue} does not exist \
         (use --iface {iface}:{available} or fewer)"
    )]
    QueueMismatch {
        iface: String,
        queue: u32,
        available: u32,
    },

    #[error("{what} on {iface} queue {queue}: {source}{}", permission_hint(source))]
    Sys {
        what: &'static str,
        iface: String,
        queue: u32,
        source: io::Error,
    },

    #[error("kernel: {0}")]
    Kernel(String),

    #[error("preparing the program: {0}")]
    Program(String),
}

fn permission_hint(e: &io::Error) -> &'static str {
    if e.kind() == io::ErrorKind::PermissionDenied || e.raw_os_error() == Some(libc::EPERM) {
        " (AF_XDP needs CAP_NET_RAW and CAP_NET_ADMIN, and attaching XDP needs CAP_BPF: run as root)"
    } else {
        ""
    }
}
