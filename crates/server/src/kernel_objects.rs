//! Objects bpfjet leaves to the kernel under `bpfjet exec`: programs of
//! types bpfjet does not run (a `tc`, cgroup or socket program beside an
//! XDP program in one object) and maps of types bpfjet has no
//! implementation of (sockmap, socket and cgroup storage, struct_ops).
//!
//! The kernel can only follow kernel objects, so what such a command names
//! is translated first: a BTF object bpfjet loaded (libbpf loads one BTF per
//! object and passes it with every program and map) is loaded into the
//! kernel as well, once, and its kernel fd goes in the command. A bpfjet map
//! cannot be shared — the kernel cannot reach bpfjet's memory — but one no
//! bpfjet program uses can move: a kernel program's load moves the bpfjet
//! maps it names to the kernel (its contents copied into a kernel map of
//! the same definition, then every fd of this process on it made an fd of
//! the kernel's map in place, so the fd numbers the loader holds stay
//! valid; the loader's mappings of the values and the map's bpffs pins
//! follow too). That is what an object whose tc or cgroup programs keep
//! their own maps needs (Katran's healthchecker). A map that cannot move —
//! a bpfjet program names it, a map-in-map holds it, it is pinned outside
//! bpffs, it is a mapped ring buffer, it holds fds or program ids
//! (PROG_ARRAY, perf event array, devmaps), or a queue or stack holds
//! elements — is named in the refusal of the kernel program, unless
//! nothing can change it any more (frozen and read-only for programs:
//! libbpf's `.rodata`, which an XDP and a tc program of one object both
//! read): then the kernel program gets a kernel copy of it, which no
//! reader can tell from the original.
//!
//! How maps move or are copied is `map_moves.rs`; how the kernel objects
//! made this way are listed with the instance's own is `kernel_ids.rs`.
//!
//! Which program types the kernel has is the kernel's to say: a probe load
//! (`r0 = 0; exit`) with the command's type, attach type and flags, cached
//! per process, answers for programs bpfjet loads without running them
//! (libbpf's feature probes with a global-data map).

use crate::backend::BpfjetBackend;
use crate::map_moves::Mapping;
use crate::namespace::Kind;
use crate::objects::{BtfObj, MapObj, Obj};
use crate::progs::{self, Refusal, PSEUDO_MAP_FD, PSEUDO_MAP_VALUE};
use crate::user;
use bpfjet_sys::{Backend, BtfLoad, Command, Errno, KernelBackend, MapCreate, ProgLoad};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

/// A bpfjet map a kernel program names that cannot move to the kernel:
/// the instruction, the fd, the map and why.
pub(crate) type Unmovable = (usize, u32, Arc<MapObj>, String);

/// How a bpfjet map a kernel program names reaches the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transfer {
    /// The map moves (`map_moves.rs`).
    Move,
    /// Immutable and used by bpfjet programs: the kernel program gets a
    /// kernel copy.
    Copy,
}

/// For each bpfjet map a kernel program names, its instruction, its fd and how it
/// reaches the kernel; or the first that cannot. Decided for all before
/// anything moves.
pub(crate) type KernelPlan = Result<Vec<(usize, u32, Arc<MapObj>, Transfer)>, Unmovable>;

/// A kind of program: (program type, expected attach type, flags).
type ProgKind = (u32, u32, u32);

/// The kernel's side of a process's bpfjet objects.
#[derive(Default)]
pub struct KernelSide {
    /// bpfjet BTF id → the kernel fd of the same BTF, loaded on first use
    /// and kept for the process's life (the kernel's programs and maps hold
    /// their own references).
    btf: Mutex<HashMap<u32, i32>>,
    /// (program type, expected attach type, flags) → the kernel's answer to
    /// a probe load of that kind.
    prog_kinds: Mutex<HashMap<ProgKind, Result<(), Errno>>>,
    /// Where this process mapped bpfjet arrays' values (global data), by
    /// map id: a move maps the kernel map's values at the same places.
    pub(crate) arrays_mapped: Mutex<HashMap<u32, Vec<Mapping>>>,
    /// Ring buffers this process mapped: they stay bpfjet's (their pages
    /// are shared with the consumer's own bookkeeping).
    pub(crate) rings_mapped: Mutex<HashSet<u32>>,
    /// bpfjet map id → the kernel fd of its copy, for immutable maps
    /// (frozen, read-only for programs: `.rodata`) that bpfjet programs
    /// use too: kernel programs read the copy, which cannot diverge.
    pub(crate) copies: Mutex<HashMap<u32, i32>>,
}

/// The map fd each map reference of `words` names (`lddw` with a map fd,
/// or an index into `fd_array`), with its instruction index.
pub(crate) fn map_ref_fds(p: &ProgLoad, words: &[u64]) -> Result<Vec<(usize, u32)>, Errno> {
    let mut out = Vec::new();
    for (pc, src) in progs::map_lddws(words) {
        let imm = (words[pc] >> 32) as u32;
        let fd = if matches!(src, PSEUDO_MAP_FD | PSEUDO_MAP_VALUE) {
            imm
        } else if p.fd_array == 0 {
            // The kernel's own refusal follows (or bpfjet's, with its log).
            continue;
        } else {
            let raw = user::read(p.fd_array + u64::from(imm) * 4, 4)?;
            u32::from_ne_bytes(raw[..4].try_into().unwrap())
        };
        out.push((pc, fd));
    }
    Ok(out)
}

impl BpfjetBackend {
    /// The kernel fd standing for bpfjet BTF fd `fd` in a command for the
    /// kernel; `fd` itself when it is not bpfjet's (0, or a kernel BTF).
    fn kernel_btf_fd(&self, fd: u32) -> Result<u32, Errno> {
        match self.obj(fd) {
            Some(Obj::Btf(b)) if fd != 0 => self.kernel_btf(&b),
            Some(_) if fd != 0 => Err(Errno::EINVAL),
            _ => Ok(fd),
        }
    }

    /// The kernel's copy of bpfjet BTF object `b`, loaded on first use.
    pub(crate) fn kernel_btf(&self, b: &BtfObj) -> Result<u32, Errno> {
        let mut cache = self
            .kernel_side
            .btf
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(&k) = cache.get(&b.id) {
            return Ok(k as u32);
        }
        let load = Command::BtfLoad(BtfLoad {
            btf: b.raw.as_ptr() as u64,
            btf_size: b.raw.len() as u32,
            ..BtfLoad::default()
        });
        let k = self.kernel.execute(&load).inspect_err(|e| {
            self.note_once(
                &format!("BTF id {} for a kernel program or map", b.id),
                &format!("was refused by the kernel's BPF_BTF_LOAD: {e}"),
            )
        })? as i32;
        cache.insert(b.id, k);
        Ok(k as u32)
    }

    /// `words` and the caller's `fd_array` with each `(pc, kernel fd)` of
    /// `copies` in place of the map the `lddw` at `pc` names (in the
    /// instruction for a map fd, in the array for an index); both empty
    /// without copies.
    fn with_copies(
        &self,
        p: &ProgLoad,
        words: &[u64],
        copies: &[(usize, i32)],
    ) -> Result<(Vec<u64>, Vec<u32>), Errno> {
        if copies.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let srcs: HashMap<usize, u8> = progs::map_lddws(words).into_iter().collect();
        let by_index =
            |pc: usize| !matches!(srcs.get(&pc), Some(&(PSEUDO_MAP_FD | PSEUDO_MAP_VALUE)));
        let mut insns = words.to_vec();
        let mut fd_array: Vec<u32> = Vec::new();
        let max = copies
            .iter()
            .filter(|&&(pc, _)| by_index(pc))
            .map(|&(pc, _)| (words[pc] >> 32) as u32)
            .max();
        if let Some(max) = max {
            fd_array = user::read(p.fd_array, (max as usize + 1) * 4)?
                .chunks(4)
                .map(|c| u32::from_ne_bytes(c.try_into().unwrap()))
                .collect();
        }
        for &(pc, kfd) in copies {
            if by_index(pc) {
                fd_array[(words[pc] >> 32) as usize] = kfd as u32;
            } else {
                insns[pc] = (insns[pc] & 0xffff_ffff) | (u64::from(kfd as u32) << 32);
            }
        }
        Ok((insns, fd_array))
    }

    /// The refusal of a kernel program because bpfjet map `m` (at
    /// instruction `pc`, fd `fd`) cannot move to the kernel, and its
    /// stderr line.
    fn cannot_move(&self, p: &ProgLoad, pc: usize, fd: u32, m: &MapObj, why: &str) -> Refusal {
        self.warn_once(
            &format!("BPF_PROG_LOAD of program type {} with map '{}'", p.prog_type, m.map.name()),
            &format!("the kernel runs programs of this type, and the map cannot move to the kernel: {why}"),
        );
        Refusal::new(
            Errno::EINVAL,
            format!(
                "insn {pc}: map '{}' (fd {fd}) is a bpfjet map; a program of type {} runs in \
                 the kernel, and the map cannot move there: {why}",
                m.map.name(),
                p.prog_type
            ),
        )
    }

    /// How the bpfjet maps `p` names reach the kernel ([`KernelPlan`]).
    pub(crate) fn kernel_plan(&self, p: &ProgLoad, words: &[u64]) -> Result<KernelPlan, Errno> {
        let mut plan = Vec::new();
        for (pc, fd) in map_ref_fds(p, words)? {
            if let Some(Obj::Map(m)) = self.obj(fd) {
                match self.transfer_of(&m) {
                    Ok(t) => plan.push((pc, fd, m, t)),
                    Err(why) => return Ok(Err((pc, fd, m, why))),
                }
            }
        }
        Ok(Ok(plan))
    }

    /// `BPF_PROG_BIND_MAP` of a kernel program and bpfjet map `map_fd`:
    /// the map moves to the kernel (as for a kernel program naming it),
    /// then the kernel binds it; `EINVAL` and a stderr line when it cannot
    /// move.
    pub(crate) fn kernel_bind_map(&self, map_fd: u32, cmd: &Command) -> Result<i64, Errno> {
        if let Some(Obj::Map(m)) = self.obj(map_fd) {
            let transfer = self.transfer_of(&m);
            if transfer == Ok(Transfer::Copy) {
                // libbpf binds .rodata to every program: a kernel program
                // gets its kernel copy bound, as it reads that copy.
                let kfd = self.kernel_copy(&m).map_err(|_| Errno::EINVAL)?;
                let Command::Other(_, raw) = cmd else {
                    return Err(Errno::EINVAL);
                };
                let mut attr = raw.clone();
                attr[4..8].copy_from_slice(&(kfd as u32).to_ne_bytes());
                const BPF_PROG_BIND_MAP: u32 = 35;
                // SAFETY: the caller's attr with the copy's fd; it names no
                // memory.
                return unsafe { KernelBackend::raw(BPF_PROG_BIND_MAP, &mut attr) };
            }
            if let Err(why) = transfer.and_then(|_| self.move_map(&m)) {
                self.warn_once(
                    &format!(
                        "BPF_PROG_BIND_MAP of a kernel program and map '{}'",
                        m.map.name()
                    ),
                    &format!("the map cannot move to the kernel: {why}"),
                );
                return Err(Errno::EINVAL);
            }
        }
        self.kernel.execute(cmd)
    }

    /// `BPF_PROG_LOAD` of a program the kernel runs: its BTF translated,
    /// refused (`EINVAL`, the map named in the log) when it names a bpfjet
    /// map.
    pub(crate) fn kernel_prog_load(&self, p: &ProgLoad, words: &[u64]) -> Result<i64, Errno> {
        let plan = self.kernel_plan(p, words)?;
        self.kernel_prog_load_planned(p, words, plan)
    }

    /// [`Self::kernel_prog_load`] with the maps' plan already made.
    pub(crate) fn kernel_prog_load_planned(
        &self,
        p: &ProgLoad,
        words: &[u64],
        plan: KernelPlan,
    ) -> Result<i64, Errno> {
        let plan = match plan {
            Ok(plan) => plan,
            Err((pc, fd, m, why)) => return self.refuse(p, self.cannot_move(p, pc, fd, &m, &why)),
        };
        // Maps that move; immutable ones bpfjet programs keep are copied,
        // and the program is given the copy's fd instead.
        let mut copies: Vec<(usize, i32)> = Vec::new();
        for (pc, fd, m, transfer) in plan {
            let r = match transfer {
                Transfer::Move => self.move_map(&m),
                Transfer::Copy => self.kernel_copy(&m).map(|kfd| copies.push((pc, kfd))),
            };
            if let Err(why) = r {
                return self.refuse(p, self.cannot_move(p, pc, fd, &m, &why));
            }
        }
        let mut k = p.clone();
        k.prog_btf_fd = self.kernel_btf_fd(p.prog_btf_fd)?;
        // The instructions (and fd_array) with the copies' fds, kept alive
        // across the call.
        let (insns, fd_array) = self.with_copies(p, words, &copies)?;
        if !copies.is_empty() {
            k.insns = insns.as_ptr() as u64;
            if !fd_array.is_empty() {
                k.fd_array = fd_array.as_ptr() as u64;
            }
        }
        let r = self.kernel.execute(&Command::ProgLoad(k.clone()));
        p.log_true_size.set(k.log_true_size.get());
        if let Ok(fd) = r {
            self.register_kernel_object(Kind::Prog, fd);
        }
        r
    }

    /// Whether the kernel loads programs of `p`'s type, attach type and
    /// flags at all: the kernel's errno when it does not.
    pub(crate) fn kernel_has_prog_kind(&self, p: &ProgLoad) -> Result<(), Errno> {
        let kind: ProgKind = (p.prog_type, p.expected_attach_type, p.prog_flags);
        let mut cache = self
            .kernel_side
            .prog_kinds
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(r) = cache.get(&kind) {
            return *r;
        }
        // r0 = 0; exit
        let insns: [u64; 2] = [0xb7, 0x95];
        let probe = ProgLoad {
            prog_type: p.prog_type,
            insn_cnt: 2,
            insns: insns.as_ptr() as u64,
            license: p.license,
            kern_version: p.kern_version,
            prog_flags: p.prog_flags,
            expected_attach_type: p.expected_attach_type,
            attach_btf_id: p.attach_btf_id,
            ..ProgLoad::default()
        };
        let r = self.kernel.execute(&Command::ProgLoad(probe)).map(|fd| {
            // SAFETY: the fd the probe load just made, used by nothing.
            unsafe { libc::close(fd as i32) };
        });
        cache.insert(kind, r);
        r
    }

    /// `BPF_MAP_CREATE` of a map type bpfjet has no implementation of: the
    /// kernel's map (its BTF translated), which kernel programs use; bpfjet
    /// programs naming it are refused at load.
    pub(crate) fn kernel_map_create(&self, m: &MapCreate) -> Result<i64, Errno> {
        if m.inner_map_fd != 0 && matches!(self.obj(m.inner_map_fd), Some(Obj::Map(_))) {
            return Err(Errno::EINVAL);
        }
        let mut k = m.clone();
        k.btf_fd = self.kernel_btf_fd(m.btf_fd)?;
        let subject = format!("BPF_MAP_CREATE of map type {}", m.map_type);
        let r = self.kernel.execute(&Command::MapCreate(k));
        if let Ok(fd) = r {
            self.register_kernel_object(Kind::Map, fd);
        }
        match r {
            Ok(_) => self.note_once(
                &subject,
                "goes to the kernel: bpfjet has no such map type, so only kernel programs can use it",
            ),
            Err(e) => self.warn_once(
                &subject,
                &format!("bpfjet has no such map type, and the kernel refused it: {e}"),
            ),
        }
        r
    }
}
