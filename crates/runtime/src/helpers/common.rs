//! Plumbing shared by the kernel helpers: the per-run environment, map
//! arguments, errno conversion.

use crate::env::{ObjectMaps, RunEnv, XdpEnv};
use crate::errno;
use crate::error::Fault;
use crate::helper_ctx::HelperCtx;
use crate::region::Region;
use bpfjet_maps::spec::flags as map_flags;
use bpfjet_maps::{Map, MapError, MapType};
use std::sync::Arc;

/// The run environment of the helper's program, whatever its type.
pub(crate) fn env<'a>(ctx: &'a mut HelperCtx<'_>) -> Result<&'a mut RunEnv, Fault> {
    // The fault (a String) is built only on the error path: this runs on
    // every helper call.
    let (pc, helper) = (ctx.pc(), ctx.helper_name());
    crate::env::run_env(ctx.user()).ok_or_else(|| Fault::Helper {
        pc,
        helper,
        reason: "the per-run context has no run environment (RunEnv)".into(),
    })
}

/// The XDP context of an XDP helper's program.
pub(crate) fn xdp_env<'a>(ctx: &'a mut HelperCtx<'_>) -> Result<&'a mut XdpEnv, Fault> {
    ctx.user_ctx::<XdpEnv>()
}

/// The map a program passed as a helper argument. A value that is no map
/// handle is what the kernel verifier rules out, so it aborts the run.
///
/// No reference count is taken and no lock is held (this runs on every map
/// helper call): the map is borrowed from the run's [`ObjectMaps`], which
/// the run environment keeps alive for the whole run and which never
/// forgets a map it handed out ([`ObjectMaps::resolve_ref`]). The borrow
/// must not outlive the helper call.
pub(crate) fn map_arg<'m>(ctx: &mut HelperCtx<'_>, handle: u64) -> Result<&'m Map, Fault> {
    let maps: *const ObjectMaps = Arc::as_ptr(&env(ctx)?.maps);
    // SAFETY: the run environment holds an `Arc` of these maps for the
    // whole run, helpers never replace it, and the helper that asked uses
    // the map only during its call.
    let resolved = unsafe { (*maps).resolve_ref(handle) };
    resolved.ok_or_else(|| ctx.fault(format!("{handle:#x} is not a map")))
}

/// `-errno` for a map failure, as the kernel's helper returns it.
pub(crate) fn map_errno(e: &MapError) -> u64 {
    errno::neg(e.errno() as u64)
}

pub(crate) fn result_code(r: Result<(), MapError>) -> u64 {
    match r {
        Ok(()) => 0,
        Err(e) => map_errno(&e),
    }
}

/// Whether programs may write the values of `map` (`BPF_F_RDONLY_PROG`, as
/// `.rodata` has, and the device/CPU maps whose lookups the kernel
/// hands out read-only).
pub(crate) fn program_writable(map: &Map) -> bool {
    map.spec().flags & map_flags::RDONLY_PROG == 0
        && !matches!(
            map.map_type(),
            MapType::Devmap | MapType::DevmapHash | MapType::Cpumap | MapType::Xskmap
        )
}

/// The region a value pointer handed to the program covers.
pub(crate) fn value_region(map: &Map, ptr: *mut u8) -> Region {
    let len = u64::from(map.value_size());
    if program_writable(map) {
        Region::writable(ptr as u64, len)
    } else {
        Region::read_only(ptr as u64, len)
    }
}

/// The kernel's `check_map_func_compatibility` for the helpers bpfjet
/// implements: a call it would refuse at load time aborts the run here.
pub(crate) fn require_map_use(
    ctx: &HelperCtx<'_>,
    map: &Map,
    helper: &str,
    allowed: &[MapType],
) -> Result<(), Fault> {
    check_map_use(map, helper, allowed).map_err(|reason| ctx.fault(reason))
}

/// Whether helper `bpf_<helper>` may take `map` (one of `allowed`): the
/// kernel verifier refuses the others at load time, so a run that reaches
/// one (an unverified program, a map-in-map slot) aborts with this reason.
/// Shared with the JIT's direct natives.
pub fn check_map_use(map: &Map, helper: &str, allowed: &[MapType]) -> Result<(), String> {
    if allowed.contains(&map.map_type()) {
        Ok(())
    } else {
        Err(format!(
            "bpf_{helper} cannot be used with a {} map (the kernel verifier rejects it)",
            map.map_type()
        ))
    }
}

/// The map types each map helper accepts, as the kernel's verifier
/// (`check_map_func_compatibility`) has them.
pub mod map_use {
    use bpfjet_maps::MapType::{self, *};

    /// `bpf_map_lookup_elem`: the keyed maps, map-in-maps (the inner map
    /// comes back) and the redirect maps.
    pub const LOOKUP: &[MapType] = &[
        Hash,
        Array,
        PercpuHash,
        PercpuArray,
        LruHash,
        LruPercpuHash,
        LpmTrie,
        ArrayOfMaps,
        HashOfMaps,
        Devmap,
        DevmapHash,
        Cpumap,
        Xskmap,
    ];
    /// `bpf_map_update_elem` / `bpf_map_delete_elem`: maps of plain elements.
    pub const KEYED: &[MapType] = &[
        Hash,
        Array,
        PercpuHash,
        PercpuArray,
        LruHash,
        LruPercpuHash,
        LpmTrie,
    ];
    /// `bpf_redirect_map`.
    pub const REDIRECT: &[MapType] = &[Devmap, DevmapHash, Xskmap, Cpumap];
}

/// A key argument: `key_size` bytes of program memory, copied.
pub(crate) fn read_key(ctx: &HelperCtx<'_>, map: &Map, addr: u64) -> Result<ArgBytes, Fault> {
    Ok(ArgBytes::copy(
        ctx.read_mem(addr, u64::from(map.key_size()))?,
    ))
}

/// Bytes copied out of program memory for a helper (a key, a value): on
/// the stack up to [`ArgBytes::INLINE`] bytes, so that a map helper call
/// does not allocate; larger ones on the heap. Not allocating matters
/// beyond speed: a tracing program may run in a signal handler that
/// interrupted libc's allocator (system calls traced through Syscall User
/// Dispatch), where an allocation could wait on the lock its own thread
/// holds. The copy (rather than a slice of program memory) keeps a value
/// that points into the map's own element apart from the element the
/// update writes.
// The large variant is the point: the bytes live in the helper's frame.
#[allow(clippy::large_enum_variant)]
pub(crate) enum ArgBytes {
    Inline {
        len: u16,
        /// The first `len` bytes are initialised; the rest are never read
        /// (no zeroing of the whole buffer on every call).
        bytes: [std::mem::MaybeUninit<u8>; ArgBytes::INLINE],
    },
    Heap(Vec<u8>),
}

impl ArgBytes {
    pub(crate) const INLINE: usize = 512;

    pub(crate) fn copy(src: &[u8]) -> ArgBytes {
        if src.len() <= Self::INLINE {
            let mut bytes = [std::mem::MaybeUninit::uninit(); Self::INLINE];
            // SAFETY: `src.len()` bytes fit in the buffer; the two do not
            // overlap (the buffer is a new local).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    src.as_ptr(),
                    bytes.as_mut_ptr().cast::<u8>(),
                    src.len(),
                )
            };
            ArgBytes::Inline {
                len: src.len() as u16,
                bytes,
            }
        } else {
            ArgBytes::Heap(src.to_vec())
        }
    }
}

impl std::ops::Deref for ArgBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            // SAFETY: the first `len` bytes were initialised by `copy`.
            ArgBytes::Inline { len, bytes } => unsafe {
                std::slice::from_raw_parts(bytes.as_ptr().cast::<u8>(), usize::from(*len))
            },
            ArgBytes::Heap(v) => v,
        }
    }
}
