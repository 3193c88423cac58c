//! XDP `bpf_link`s: `BPF_LINK_CREATE` (attach type `BPF_XDP`),
//! `BPF_LINK_UPDATE`, `BPF_LINK_DETACH`, and their info.
//!
//! A link is a record `<run>/<instance>/links/<id>` ([`LinkRecord`]) and an
//! fd on it; the attachment it makes is an ordinary attachment
//! ([`crate::attach`]) that names the link. As in the kernel, the
//! attachment lasts while the link does: the link's last fd closing (its
//! process exiting included) with no pin detaches, `LINK_DETACH` detaches
//! and leaves a defunct link, `LINK_UPDATE` hot-replaces the program.

use crate::attach::{self, XDP_FLAGS_MODES};
use crate::backend::BpfjetBackend;
use crate::namespace::{Kind, ObjRef};
use crate::objects::Obj;
use crate::progs::BPF_PROG_TYPE_XDP;
use bpfjet_sys::{Backend, Cmd, Command, Errno};
use serde::{Deserialize, Serialize};

/// `BPF_XDP` (enum bpf_attach_type).
const BPF_XDP: u32 = 37;
/// `BPF_LINK_TYPE_XDP`.
const BPF_LINK_TYPE_XDP: u32 = 6;
/// `BPF_F_REPLACE` of `LINK_UPDATE`.
const BPF_F_REPLACE: u32 = 4;
/// `struct bpf_link_info` as bpfjet fills it: type, id, prog_id, and the
/// XDP member's ifindex at 16 (the kernel's size since uprobe-multi links).
pub(crate) const LINK_INFO_SIZE: usize = 64;
const ENOLINK: i32 = 67;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LinkRecord {
    pub id: u32,
    pub prog_id: u32,
    /// 0 once detached.
    pub ifindex: u32,
    pub flags: u32,
    /// A freplace link: the program whose function it replaces (0 for an
    /// XDP link), that function's BTF id and first instruction.
    #[serde(default)]
    pub target_prog_id: u32,
    #[serde(default)]
    pub target_btf_id: u32,
    #[serde(default)]
    pub target_insn_off: u32,
    /// The EXT program's `expected_attach_type`, as link info reports it.
    #[serde(default)]
    pub attach_type: u32,
    /// A freplace link after `BPF_LINK_DETACH`.
    #[serde(default)]
    pub detached: bool,
    /// A link of a tracing program to a probe in processes.
    #[serde(default)]
    pub probe: Option<crate::probe_links::ProbeLink>,
    /// An uprobe-multi link: its uprobes in processes.
    #[serde(default)]
    pub uprobe_multi: Option<crate::uprobe_multi::UprobeMulti>,
}

impl LinkRecord {
    pub fn is_freplace(&self) -> bool {
        self.target_prog_id != 0
    }

    /// A link of a tracing program to probes in processes.
    pub fn is_probe(&self) -> bool {
        self.probe.is_some() || self.uprobe_multi.is_some()
    }

    /// The probe points of a probe link, each with its process and
    /// cookie (an uprobe-multi link's, one per offset).
    pub fn probe_points(&self) -> impl Iterator<Item = &crate::probe_links::ProbeLink> {
        self.probe
            .iter()
            .chain(self.uprobe_multi.iter().flat_map(|m| m.points.iter()))
    }
}

pub fn is_link_command(c: Cmd) -> bool {
    matches!(c, Cmd::LinkCreate | Cmd::LinkUpdate | Cmd::LinkDetach)
}

/// The attr's `u32` at `off` (a short attr is zero-extended, as decoded).
pub fn word(raw: &[u8], off: usize) -> u32 {
    let mut b = [0u8; 4];
    for (i, x) in b.iter_mut().enumerate() {
        *x = raw.get(off + i).copied().unwrap_or(0);
    }
    u32::from_ne_bytes(b)
}

/// The attr's `u64` at `off` (an `__aligned_u64` pointer or cookie; a
/// short attr is zero-extended, as [`word`]).
pub fn dword(raw: &[u8], off: usize) -> u64 {
    u64::from(word(raw, off)) | u64::from(word(raw, off + 4)) << 32
}

impl BpfjetBackend {
    pub(crate) fn link_record(&self, id: u32) -> Result<LinkRecord, Errno> {
        serde_json::from_slice(&self.ns.read_record(Kind::Link, id)?).map_err(|_| Errno::EINVAL)
    }

    pub(crate) fn write_link(&self, rec: &LinkRecord) -> Result<(), Errno> {
        let bytes = serde_json::to_vec(rec).map_err(|_| Errno::EINVAL)?;
        self.ns.write_record(Kind::Link, rec.id, &bytes)
    }

    /// A bpfjet XDP program behind `fd`: its id. None: not bpfjet's.
    fn xdp_prog(&self, fd: u32) -> Option<Result<u32, Errno>> {
        match self.obj(fd)? {
            Obj::Prog(p) if p.rec.prog_type == BPF_PROG_TYPE_XDP => Some(Ok(p.rec.id)),
            _ => Some(Err(Errno::EINVAL)),
        }
    }

    pub(crate) fn link_command(&self, c: Cmd, raw: &[u8], cmd: &Command) -> Result<i64, Errno> {
        match c {
            Cmd::LinkCreate if self.ext_prog(word(raw, 0)).is_some() => {
                self.freplace_link_create(raw)
            }
            Cmd::LinkCreate => match self.tracing_prog(word(raw, 0)) {
                Some(prog) => self.probe_link_create(&prog, raw),
                None => self.link_create(raw, cmd),
            },
            Cmd::LinkUpdate => self.link_update(raw, cmd),
            _ => self.link_detach(raw, cmd),
        }
    }

    fn link_create(&self, raw: &[u8], cmd: &Command) -> Result<i64, Errno> {
        let (prog_fd, ifindex, attach_type, flags) =
            (word(raw, 0), word(raw, 4), word(raw, 8), word(raw, 12));
        let prog_id = match self.xdp_prog(prog_fd) {
            None => {
                // A kernel program's (or struct_ops map's) link: the
                // kernel's, listed with the instance's links.
                let r = self.kernel.execute(cmd);
                if let Ok(fd) = r {
                    self.register_kernel_object(crate::namespace::Kind::Link, fd);
                }
                return r;
            }
            Some(r) => r,
        };
        if attach_type != BPF_XDP {
            self.warn_once(
                &format!("BPF_LINK_CREATE with attach type {attach_type}"),
                "bpfjet attaches XDP programs only",
            );
            return Err(Errno::EINVAL);
        }
        let prog_id = prog_id?;
        if flags & !XDP_FLAGS_MODES != 0 || (flags & XDP_FLAGS_MODES).count_ones() > 1 {
            return Err(Errno::EINVAL);
        }
        if flags & attach::XDP_FLAGS_HW_MODE != 0 {
            return Err(Errno::EOPNOTSUPP);
        }
        attach::ifname(ifindex)?;
        if self.ns.attachment(ifindex).is_some() {
            // The kernel: a link cannot replace an attached program.
            return Err(Errno::EBUSY);
        }
        let rec = LinkRecord {
            id: 0,
            prog_id,
            ifindex,
            flags,
            target_prog_id: 0,
            target_btf_id: 0,
            target_insn_off: 0,
            attach_type: BPF_XDP,
            detached: false,
            probe: None,
            uprobe_multi: None,
        };
        let (id, _creating) = self.ns.create_record(Kind::Link, |id| {
            let mut r = rec.clone();
            r.id = id;
            serde_json::to_vec(&r).unwrap_or_default()
        })?;
        if let Err(e) = self.attach_prog(ifindex, prog_id, flags, id, None) {
            self.ns.remove_record(Kind::Link, id);
            return Err(e);
        }
        self.new_fd(Obj::Link(id))
    }

    fn link_update(&self, raw: &[u8], cmd: &Command) -> Result<i64, Errno> {
        let (link_fd, new_fd, flags, old_fd) =
            (word(raw, 0), word(raw, 4), word(raw, 8), word(raw, 12));
        let id = match self.obj(link_fd) {
            Some(Obj::Link(id)) => id,
            Some(_) => return Err(Errno::EINVAL),
            None => return self.kernel.execute(cmd),
        };
        if flags & !BPF_F_REPLACE != 0 {
            return Err(Errno::EINVAL);
        }
        let mut rec = self.link_record(id)?;
        if rec.is_freplace() || rec.is_probe() {
            // The kernel's tracing, perf and uprobe-multi links have no
            // update_prog.
            return Err(Errno::EINVAL);
        }
        let new_id = self.xdp_prog(new_fd).ok_or(Errno::EBADF)??;
        if flags & BPF_F_REPLACE != 0 {
            let old = self.xdp_prog(old_fd).ok_or(Errno::EBADF)??;
            if old != rec.prog_id {
                return Err(Errno::EPERM);
            }
        } else if old_fd != 0 {
            return Err(Errno::EINVAL);
        }
        if rec.ifindex == 0 {
            return Err(Errno(ENOLINK));
        }
        let old = rec.prog_id;
        let current = self.ns.attachment(rec.ifindex);
        self.attach_prog(rec.ifindex, new_id, rec.flags, id, current)?;
        rec.prog_id = new_id;
        self.write_link(&rec)?;
        if old != new_id {
            self.release(ObjRef::Prog(old));
        }
        Ok(0)
    }

    fn link_detach(&self, raw: &[u8], cmd: &Command) -> Result<i64, Errno> {
        let id = match self.obj(word(raw, 0)) {
            Some(Obj::Link(id)) => id,
            Some(_) => return Err(Errno::EINVAL),
            None => return self.kernel.execute(cmd),
        };
        let mut rec = self.link_record(id)?;
        if rec.is_freplace() {
            return self.freplace_link_detach(rec);
        }
        if rec.is_probe() {
            // The kernel's perf, raw tracepoint and uprobe-multi links
            // have no detach.
            return Err(Errno::EOPNOTSUPP);
        }
        if rec.ifindex == 0 {
            return Err(Errno(ENOLINK));
        }
        self.detach_link(&rec);
        rec.ifindex = 0;
        self.write_link(&rec)?;
        Ok(0)
    }

    fn detach_link(&self, rec: &LinkRecord) {
        if let Some(a) = self.ns.attachment(rec.ifindex) {
            if a.link_id == rec.id {
                attach::undeploy(&self.ns, rec.ifindex);
            }
        }
    }

    /// The link's last reference is gone: detach, free the record, let go
    /// of the program.
    pub(crate) fn release_link(&self, id: u32) {
        let Ok(rec) = self.link_record(id) else {
            return;
        };
        if rec.is_freplace() {
            self.release_freplace_link(rec);
            return;
        }
        if rec.ifindex != 0 {
            self.detach_link(&rec);
        }
        self.ns.remove_record(Kind::Link, id);
        if rec.is_probe() {
            // The traced processes running it check their links now.
            let _ = bpfjet_runtime::tracing::bump_link_generation(
                &crate::probe_links::links_generation(&self.ns),
            );
        }
        self.release(ObjRef::Prog(rec.prog_id));
    }

    /// Whether a link (attached or detached) holds program `id`, as its
    /// program or (an attached freplace link) its target.
    pub(crate) fn prog_linked(&self, id: u32) -> bool {
        self.ns.ids(Kind::Link).into_iter().any(|l| {
            self.link_record(l)
                .is_ok_and(|r| r.prog_id == id || (r.target_prog_id == id && !r.detached))
        })
    }

    /// `struct bpf_link_info` of an XDP or freplace link.
    /// `user`: the info as the caller passed it (buffers a probe link's
    /// names are copied into).
    pub(crate) fn link_info(&self, id: u32, user: &[u8]) -> Result<(Vec<u8>, usize), Errno> {
        let rec = self.link_record(id)?;
        if rec.is_freplace() {
            return Ok(crate::freplace::link_info(&rec, LINK_INFO_SIZE));
        }
        if let Some(probe) = &rec.probe {
            return crate::probe_links::link_info(&rec, probe, LINK_INFO_SIZE, user);
        }
        if let Some(multi) = &rec.uprobe_multi {
            return crate::uprobe_multi::link_info(
                rec.id,
                rec.prog_id,
                multi,
                LINK_INFO_SIZE,
                user,
            );
        }
        let mut b = vec![0u8; LINK_INFO_SIZE];
        b[0..4].copy_from_slice(&BPF_LINK_TYPE_XDP.to_ne_bytes());
        b[4..8].copy_from_slice(&id.to_ne_bytes());
        b[8..12].copy_from_slice(&rec.prog_id.to_ne_bytes());
        b[16..20].copy_from_slice(&rec.ifindex.to_ne_bytes());
        Ok((b, LINK_INFO_SIZE))
    }
}
