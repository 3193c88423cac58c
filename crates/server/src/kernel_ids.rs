//! The kernel objects the instance's processes make under `bpfjet exec`
//! (programs of types bpfjet does not run, maps it lacks or moved, their
//! links, `kernel_objects.rs`), registered in the instance by their kernel
//! ids and listed with the instance's own by `*_GET_NEXT_ID`, so `bpftool
//! prog show`, `map show` and `struct_ops list`/`unregister` under exec
//! see them as on the kernel. A kernel id that a bpfjet object of the
//! instance also has is not listed (bpfjet's object answers for it); ids
//! of kernel objects that are gone are dropped as a listing meets them.

use crate::backend::BpfjetBackend;
use crate::namespace::Kind;
use bpfjet_sys::{Backend, Command, Errno, IdKind, KernelBackend};

/// The kernel id of the object behind kernel fd `fd` (the `id` of its
/// `bpf_{prog,map,link}_info`, at byte 4 of each).
fn kernel_id(fd: i32) -> Option<u32> {
    let mut info = [0u8; 8];
    let mut attr = [0u8; 16];
    attr[0..4].copy_from_slice(&(fd as u32).to_ne_bytes());
    attr[4..8].copy_from_slice(&(info.len() as u32).to_ne_bytes());
    attr[8..16].copy_from_slice(&(info.as_mut_ptr() as u64).to_ne_bytes());
    const BPF_OBJ_GET_INFO_BY_FD: u32 = 15;
    // SAFETY: the attr names `info`, which lives across the call.
    unsafe { KernelBackend::raw(BPF_OBJ_GET_INFO_BY_FD, &mut attr) }.ok()?;
    Some(u32::from_ne_bytes(info[4..8].try_into().unwrap()))
}

fn id_kind(kind: Kind) -> Option<IdKind> {
    match kind {
        Kind::Map => Some(IdKind::Map),
        Kind::Prog => Some(IdKind::Prog),
        Kind::Link => Some(IdKind::Link),
        Kind::Btf => None,
    }
}

impl BpfjetBackend {
    /// Register the kernel object behind kernel fd `fd` (a `bpf()` result
    /// of a kernel program, map or link this process made) in the
    /// instance, unless a bpfjet object of the instance has its id.
    pub(crate) fn register_kernel_object(&self, kind: Kind, fd: i64) {
        let Some(id) = kernel_id(fd as i32) else {
            return;
        };
        if !self.ns.ids(kind).contains(&id) {
            self.ns.register_kernel_id(kind, id);
        }
    }

    /// The next registered kernel object of `kind` after `start` that the
    /// kernel still has (those gone are dropped), and is not shadowed by a
    /// bpfjet object of the same id.
    pub(crate) fn next_kernel_id(&self, kind: Kind, start: u32) -> Option<u32> {
        let ik = id_kind(kind)?;
        let ours = self.ns.ids(kind);
        for id in self
            .ns
            .kernel_ids(kind)
            .into_iter()
            .filter(|&id| id > start)
        {
            if ours.contains(&id) {
                continue;
            }
            if self.kernel_has(ik, id) {
                return Some(id);
            }
            self.ns.forget_kernel_id(kind, id);
        }
        None
    }

    /// Whether the kernel still has object `id` of kind `ik`.
    fn kernel_has(&self, ik: IdKind, id: u32) -> bool {
        let g = bpfjet_sys::GetFdById {
            kind: ik,
            id,
            open_flags: 0,
        };
        match self.kernel.execute(&Command::GetFdById(g)) {
            Ok(fd) => {
                // SAFETY: the fd the probe just opened.
                unsafe { libc::close(fd as i32) };
                true
            }
            Err(e) => e != Errno::ENOENT,
        }
    }

    /// Whether `id` is a registered kernel object of `kind` (and no bpfjet
    /// object of the instance has it): its `*_GET_FD_BY_ID` is the kernel's.
    pub(crate) fn is_kernel_id(&self, kind: Kind, id: u32) -> bool {
        self.ns.kernel_ids(kind).contains(&id) && !self.ns.ids(kind).contains(&id)
    }
}
