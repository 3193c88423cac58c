//! The kernel half: `xsk_redirect.o` (examples/xdp_kern) loaded with
//! libbpf, attached to the interface, and its XSKMAP filled with our
//! sockets. Dropping [`KernelSteering`] detaches it.
//!
//! In `auto` mode the program is attached through a BPF link, which the
//! kernel removes by itself when the last fd closes, so even a killed
//! process leaves no program behind. Explicit `native`/`generic` modes use
//! the netlink attach (the only way to force a mode) and are detached in
//! `Drop`, which every exit path of `bpfjet run` (SIGINT/SIGTERM included)
//! reaches.

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use libbpf_rs::{Link, MapCore, MapFlags, Object, ObjectBuilder, Xdp, XdpFlags};

use super::{AfXdpError, AttachMode};

const PROGRAM: &str = "xsk_redirect";
/// The same in `xdp.frags`, for multi-buffer frames.
const PROGRAM_FRAGS: &str = "xsk_redirect_frags";
const XSKMAP: &str = "xsks_map";
const OBJECT: &str = "xsk_redirect.o";

/// Where the kernel object is looked for when not given.
pub fn default_object() -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(p) = std::env::var_os("BPFJET_XSK_KERN") {
        candidates.push(PathBuf::from(p));
    }
    // target/<profile>/bpfjet -> <workspace>/build/examples/xdp_kern
    if let Ok(exe) = std::env::current_exe() {
        for up in exe.ancestors().skip(1).take(4) {
            candidates.push(up.join("build/examples/xdp_kern").join(OBJECT));
        }
    }
    candidates.push(Path::new("build/examples/xdp_kern").join(OBJECT));
    candidates.push(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../build/examples/xdp_kern")
            .join(OBJECT),
    );
    candidates.into_iter().find(|p| p.is_file())
}

/// Whether `ifname`'s MTU is more than a single-buffer XDP frame holds
/// (a page minus headroom and shared info, less the Ethernet header).
fn jumbo_mtu(ifname: &str) -> bool {
    std::fs::read_to_string(format!("/sys/class/net/{ifname}/mtu"))
        .ok()
        .and_then(|m| m.trim().parse::<usize>().ok())
        .is_some_and(|mtu| mtu + 14 > 3520)
}

/// The attached steering program.
pub struct KernelSteering {
    // Field order is drop order: the link (detach) before the object.
    link: Option<Link>,
    netlink: Option<XdpFlags>,
    ifindex: u32,
    object: Object,
    program: &'static str,
    pub mode: &'static str,
}

impl std::fmt::Debug for KernelSteering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelSteering")
            .field("ifindex", &self.ifindex)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

fn kerr(what: &str, e: impl std::fmt::Display) -> AfXdpError {
    AfXdpError::Kernel(format!("{what}: {e}"))
}

impl KernelSteering {
    pub fn attach(
        object: Option<&Path>,
        ifname: &str,
        ifindex: u32,
        mode: AttachMode,
        multi_buffer: bool,
    ) -> Result<KernelSteering, AfXdpError> {
        let program = if multi_buffer { PROGRAM_FRAGS } else { PROGRAM };
        let path = match object {
            Some(p) => p.to_path_buf(),
            None => default_object().ok_or_else(|| {
                AfXdpError::Config(format!(
                    "the kernel-side program {OBJECT} was not found: run `make -C examples` \
                     (it builds build/examples/xdp_kern/{OBJECT}) or pass --xsk-kern / set \
                     BPFJET_XSK_KERN"
                ))
            })?,
        };
        let open = ObjectBuilder::default()
            .open_file(&path)
            .map_err(|e| kerr(&format!("opening {}", path.display()), e))?;
        let object = open
            .load()
            .map_err(|e| kerr(&format!("loading {} into the kernel", path.display()), e))?;
        let prog = object
            .progs_mut()
            .find(|p| p.name() == program)
            .ok_or_else(|| kerr(&path.display().to_string(), format!("no program {program}")))?;
        let busy = |e: libbpf_rs::Error| {
            let text = e.to_string();
            if text.contains("Device or resource busy") || text.contains("EBUSY") {
                AfXdpError::Kernel(format!(
                    "{ifname} already has an XDP program attached; detach it first \
                     (`ip link set dev {ifname} xdp off`)"
                ))
            } else if !multi_buffer && jumbo_mtu(ifname) {
                // The kernel's reason (ERANGE, "MTU too large") is in an
                // extack message libbpf does not pass on.
                AfXdpError::Kernel(format!(
                    "attaching {program} to {ifname} ({mode} mode): {text}; {ifname}'s MTU \
                     needs multi-buffer frames, which the kernel gives only to xdp.frags \
                     programs: build the program in SEC(\"xdp.frags\") or lower the MTU"
                ))
            } else {
                kerr(
                    &format!("attaching {program} to {ifname} ({mode} mode)"),
                    text,
                )
            }
        };
        let (link, netlink, mode_name) = match mode {
            AttachMode::Auto => (
                Some(prog.attach_xdp(ifindex as i32).map_err(busy)?),
                None,
                "auto (link)",
            ),
            AttachMode::Native | AttachMode::Generic => {
                let flags = if mode == AttachMode::Native {
                    XdpFlags::DRV_MODE
                } else {
                    XdpFlags::SKB_MODE
                } | XdpFlags::UPDATE_IF_NOEXIST;
                Xdp::new(prog.as_fd())
                    .attach(ifindex as i32, XdpFlags::from_bits_retain(flags.bits()))
                    .map_err(busy)?;
                (
                    None,
                    Some(flags),
                    if mode == AttachMode::Native {
                        "native"
                    } else {
                        "generic"
                    },
                )
            }
        };
        Ok(KernelSteering {
            link,
            netlink,
            ifindex,
            object,
            program,
            mode: mode_name,
        })
    }

    /// Steers queue `queue` to socket `fd`.
    pub fn register(&self, queue: u32, fd: i32) -> Result<(), AfXdpError> {
        let map = self
            .object
            .maps()
            .find(|m| m.name() == XSKMAP)
            .ok_or_else(|| kerr("xsk_redirect.o", format!("no map {XSKMAP}")))?;
        map.update(&queue.to_ne_bytes(), &fd.to_ne_bytes(), MapFlags::ANY)
            .map_err(|e| kerr(&format!("registering the socket of queue {queue}"), e))
    }
}

impl Drop for KernelSteering {
    fn drop(&mut self) {
        drop(self.link.take());
        if let Some(flags) = self.netlink.take() {
            if let Some(prog) = self.object.progs().find(|p| p.name() == self.program) {
                let modes = flags & XdpFlags::MODES;
                let _ = Xdp::new(prog.as_fd()).detach(self.ifindex as i32, modes);
            }
        }
    }
}
