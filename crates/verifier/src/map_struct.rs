//! Reads of the kernel's map struct through a map pointer (`r1 = map;
//! r0 = *(u32 *)(r1 + off)`), as the kernel's `check_ptr_to_map_access`
//! and `btf_struct_walk` allow them to a CAP_PERFMON loader, and the layout
//! of the block bpfjet's runtime puts behind a map pointer so that such
//! reads find what they would find in the kernel.
//!
//! The struct is the map type's own (`map_btf_id` of its `bpf_map_ops`):
//! `struct bpf_array`, `struct bpf_htab`, ..., each with `struct bpf_map`
//! as its first member. Types and offsets come from the running kernel's
//! BTF (`/sys/kernel/btf/vmlinux`); without it the kernel refuses such
//! reads and so does bpfjet.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use bpfjet_maps::{MapSpec, MapType, KERNEL_VIEW_BYTES};
use bpfjet_obj::{Btf, BtfType, TargetBtf};

/// The kernel struct of a map type (`map_btf_id` in the type's ops).
pub fn struct_name(map_type: MapType) -> &'static str {
    use MapType::*;
    match map_type {
        Array | PercpuArray | ProgArray | PerfEventArray | ArrayOfMaps | CgroupArray => "bpf_array",
        Hash | PercpuHash | LruHash | LruPercpuHash | HashOfMaps => "bpf_htab",
        StackTrace => "bpf_stack_map",
        LpmTrie => "lpm_trie",
        Devmap | DevmapHash => "bpf_dtab",
        Cpumap => "bpf_cpu_map",
        Xskmap => "xsk_map",
        Queue | Stack => "bpf_queue_stack",
        Ringbuf | UserRingbuf => "bpf_ringbuf_map",
        BloomFilter => "bpf_bloom_filter",
    }
}

/// What a read through a map pointer loads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MapField {
    /// An integer member (or bytes of an integer array): a scalar.
    Scalar,
    /// A pointer member: the kernel gives a `PTR_TO_BTF_ID` to the pointee.
    Pointer { member: String },
}

/// The running kernel's BTF with the ids of the map structs.
struct Kernel {
    btf: Arc<TargetBtf>,
    structs: HashMap<&'static str, u32>,
}

const STRUCTS: &[&str] = &[
    "bpf_map",
    "bpf_array",
    "bpf_htab",
    "bpf_stack_map",
    "lpm_trie",
    "bpf_dtab",
    "bpf_cpu_map",
    "xsk_map",
    "bpf_queue_stack",
    "bpf_ringbuf_map",
    "bpf_bloom_filter",
];

fn kernel() -> Result<&'static Kernel, String> {
    static KERNEL: OnceLock<Result<Kernel, String>> = OnceLock::new();
    KERNEL
        .get_or_init(|| {
            let btf = TargetBtf::running_kernel()?;
            let mut structs = HashMap::new();
            for (id, ty) in btf.btf().types().iter().enumerate() {
                if let BtfType::Struct { name, .. } = ty {
                    if let Some(&n) = STRUCTS.iter().find(|&&n| n == name) {
                        structs.entry(n).or_insert(id as u32);
                    }
                }
            }
            Ok(Kernel { btf, structs })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Why a read is refused, with the kernel's words.
pub type Refusal = String;

/// Check a read of `size` bytes at `off` of the map struct of `map_type`,
/// as `check_ptr_to_map_access` (the privilege check is the caller's).
pub fn check_read(map_type: MapType, off: i64, size: u32) -> Result<MapField, Refusal> {
    let tname = struct_name(map_type);
    let k = kernel()
        .map_err(|e| format!("map_ptr access not supported without CONFIG_DEBUG_INFO_BTF ({e})"))?;
    let id = *k
        .structs
        .get(tname)
        .ok_or_else(|| format!("map_ptr access not supported: no struct {tname} in vmlinux BTF"))?;
    if off < 0 {
        return Err(format!("invalid negative access: off={off}"));
    }
    let btf = k.btf.btf();
    let field = walk(btf, id, off as u64, u64::from(size))?;
    let end = off as u64 + u64::from(size);
    if end > KERNEL_VIEW_BYTES as u64 {
        return Err(format!(
            "bpfjet's view of struct {tname} holds {KERNEL_VIEW_BYTES} bytes, the read ends at {end}"
        ));
    }
    Ok(field)
}

fn members(t: &BtfType) -> Option<(&str, u32, &[bpfjet_obj::Member])> {
    match t {
        BtfType::Struct {
            name,
            size,
            members,
        }
        | BtfType::Union {
            name,
            size,
            members,
        } => Some((name, *size, members)),
        _ => None,
    }
}

/// The kernel's `btf_struct_walk` + `btf_struct_access` loop for a read:
/// which member `[off, off + size)` falls in.
fn walk(btf: &Btf, mut id: u32, mut off: u64, size: u64) -> Result<MapField, Refusal> {
    for _ in 0..64 {
        let t = btf
            .resolve(id)
            .and_then(|r| btf.type_by_id(r))
            .ok_or("bad BTF type")?;
        let (tname, tsize, members) =
            members(t).ok_or_else(|| format!("Type '{}' is not a struct", t.name()))?;
        let tname = if tname.is_empty() { "(anon)" } else { tname };
        if off + size > u64::from(tsize) {
            // (A flexible array member at the end relaxes this in the
            // kernel; no map struct ends with one.)
            return Err(format!(
                "access beyond struct {tname} at off {off} size {size}"
            ));
        }
        let mut next = None;
        for m in members {
            let moff = u64::from(m.bit_offset / 8);
            if off + size <= moff {
                break;
            }
            if m.bitfield_size != 0 {
                let end_bit = u64::from(m.bit_offset + m.bitfield_size);
                if off <= moff && end_bit.div_ceil(8) <= off + size {
                    return Ok(MapField::Scalar);
                }
                continue;
            }
            if off < moff {
                break;
            }
            let msize = btf
                .size_of(m.type_id)
                .ok_or_else(|| format!("field {} doesn't have size", m.name))?;
            let mtrue_end = moff + msize;
            if off >= mtrue_end {
                continue;
            }
            // Arrays (multi-dimensional ones linearised) act as their
            // element at the index `off` falls in.
            let (mut mtype, mut moff, mut msize) = (m.type_id, moff, msize);
            let mut resolved = btf.resolve(mtype).ok_or("bad BTF type")?;
            while let Some(BtfType::Array { elem, .. }) = btf.type_by_id(resolved) {
                if msize == 0 {
                    break;
                }
                let esize = btf.size_of(*elem).ok_or("bad BTF array")?;
                if esize == 0 {
                    break;
                }
                moff += (off - moff) / esize * esize;
                msize = esize;
                mtype = *elem;
                resolved = btf.resolve(mtype).ok_or("bad BTF type")?;
            }
            let mt = btf.type_by_id(resolved).ok_or("bad BTF type")?;
            match mt {
                // The field is inside this struct or union (at its start:
                // the kernel's WALK_STRUCT, which dives in at offset 0).
                BtfType::Struct { .. } | BtfType::Union { .. } => {
                    next = Some((resolved, off - moff));
                }
                BtfType::Ptr { .. } => {
                    if msize != size || off != moff {
                        return Err(format!(
                            "cannot access ptr member {} with moff {moff} in struct {tname} with off {off} size {size}",
                            m.name
                        ));
                    }
                    return Ok(MapField::Pointer {
                        member: m.name.clone(),
                    });
                }
                _ => {
                    if off + size > mtrue_end {
                        return Err(format!(
                            "access beyond the end of member {} (mend:{mtrue_end}) in struct {tname} with off {off} size {size}",
                            m.name
                        ));
                    }
                    return Ok(MapField::Scalar);
                }
            }
            break;
        }
        match next {
            Some((nid, noff)) => {
                id = nid;
                off = noff;
            }
            None => return Err(format!("struct {tname} doesn't have field at offset {off}")),
        }
    }
    Err("BTF nesting too deep".into())
}

/// The byte offset and size of member `path` (`"map.key_size"`) of struct
/// `id`.
fn member_at(btf: &Btf, mut id: u32, path: &str) -> Option<(usize, usize)> {
    let mut base = 0usize;
    let mut parts = path.split('.').peekable();
    while let Some(part) = parts.next() {
        let (_, _, members) = members(btf.type_by_id(btf.resolve(id)?)?)?;
        let m = members.iter().find(|m| m.name == part)?;
        if m.bitfield_size != 0 {
            return None;
        }
        base += (m.bit_offset / 8) as usize;
        if parts.peek().is_none() {
            return Some((base, btf.size_of(m.type_id)? as usize));
        }
        id = m.type_id;
    }
    None
}

/// Write `value`'s low `size` bytes at `path` of the struct, if the kernel
/// has that member with that size.
fn put(btf: &Btf, id: u32, view: &mut [u8], path: &str, value: u64, size: usize) {
    if let Some((off, len)) = member_at(btf, id, path) {
        if len == size && off + size <= view.len() {
            view[off..off + size].copy_from_slice(&value.to_ne_bytes()[..size]);
        }
    }
}

/// `NUMA_NO_NODE`: a map created without `BPF_F_NUMA_NODE`.
const NUMA_NO_NODE: i32 = -1;
const BPF_F_NUMA_NODE: u32 = 1 << 2;

/// Lay out the block a program reads through the pointer of map `spec`
/// (bpfjet id `id`) as the kernel's struct for its type: the `struct
/// bpf_map` members that mean something in bpfjet (type, sizes, entries,
/// flags, `map_extra`, id, name, NUMA node) and the array's `elem_size` and
/// `index_mask` or the hash table's `n_buckets`, as the kernel computes
/// them. Kernel-internal members (pointers, locks, counters) stay zero.
/// Without kernel BTF the block stays zero (the verifier then refuses
/// every read of it).
pub fn fill_kernel_view(spec: &MapSpec, id: u32, view: &mut [u8]) {
    let Ok(k) = kernel() else { return };
    let Some(&sid) = k.structs.get(struct_name(spec.map_type)) else {
        return;
    };
    let btf = k.btf.btf();
    // The struct's `struct bpf_map` member (first, named `map`) or the
    // struct itself when a type's ops name `bpf_map`.
    let m = if member_at(btf, sid, "map").is_some() {
        "map."
    } else {
        ""
    };
    let f = |view: &mut [u8], name: &str, v: u64, size: usize| {
        put(btf, sid, view, &format!("{m}{name}"), v, size)
    };
    f(view, "map_type", spec.map_type as u64, 4);
    f(view, "key_size", u64::from(spec.key_size), 4);
    f(view, "value_size", u64::from(spec.value_size), 4);
    f(view, "max_entries", u64::from(spec.max_entries), 4);
    f(view, "map_extra", spec.map_extra, 8);
    f(view, "map_flags", u64::from(spec.flags), 4);
    f(view, "id", u64::from(id), 4);
    if spec.flags & BPF_F_NUMA_NODE == 0 {
        f(view, "numa_node", NUMA_NO_NODE as u32 as u64, 4);
    }
    // A CAP_PERFMON loader: the kernel skips the Spectre v1 masking.
    f(view, "bypass_spec_v1", 1, 1);
    if let Some((off, len)) = member_at(btf, sid, &format!("{m}name")) {
        // BPF_OBJ_NAME_LEN bytes, NUL-terminated.
        let name = spec.name.as_bytes();
        let n = name.len().min(len.saturating_sub(1));
        if off + len <= view.len() {
            view[off..off + n].copy_from_slice(&name[..n]);
        }
    }
    match spec.map_type {
        MapType::Array
        | MapType::PercpuArray
        | MapType::ProgArray
        | MapType::PerfEventArray
        | MapType::ArrayOfMaps
        | MapType::CgroupArray => {
            // array_map_alloc: elem_size rounds the value to 8 bytes (a
            // pointer for the fd arrays); index_mask is the power of two
            // above max_entries, minus one.
            let elem = match spec.map_type {
                MapType::Array | MapType::PercpuArray => u64::from(spec.value_size).div_ceil(8) * 8,
                _ => 8,
            };
            put(btf, sid, view, "elem_size", elem, 4);
            let mask = u64::from(spec.max_entries.max(1)).next_power_of_two() - 1;
            put(btf, sid, view, "index_mask", mask, 4);
        }
        MapType::Hash
        | MapType::PercpuHash
        | MapType::LruHash
        | MapType::LruPercpuHash
        | MapType::HashOfMaps => {
            let buckets = u64::from(spec.max_entries.max(1)).next_power_of_two();
            put(btf, sid, view, "n_buckets", buckets, 4);
        }
        _ => {}
    }
}
