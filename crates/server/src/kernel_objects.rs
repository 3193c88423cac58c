//! Objects bpfjet leaves to the kernel under `bpfjet exec`: programs of
//! types bpfjet does not run (a `tc`, cgroup or socket program beside an
//! XDP program in one object) and maps of types bpfjet has no
//! implementation of (sockmap, socket and cgroup storage, struct_ops).
//!
//! The kernel can only follow kernel objects, so what such a command names
//! is translated first: a BTF object bpfjet loaded (libbpf loads one BTF per
//! object and passes it with every program and map) is loaded into the
//! kernel as well, once, and its kernel fd goes in the command. A bpfjet map
//! cannot be translated — the kernel cannot reach bpfjet's memory — so a
//! kernel program naming one is refused with the map's name.
//!
//! Which program types the kernel has is the kernel's to say: a probe load
//! (`r0 = 0; exit`) with the command's type, attach type and flags, cached
//! per process, answers for programs bpfjet loads without running them
//! (libbpf's feature probes with a global-data map).

use crate::backend::BpfjetBackend;
use crate::objects::Obj;
use crate::progs::{self, Refusal, PSEUDO_MAP_FD, PSEUDO_MAP_VALUE};
use crate::user;
use bpfjet_sys::{Backend, BtfLoad, Command, Errno, MapCreate, ProgLoad};
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

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
        let b = match self.obj(fd) {
            Some(Obj::Btf(b)) if fd != 0 => b,
            Some(_) if fd != 0 => return Err(Errno::EINVAL),
            _ => return Ok(fd),
        };
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

    /// `BPF_PROG_LOAD` of a program the kernel runs: its BTF translated,
    /// refused (`EINVAL`, the map named in the log) when it names a bpfjet
    /// map.
    pub(crate) fn kernel_prog_load(&self, p: &ProgLoad, words: &[u64]) -> Result<i64, Errno> {
        for (pc, fd) in map_ref_fds(p, words)? {
            if let Some(Obj::Map(m)) = self.obj(fd) {
                self.warn_once(
                    &format!("BPF_PROG_LOAD of program type {}", p.prog_type),
                    "the kernel runs programs of this type, and it cannot reach bpfjet's maps",
                );
                return self.refuse(
                    p,
                    Refusal::new(
                        Errno::EINVAL,
                        format!(
                            "insn {pc}: map '{}' (fd {fd}) is a bpfjet map; a program of type {} \
                             runs in the kernel, which cannot use it",
                            m.map.name(),
                            p.prog_type
                        ),
                    ),
                );
            }
        }
        let mut k = p.clone();
        k.prog_btf_fd = self.kernel_btf_fd(p.prog_btf_fd)?;
        let r = self.kernel.execute(&Command::ProgLoad(k.clone()));
        p.log_true_size.set(k.log_true_size.get());
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
