//! What happens to a frame redirected through a DEVMAP or DEVMAP_HASH
//! after the program returns, as the kernel's devmap does it:
//!
//! - an entry may hold a program (`struct bpf_devmap_val.bpf_prog`, a
//!   program id in bpfjet's map): it runs on the frame before the frame
//!   leaves, with `ingress_ifindex` the receiving device, `rx_queue_index`
//!   0 and `egress_ifindex` the entry's device (`dev_map_bpf_prog_run`).
//!   `XDP_PASS` sends the frame as the program left it; any other action
//!   drops it (the kernel warns about actions other than DROP and ABORTED
//!   and drops those too);
//! - `BPF_F_BROADCAST` (`dev_map_enqueue_multi`) sends a copy to every
//!   entry of the map, in index order (a DEVMAP_HASH in its own order),
//!   skipping the receiving device with `BPF_F_EXCLUDE_INGRESS`; each copy
//!   meets its own entry's program. An empty map sends nothing;
//! - a CPUMAP redirect hands the frame to the stack on that CPU (the
//!   kernel's cpumap thread builds an skb and receives it), after the
//!   entry's program (`struct bpf_cpumap_val.bpf_prog`) if it has one:
//!   run with the receiving device and queue 0 (`cpu_map_bpf_prog_run_xdp`),
//!   `XDP_PASS` goes on to the stack, `XDP_REDIRECT` to the interface its
//!   redirect named (`bpf_redirect` or a devmap entry without a program;
//!   other targets of a cpumap program are dropped), anything else drops.
//!   bpfjet's data plane has no other CPUs' stacks: the frame goes to the
//!   stack as `XDP_PASS` frames do (the TAP on AF_XDP, `pass.pcap`).
//!
//! Frames that take this path leave as [`EgressCopy`]s the data plane
//! sends one by one ([`FrameVerdict::copies`]); a redirect through an
//! entry without a program keeps the zero-copy path.
//!
//! Entry programs are found in the runner's program table (indexed by
//! program id, as tail calls are) and run on the engine the data plane
//! gave for them ([`XdpRunner::set_entry_engines`]: the JIT's code), else
//! on the interpreter.

use super::{EngineEntry, FrameVerdict, RedirectTo, RunFrameError, XdpRunner};
use crate::region::Region;
use crate::xdp::action;
use crate::xdp::context::XDP_MD_SIZE;
use bpfjet_maps::{Map, MapType};
use std::sync::Arc;

/// Where a copy goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Egress {
    /// Out of an interface.
    Ifindex(u32),
    /// Up the receiving host's stack (a CPUMAP redirect).
    Stack,
}

/// One frame leaving the data plane.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EgressCopy {
    pub to: Egress,
    /// The frame's bytes (data to data_end, then its fragments).
    pub data: Vec<u8>,
}

/// The runner's egress state.
#[derive(Default)]
pub(super) struct EgressState {
    /// The last frame's copies.
    pub(super) copies: Vec<EgressCopy>,
    /// Another engine's code for the programs of the table, by program id
    /// ([`XdpRunner::set_entry_engines`]).
    pub(super) entry_engines: Vec<Option<EngineEntry>>,
    /// The devmaps and cpumaps redirects went through.
    pub(super) redirect_maps: Vec<Arc<Map>>,
    /// Buffers of copies the data plane has sent ([`XdpRunner::recycle`]).
    spare: Vec<Vec<u8>>,
}

/// Sent copies' buffers kept for reuse, at most.
const SPARE_BUFFERS: usize = 256;

impl EgressState {
    fn buffer(&mut self) -> Vec<u8> {
        let mut b = self.spare.pop().unwrap_or_default();
        b.clear();
        b
    }
}

/// A devmap entry: its device and the id of its program (0: none).
#[derive(Clone, Copy, Debug)]
struct Entry {
    ifindex: u32,
    prog: u32,
}

fn entry_at(value: *const u8, value_size: u32) -> Entry {
    // SAFETY: a devmap value is 4 or 8 bytes (checked when the map was
    // created): the ifindex, then the program id when there is room.
    unsafe {
        Entry {
            ifindex: std::ptr::read_unaligned(value as *const u32),
            prog: if value_size >= 8 {
                std::ptr::read_unaligned(value.add(4) as *const u32)
            } else {
                0
            },
        }
    }
}

/// Every entry of devmap `map`, in the order the kernel walks it.
fn entries(map: &Map) -> Vec<Entry> {
    let mut out = Vec::new();
    let vs = map.value_size();
    match map.map_type() {
        MapType::Devmap => {
            for i in 0..map.max_entries() {
                if let Some(v) = map.lookup(&i.to_ne_bytes(), 0) {
                    out.push(entry_at(v, vs));
                }
            }
        }
        _ => {
            map.visit_hash_elems(0, |_, v| {
                out.push(entry_at(v, vs));
                true
            });
        }
    }
    out
}

/// Whether a run's outcome leaves as copies: a broadcast, a devmap entry
/// with a program, a CPUMAP redirect. Inlined in the runner: every other
/// frame pays two compares.
#[inline(always)]
pub(super) fn takes_egress_path(action: u32, redirect: Option<RedirectTo>) -> bool {
    action == action::REDIRECT
        && matches!(
            redirect,
            Some(
                RedirectTo::Broadcast { .. } | RedirectTo::EntryProgram { .. } | RedirectTo::Cpu(_)
            )
        )
}

impl XdpRunner {
    /// The copies of the last frame whose [`FrameVerdict::copies`] was
    /// set, appended to `out`; returns how many.
    pub fn take_copies(&mut self, out: &mut Vec<EgressCopy>) -> u32 {
        let n = self.egress.copies.len() as u32;
        out.append(&mut self.egress.copies);
        n
    }

    /// Run the devmap and cpumap entry programs of the table (by program
    /// id) on another engine's code (the JIT's) instead of the
    /// interpreter; a None slot stays on the interpreter.
    pub fn set_entry_engines(&mut self, engines: Vec<Option<EngineEntry>>) {
        self.egress.entry_engines = engines;
    }

    /// Copies the data plane has sent, given back: their buffers serve
    /// the next ones (an allocation and a free per copy were an eighth of
    /// a copy's cost). `sent` is left empty.
    pub fn recycle(&mut self, sent: &mut Vec<EgressCopy>) {
        for c in sent.drain(..) {
            if self.egress.spare.len() < SPARE_BUFFERS {
                self.egress.spare.push(c.data);
            }
        }
    }

    /// How many copies the last frame left for [`XdpRunner::take_copies`].
    pub fn pending_copies(&self) -> u32 {
        self.egress.copies.len() as u32
    }

    /// The devmap (cpumap) `id` a broadcast or CPUMAP redirect went
    /// through: one of the object's maps, or an inner map of one of its
    /// map-in-maps. Found once per runner (a map keeps its id for life),
    /// then from the runner's cache: a short scan, no reference count.
    fn redirect_map(&mut self, id: u32, types: &[MapType]) -> Option<&Arc<Map>> {
        let i = match self.egress.redirect_maps.iter().position(|m| m.id() == id) {
            Some(i) => i,
            None => {
                let maps = self.env.run.object_maps();
                let map = match maps.maps().iter().find(|m| m.id() == id) {
                    Some(m) => Arc::clone(m),
                    None => maps.instance().map_by_id(id).ok()?,
                };
                self.egress.redirect_maps.push(map);
                self.egress.redirect_maps.len() - 1
            }
        };
        let map = &self.egress.redirect_maps[i];
        types.contains(&map.map_type()).then_some(map)
    }

    fn devmap(&mut self, id: u32) -> Option<&Arc<Map>> {
        self.redirect_map(id, &[MapType::Devmap, MapType::DevmapHash])
    }

    /// After a run whose verdict [`FrameVerdict::copies`] (on the same
    /// buffer): the redirect becomes the runner's copies, for
    /// [`XdpRunner::take_copies`]. An entry program's fault is the frame's.
    #[inline(never)]
    pub fn egress(&mut self, buf: &[u8], v: &FrameVerdict) -> Result<(), RunFrameError> {
        self.devmap_egress(buf, v)
    }

    fn devmap_egress(&mut self, buf: &[u8], v: &FrameVerdict) -> Result<(), RunFrameError> {
        self.egress.copies.clear();
        if v.action != action::REDIRECT {
            return Ok(());
        }
        let (Some(to), Some(via)) = (v.redirect, v.via) else {
            return Ok(());
        };
        let targets = match to {
            RedirectTo::Broadcast { exclude_ingress } => {
                let ingress = self.ingress_ifindex;
                let Some(map) = self.devmap(via.map_id) else {
                    return Ok(());
                };
                let mut all = entries(map);
                all.retain(|e| !(exclude_ingress && e.ifindex == ingress));
                all
            }
            // The redirect helper read the entry: a plain redirect (no
            // program) costs nothing here.
            RedirectTo::EntryProgram { ifindex, prog } => vec![Entry { ifindex, prog }],
            RedirectTo::Cpu(cpu) => {
                return self.redirect_to_cpu(buf, v, via.map_id, cpu);
            }
            _ => return Ok(()),
        };
        let frame = &buf[v.data_start..v.data_end];
        let mut copies = std::mem::take(&mut self.egress.copies);
        for e in targets {
            let mut data = self.egress.buffer();
            let sent = if e.prog == 0 {
                data.extend_from_slice(frame);
                true
            } else {
                self.run_entry_program(e.prog, e.ifindex, frame, &mut data)? == action::PASS
            };
            if sent {
                copies.push(EgressCopy {
                    to: Egress::Ifindex(e.ifindex),
                    data,
                });
            }
        }
        self.egress.copies = copies;
        Ok(())
    }

    /// A frame redirected to CPUMAP `map_id`'s entry `cpu`: to the stack,
    /// through the entry's program if it has one.
    fn redirect_to_cpu(
        &mut self,
        buf: &[u8],
        v: &FrameVerdict,
        map_id: u32,
        cpu: u32,
    ) -> Result<(), RunFrameError> {
        let frame = &buf[v.data_start..v.data_end];
        let prog = self
            .redirect_map(map_id, &[MapType::Cpumap])
            .filter(|m| m.value_size() >= 8)
            .and_then(|m| Some(entry_at(lookup_entry(m, cpu)?, m.value_size()).prog))
            .unwrap_or(0);
        if prog == 0 {
            let mut data = self.egress.buffer();
            data.extend_from_slice(frame);
            self.egress.copies.push(EgressCopy {
                to: Egress::Stack,
                data,
            });
            return Ok(());
        }
        let mut data = self.egress.buffer();
        let to = match self.run_entry_program(prog, 0, frame, &mut data)? {
            action::PASS => Some(Egress::Stack),
            // bpf_redirect, or a devmap entry without a program (the
            // helper reports one with a program as `EntryProgram`); the
            // cpumap program's other targets are not followed.
            action::REDIRECT => match self.env.take_redirect() {
                (Some(RedirectTo::Ifindex(i)), _) => Some(Egress::Ifindex(i)),
                _ => None,
            },
            _ => None,
        };
        if let Some(to) = to {
            self.egress.copies.push(EgressCopy { to, data });
        }
        Ok(())
    }

    /// Runs entry program `prog` (egress device `egress`, 0 for a cpumap's)
    /// on a copy of `frame` in the runner's staging frame: its action, and
    /// the frame as it left it in `out`. A redirect it made stays recorded
    /// for the caller (`XdpEnv::take_redirect`).
    fn run_entry_program(
        &mut self,
        prog: u32,
        egress: u32,
        frame: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<u32, RunFrameError> {
        let Some(program) = self
            .state
            .program_table()
            .get(prog as usize)
            .cloned()
            .flatten()
        else {
            return Err(RunFrameError::EgressProgram(prog));
        };
        self.env.redirect = None;
        self.env.redirect_via = None;
        self.env
            .frame
            .reset(frame)
            .map_err(|_| RunFrameError::TooLong {
                len: frame.len(),
                max: crate::xdp::frame::MAX_PACKET,
            })?;
        self.env.frame.set_queue(self.ingress_ifindex, 0, egress);
        let md_addr = self.env.frame.md_addr();
        let (span_start, span_len) = self.env.frame.packet_span();
        let md = Region::read_only(md_addr, XDP_MD_SIZE as u64);
        let packet = Region::writable(span_start, span_len);
        // Regions only matter to the bounds-checked interpreter.
        if self.checked {
            self.state.add_region(md);
            self.state.add_region(packet);
        }
        let result = match self.egress.entry_engines.get_mut(prog as usize) {
            Some(Some(engine)) => engine(&mut self.state, &mut self.env, md_addr),
            _ => program.run(&mut self.state, &mut self.env, &[md_addr]),
        };
        if self.checked {
            let (after_start, after_len) = self.env.frame.packet_span();
            self.state
                .replace_region(Region::writable(after_start, after_len), None);
            self.state.replace_region(packet, None);
            self.state.replace_region(md, None);
        }
        // The frame goes back to the main program's queue for the next run.
        self.env
            .frame
            .set_queue(self.ingress_ifindex, self.rx_queue, 0);
        let act = self.finish_run(result)?;
        self.env.frame.copy_out(out);
        Ok(act)
    }
}

fn lookup_entry(map: &Map, key: u32) -> Option<*mut u8> {
    map.lookup(&key.to_ne_bytes(), 0)
}
