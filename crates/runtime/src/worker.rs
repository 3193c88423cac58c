//! Running an XDP program per packet for a data-plane worker: on frames the
//! caller owns (a batch buffer, an AF_XDP UMEM chunk), for one CPU slot,
//! with the action and the redirect target as the result.
//!
//! [`XdpRunnerFactory`] prepares an object's program once (the
//! redirect-tracking helpers bound, the memory mode chosen); every worker
//! thread then makes its own [`XdpRunner`], which owns the engine's scratch
//! state and its CPU slot.
//!
//! Two ways to present a frame to the program:
//!
//! - **in place** (every program that never passes its context to a helper):
//!   r1 points at a context owned by the runner whose `data`/`data_end` are
//!   the caller's buffer. Nothing is copied.
//! - **staged** (programs calling `bpf_xdp_adjust_head`/`_tail`/`_meta`,
//!   `bpf_xdp_load_bytes`, `bpf_fib_lookup`, `bpf_perf_event_output`, ...):
//!   those helpers work on the runtime's own [`XdpFrame`], so the packet is
//!   copied into the runner's frame, the program runs, and the result is
//!   copied back to the caller's buffer at the same position relative to
//!   its headroom. Redirect or tail-call helpers do not force staging.
//!
//! A frame longer than the kernel's linear buffer ([`MAX_LINEAR_PACKET`]
//! bytes: a jumbo pcap record, a generated jumbo frame) is a multi-buffer
//! frame. Only `xdp.frags` programs receive those (the kernel refuses to
//! attach other programs to an interface whose MTU needs them); they always
//! run staged, on a frame split into the linear part and page fragments as
//! the kernel's test run splits it, and the whole frame (linear part, then
//! fragments) is copied back. Any other program gets
//! [`RunFrameError::NeedsFrags`] for such a frame, which the data plane
//! counts as an aborted packet and reports.

use crate::env::XdpEnv;
use crate::error::Fault;
use crate::helpers::ids;
use crate::helpers::HelperRegistry;
use crate::loader::LoadedObject;
use crate::program::{MemoryMode, Program, ProgramInner};
use crate::region::Region;
use crate::runtime_error::RuntimeError;
use crate::state::RunState;
use crate::xdp::context::{XdpMd, XDP_MD_SIZE};
use crate::xdp::frame::{FrameError, ETH_HLEN, MAX_LINEAR_PACKET, MAX_PACKET, XDP_PACKET_HEADROOM};
use crate::xdp::{action, XdpFrame};
use bpfjet_isa::{CallTarget, Insn};
use std::sync::Arc;

mod egress;
pub use egress::{Egress, EgressCopy};

/// Where a redirect goes, as the program's helper call named it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RedirectTo {
    /// `bpf_redirect(ifindex)` or a DEVMAP/DEVMAP_HASH entry's interface.
    Ifindex(u32),
    /// A DEVMAP/DEVMAP_HASH entry with a program (`struct
    /// bpf_devmap_val.bpf_prog`, program id `prog`) that runs on the frame
    /// before it leaves through `ifindex` (`worker/egress.rs`).
    EntryProgram { ifindex: u32, prog: u32 },
    /// An XSKMAP key.
    Xsk(u32),
    /// A CPUMAP key.
    Cpu(u32),
    /// `BPF_F_BROADCAST` over a devmap: every interface of the map (but
    /// the ingress one with `BPF_F_EXCLUDE_INGRESS`), each a copy that
    /// its entry's program (if any) sees alone.
    Broadcast { exclude_ingress: bool },
}

/// Which redirect helper call named the target, as the kernel's
/// `xdp_redirect` tracepoints report it: `bpf_redirect(ifindex)` is map
/// type `BPF_MAP_TYPE_UNSPEC` with map id `INT_MAX` and the ifindex as
/// index; `bpf_redirect_map` the map's type, id and the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RedirectVia {
    pub map_type: u32,
    pub map_id: u32,
    pub index: u32,
}

impl RedirectVia {
    /// `bpf_redirect(ifindex)`.
    pub const fn ifindex(ifindex: u32) -> RedirectVia {
        RedirectVia {
            map_type: 0,
            map_id: i32::MAX as u32,
            index: ifindex,
        }
    }

    /// `bpf_redirect_map(map, key)`.
    pub fn map(map: &bpfjet_maps::Map, key: u32) -> RedirectVia {
        RedirectVia {
            map_type: map.map_type() as u32,
            map_id: map.id(),
            index: key,
        }
    }
}

/// The result of one run on a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameVerdict {
    /// The program's return value (the XDP action; values past
    /// `XDP_REDIRECT` are returned as they are).
    pub action: u32,
    /// The last successful redirect helper call, when `action` is
    /// `XDP_REDIRECT`.
    pub redirect: Option<RedirectTo>,
    /// The call that named [`FrameVerdict::redirect`].
    pub via: Option<RedirectVia>,
    /// The packet bounds after the run, as offsets into the caller's buffer.
    pub data_start: usize,
    pub data_end: usize,
}

impl FrameVerdict {
    /// The frame leaves as copies, not from the caller's buffer: a
    /// broadcast, a DEVMAP entry with a program, a CPUMAP redirect. The
    /// data plane then calls [`XdpRunner::egress`] and sends what
    /// [`XdpRunner::take_copies`] returns (`worker/egress.rs`).
    /// (A method, not a field, and not done inside [`XdpRunner::run`]:
    /// either way the verdict was copied through the stack with loads
    /// that missed store forwarding, a few ns on every frame.)
    #[inline(always)]
    pub fn copies(&self) -> bool {
        egress::takes_egress_path(self.action, self.redirect)
    }
}

/// Runs a prepared program; the interpreter unless an engine is given.
/// Engines other than the interpreter (the JIT) plug in here with their own
/// `run(state, env, &[md])`.
pub type EngineEntry = Box<dyn FnMut(&mut RunState, &mut XdpEnv, u64) -> Result<u64, Fault> + Send>;

/// Helpers that take the context and therefore need the runtime's frame.
const FRAME_HELPERS: [u32; 8] = [
    ids::XDP_ADJUST_HEAD,
    ids::XDP_ADJUST_META,
    ids::XDP_ADJUST_TAIL,
    ids::XDP_GET_BUFF_LEN,
    ids::XDP_LOAD_BYTES,
    ids::XDP_STORE_BYTES,
    ids::FIB_LOOKUP,
    ids::PERF_EVENT_OUTPUT,
];

/// One object's program, prepared for data-plane workers.
#[derive(Clone, Debug)]
pub struct XdpRunnerFactory {
    name: String,
    program: Program,
    table: Vec<Option<Program>>,
    helpers: Arc<HelperRegistry>,
    maps: Arc<crate::env::ObjectMaps>,
    fib: Option<Arc<crate::helpers::fib::Fib>>,
    ncpus: usize,
    needs_frame: bool,
    /// An `xdp.frags` program: multi-buffer frames are run, not refused.
    frags: bool,
}

impl XdpRunnerFactory {
    /// Prepares program `name` of `loaded` (and every program of its
    /// tail-call table) to run in `memory` mode. Verified mode is the
    /// caller's promise, by way of its [`crate::VerifiedProof`], that
    /// bpfjet's verifier accepted the programs.
    pub fn new(
        loaded: &LoadedObject,
        name: &str,
        memory: MemoryMode,
    ) -> Result<XdpRunnerFactory, RuntimeError> {
        let entry = loaded.program(name)?;
        let frags = loaded.loaded_program(name)?.kind.has_frags();
        let helpers = Arc::clone(&entry.inner.helpers);
        let rebind = |p: &Program| -> Program {
            let inner = &p.inner;
            Program {
                inner: ProgramInner {
                    insns: inner.insns.clone(),
                    helpers: Arc::clone(&helpers),
                    kfuncs: Arc::clone(&inner.kfuncs),
                    static_regions: inner.static_regions.clone(),
                    subprog_entries: inner.subprog_entries.clone(),
                    bounds_checked: matches!(memory, MemoryMode::BoundsChecked),
                    this: std::sync::Weak::new(),
                }
                .shared(),
            }
        };
        let program = rebind(entry);
        let table: Vec<Option<Program>> = loaded
            .program_table()
            .iter()
            .map(|p| p.as_ref().map(rebind))
            .collect();
        let needs_frame = table.iter().flatten().any(uses_frame_helpers);
        Ok(XdpRunnerFactory {
            name: name.to_string(),
            program,
            table,
            helpers,
            maps: Arc::clone(loaded.object_maps()),
            fib: loaded.fib.clone(),
            ncpus: loaded.ncpus(),
            needs_frame,
            frags,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The prepared entry program (what another engine compiles).
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The prepared tail-call table, by program id.
    pub fn program_table(&self) -> &[Option<Program>] {
        &self.table
    }

    /// The helpers the prepared programs are bound to (the kernel's, with
    /// redirects reporting their target): what another engine must call.
    pub fn helpers(&self) -> &Arc<HelperRegistry> {
        &self.helpers
    }

    /// Whether frames are staged through the runtime's frame (see the
    /// module documentation) rather than run in place.
    pub fn stages_frames(&self) -> bool {
        self.needs_frame
    }

    /// A runner for CPU slot `cpu` whose frames arrive on `ingress_ifindex`
    /// queue `rx_queue`. `engine` replaces the interpreter; `table`
    /// replaces the tail-call table (another engine's compiled programs).
    pub fn runner(
        &self,
        cpu: usize,
        ingress_ifindex: u32,
        rx_queue: u32,
        engine: Option<EngineEntry>,
        table: Option<Vec<Option<Program>>>,
    ) -> Result<XdpRunner, RuntimeError> {
        if cpu >= self.ncpus {
            return Err(RuntimeError::Options(format!(
                "CPU slot {cpu} does not exist: the object has {} CPU slots",
                self.ncpus
            )));
        }
        let frame = staging_frame(ingress_ifindex, rx_queue)?;
        let base = frame.md().data - XDP_PACKET_HEADROOM as u64;
        let env = XdpEnv::new(frame, cpu as u32, Arc::clone(&self.maps), self.fib.clone());
        let mut state = RunState::new();
        state.set_program_table(table.unwrap_or_else(|| self.table.clone()));
        let md = Box::new(XdpMd {
            ingress_ifindex,
            rx_queue_index: rx_queue,
            ..XdpMd::default()
        });
        let frame_md = Region::read_only(env.frame.md_addr(), XDP_MD_SIZE as u64);
        if self.needs_frame {
            state.add_region(frame_md);
        } else {
            state.add_region(Region::read_only(
                &*md as *const XdpMd as u64,
                XDP_MD_SIZE as u64,
            ));
            // Multi-buffer frames of a frags program run staged even when
            // its linear frames run in place.
            if self.frags {
                state.add_region(frame_md);
            }
        }
        let program = self.program.clone();
        let engine = engine.unwrap_or_else(|| {
            Box::new(move |state: &mut RunState, env: &mut XdpEnv, md: u64| {
                program.run(state, env, &[md])
            })
        });
        Ok(XdpRunner {
            engine,
            state,
            env,
            md,
            frame_base: base,
            staged: self.needs_frame,
            frags: self.frags,
            packet_region: None,
            checked: self.program.is_bounds_checked(),
            ingress_ifindex,
            rx_queue,
            exclusive: self.maps.has_timers(),
            batch_hold: None,
            egress: Box::default(),
        })
    }
}

/// Runs one program on frames for one CPU slot. Not shared between threads.
pub struct XdpRunner {
    engine: EngineEntry,
    state: RunState,
    env: XdpEnv,
    /// The in-place context (unused when staging).
    md: Box<XdpMd>,
    /// Address of the staging frame's byte 0.
    frame_base: u64,
    staged: bool,
    /// An `xdp.frags` program (see the module documentation).
    frags: bool,
    /// The packet region registered for the previous in-place run.
    packet_region: Option<Region>,
    /// Bounds-checked mode: memory regions must be registered.
    checked: bool,
    ingress_ifindex: u32,
    rx_queue: u32,
    /// The maps hold timers: runs hold the CPU slot (crate::cpu_exclusion).
    exclusive: bool,
    /// The slot, held for a batch ([`XdpRunner::begin_batch`]).
    batch_hold: Option<crate::cpu_exclusion::CpuHold>,
    /// What the egress path keeps (`worker/egress.rs`), boxed: the
    /// runner's hot fields keep the layout they had without it.
    egress: Box<egress::EgressState>,
}

impl std::fmt::Debug for XdpRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpRunner")
            .field("cpu", &self.env.cpu)
            .field("staged", &self.staged)
            .finish_non_exhaustive()
    }
}

/// Why a frame could not be run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RunFrameError {
    #[error("{0}")]
    Fault(Fault),
    #[error("packet of {0} bytes is shorter than an Ethernet header")]
    TooShort(usize),
    #[error("packet of {len} bytes does not fit a {max}-byte XDP frame")]
    TooLong { len: usize, max: usize },
    #[error(
        "a {len}-byte frame is longer than the {MAX_LINEAR_PACKET}-byte linear XDP buffer: \
         only xdp.frags programs receive multi-buffer frames (the kernel does not attach \
         other programs to an interface whose MTU needs them)"
    )]
    NeedsFrags { len: usize },
    #[error("data range {start}..{end} is not inside the {len}-byte buffer")]
    BadRange {
        start: usize,
        end: usize,
        len: usize,
    },
    #[error("the program moved the packet to {start}..{end}, outside the {len}-byte buffer")]
    MovedOutside { start: i64, end: i64, len: usize },
    #[error(
        "a DEVMAP entry holds program id {0}, which this data plane does not run \
         (an entry program must be loaded with the deployment that redirects to it)"
    )]
    EgressProgram(u32),
}

impl XdpRunner {
    pub fn cpu(&self) -> u32 {
        self.env.cpu
    }

    /// Hold the CPU slot until [`XdpRunner::end_batch`], when the maps
    /// hold timers (whose callbacks must not run on the slot meanwhile,
    /// crate::cpu_exclusion): one hold per batch instead of one per run.
    pub fn begin_batch(&mut self) {
        if self.exclusive && self.batch_hold.is_none() {
            self.batch_hold = Some(crate::cpu_exclusion::hold(self.env.cpu));
        }
    }

    /// Let the timer service run callbacks on the slot again.
    pub fn end_batch(&mut self) {
        self.batch_hold = None;
    }

    /// Runs the program on `buf[data_start..data_end]`, in place when the
    /// program allows it (see the module documentation). The packet may grow
    /// into `buf`'s headroom and tailroom.
    pub fn run(
        &mut self,
        buf: &mut [u8],
        data_start: usize,
        data_end: usize,
    ) -> Result<FrameVerdict, RunFrameError> {
        if data_start > data_end || data_end > buf.len() {
            return Err(RunFrameError::BadRange {
                start: data_start,
                end: data_end,
                len: buf.len(),
            });
        }
        if data_end - data_start < ETH_HLEN {
            return Err(RunFrameError::TooShort(data_end - data_start));
        }
        // Outside a batch, a run of a program with timers holds its slot.
        let _hold = (self.exclusive && self.batch_hold.is_none())
            .then(|| crate::cpu_exclusion::hold(self.env.cpu));
        self.env.redirect = None;
        self.env.redirect_via = None;
        if data_end - data_start > MAX_LINEAR_PACKET {
            if !self.frags {
                return Err(RunFrameError::NeedsFrags {
                    len: data_end - data_start,
                });
            }
            return self.run_staged(buf, data_start, data_end);
        }
        if self.staged {
            self.run_staged(buf, data_start, data_end)
        } else {
            self.run_in_place(buf, data_start, data_end)
        }
    }

    fn finish_run(&mut self, result: Result<u64, Fault>) -> Result<u32, RunFrameError> {
        // Whatever an unverified program left (a reservation, a lock) is
        // released so the next packet does not find it wedged; the trace
        // log is not kept by the data plane.
        self.env.release_leftovers();
        self.env.trace.clear();
        result.map(|r0| r0 as u32).map_err(RunFrameError::Fault)
    }

    /// The target the run's redirect helpers recorded in the env (the
    /// runtime's helpers and the JIT's compiled-in ones alike).
    fn redirect_for(&mut self, action: u32) -> (Option<RedirectTo>, Option<RedirectVia>) {
        let (to, via) = self.env.take_redirect();
        if action == action::REDIRECT && to.is_some() {
            (to, via)
        } else {
            (None, None)
        }
    }

    fn run_in_place(
        &mut self,
        buf: &mut [u8],
        start: usize,
        end: usize,
    ) -> Result<FrameVerdict, RunFrameError> {
        let base = buf.as_mut_ptr() as u64;
        let md = &mut *self.md;
        md.data = base + start as u64;
        md.data_meta = md.data;
        md.data_end = base + end as u64;
        md.ingress_ifindex = self.ingress_ifindex;
        md.rx_queue_index = self.rx_queue;
        let md_addr = md as *const XdpMd as u64;
        let region = Region::writable(base + start as u64, (end - start) as u64);
        // Regions only matter to the bounds-checked interpreter.
        if self.checked && self.packet_region != Some(region) {
            match self.packet_region {
                Some(old) => self.state.replace_region(old, Some(region)),
                None => self.state.add_region(region),
            }
            self.packet_region = Some(region);
        }
        let result = (self.engine)(&mut self.state, &mut self.env, md_addr);
        let action = self.finish_run(result)?;
        let (redirect, via) = self.redirect_for(action);
        Ok(FrameVerdict {
            action,
            redirect,
            via,
            data_start: start,
            data_end: end,
        })
    }

    fn run_staged(
        &mut self,
        buf: &mut [u8],
        start: usize,
        end: usize,
    ) -> Result<FrameVerdict, RunFrameError> {
        // The staging frame is reused: the packet goes back at the standard
        // headroom with no metadata (split into fragments past the linear
        // part).
        self.env
            .frame
            .reset(&buf[start..end])
            .map_err(|e| match e {
                FrameError::TooShort(len) => RunFrameError::TooShort(len),
                FrameError::TooLong(len) => RunFrameError::TooLong {
                    len,
                    max: MAX_PACKET,
                },
                // `reset` always makes the whole packet linear up to the
                // linear maximum, without metadata; it never reports these.
                FrameError::LinearPastEnd { len, .. } => RunFrameError::TooLong {
                    len,
                    max: MAX_PACKET,
                },
                FrameError::BadMeta { linear, .. } => RunFrameError::TooLong {
                    len: linear,
                    max: MAX_PACKET,
                },
            })?;
        let md_addr = self.env.frame.md_addr();
        let (span_start, span_len) = self.env.frame.packet_span();
        self.state
            .add_region(Region::writable(span_start, span_len));
        let result = (self.engine)(&mut self.state, &mut self.env, md_addr);
        // The span as the program left it (the adjust helpers move it).
        let (after_start, after_len) = self.env.frame.packet_span();
        self.state
            .replace_region(Region::writable(after_start, after_len), None);
        self.state
            .replace_region(Region::writable(span_start, span_len), None);
        let action = self.finish_run(result)?;
        // Map the frame's offsets back onto the caller's buffer: the
        // caller's `start` is the frame's standard headroom.
        let md = *self.env.frame.md();
        let shift = start as i64 - XDP_PACKET_HEADROOM as i64;
        let new_start = (md.data - self.frame_base) as i64 + shift;
        // A multi-buffer frame comes back whole: its fragments follow the
        // linear part.
        let frags_size = self.env.frame.frags_size() as i64;
        let new_end = (md.data_end - self.frame_base) as i64 + shift + frags_size;
        if new_start < 0 || new_end as usize > buf.len() {
            return Err(RunFrameError::MovedOutside {
                start: new_start,
                end: new_end,
                len: buf.len(),
            });
        }
        let (new_start, new_end) = (new_start as usize, new_end as usize);
        let linear = self.env.frame.packet();
        buf[new_start..new_start + linear.len()].copy_from_slice(linear);
        if frags_size > 0 {
            let linear_len = linear.len();
            self.env
                .frame
                .copy_frags_to(&mut buf[new_start + linear_len..new_end]);
        }
        let (redirect, via) = self.redirect_for(action);
        Ok(FrameVerdict {
            action,
            redirect,
            via,
            data_start: new_start,
            data_end: new_end,
        })
    }
}

/// A fresh staging frame (its contents are replaced before every run).
fn staging_frame(ingress_ifindex: u32, rx_queue: u32) -> Result<XdpFrame, RuntimeError> {
    XdpFrame::new(&[0u8; ETH_HLEN], ingress_ifindex, rx_queue)
        .map_err(|e| RuntimeError::Options(e.to_string()))
}

fn uses_frame_helpers(p: &Program) -> bool {
    p.insns().iter().any(|insn| {
        matches!(insn, Insn::Call(CallTarget::Helper(id))
            if u32::try_from(*id).is_ok_and(|id| FRAME_HELPERS.contains(&id)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_helpers_are_kernel_ids() {
        for id in FRAME_HELPERS {
            assert!(crate::kernel_helper_name(id).is_some(), "{id}");
        }
    }
}
