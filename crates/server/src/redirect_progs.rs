//! Programs in DEVMAP, DEVMAP_HASH and CPUMAP entries under `bpf()`.
//!
//! An 8-byte devmap value is `struct bpf_devmap_val { u32 ifindex; union
//! { int fd; u32 id; } bpf_prog; }` and a cpumap value `struct
//! bpf_cpumap_val { u32 qsize; union { int fd; u32 id; } bpf_prog; }`:
//! user space writes a program fd, the kernel keeps the program and a
//! lookup returns its id. bpfjet stores the id, so lookups (from any
//! process of the instance, and `bpfjet map`) read what the kernel's do,
//! and the data plane finds a devmap entry's program by id in the table of
//! the attached program it rebuilt (`tail_calls::runnable`).
//!
//! The kernel's rules (`__dev_map_update_elem`, `__dev_map_alloc_node`,
//! `cpu_map_update_elem`, 6.18), in its order: a program fd counts only
//! when positive; it must name an XDP program loaded for that map kind
//! (expected attach type `BPF_XDP_DEVMAP` / `BPF_XDP_CPUMAP`), compatible
//! with the map's owner (`bpf_prog_map_compatible`: the first entry
//! program sets it; a later one must have the same frags flag). A devmap
//! refuses anything else with `EINVAL` (also a program without an
//! ifindex); a cpumap fails the entry's allocation, `ENOMEM`.

use crate::backend::BpfjetBackend;
use crate::namespace::{Kind, Namespace};
use crate::objects::{MapObj, Obj};
use crate::progs::{BPF_PROG_TYPE_XDP, BPF_XDP_CPUMAP, BPF_XDP_DEVMAP};
use crate::tail_calls::held_ids;
use crate::user;
use bpfjet_maps::{Map, MapType};
use bpfjet_sys::{Errno, MapElem};

const BPF_EXIST: u64 = 2;
const BPF_NOEXIST: u64 = 1;
/// The largest CPUMAP queue the kernel accepts.
const CPUMAP_MAX_QSIZE: u32 = 16384;

/// Whether `map` keeps the programs in its entries alive: a devmap or
/// cpumap with room for one. (A PROG_ARRAY does not: the kernel empties it
/// when its last user-space reference goes.)
pub(crate) fn entries_hold_programs(map: &Map) -> bool {
    matches!(
        map.map_type(),
        MapType::Devmap | MapType::DevmapHash | MapType::Cpumap
    ) && map.value_size() >= 8
}

/// Whether an entry of a live devmap or cpumap of the instance holds
/// program `id` (the kernel's entry holds a reference on its program until
/// the entry or the map goes).
pub(crate) fn held_by_entry(ns: &Namespace, id: u32) -> bool {
    ns.ids(Kind::Map).into_iter().any(|m| {
        ns.read_record(Kind::Map, m).is_ok()
            && ns
                .instance()
                .map_by_id(m)
                .is_ok_and(|map| entries_hold_programs(&map) && held_ids(&map).contains(&id))
    })
}

/// The programs `map`'s entries hold (for their release with the map).
pub(crate) fn entry_programs(map: &Map) -> Vec<u32> {
    if entries_hold_programs(map) {
        held_ids(map)
    } else {
        Vec::new()
    }
}

/// The program entry `key` of `map` holds, if any.
pub(crate) fn entry_program(map: &Map, key: &[u8]) -> Option<u32> {
    if !entries_hold_programs(map) {
        return None;
    }
    let v = map.lookup_copy(key).ok()?;
    let id = u32::from_ne_bytes(v.get(4..8)?.try_into().ok()?);
    (id != 0).then_some(id)
}

impl BpfjetBackend {
    /// The value an update of a DEVMAP/DEVMAP_HASH/CPUMAP with room for a
    /// program stores: the caller's value with its program fd replaced by
    /// the program's id (0 for none). None for other maps and for 4-byte
    /// values, which hold no program.
    pub(crate) fn redirect_map_value(
        &self,
        m: &MapObj,
        e: &MapElem,
    ) -> Result<Option<[u8; 8]>, Errno> {
        let map = &m.map;
        let kind = map.map_type();
        if !matches!(
            kind,
            MapType::Devmap | MapType::DevmapHash | MapType::Cpumap
        ) || map.value_size() < 8
        {
            return Ok(None);
        }
        let raw = user::read(e.value, 8)?;
        let first = u32::from_ne_bytes(raw[..4].try_into().unwrap());
        let fd = i32::from_ne_bytes(raw[4..8].try_into().unwrap());
        let key = || -> Result<u32, Errno> {
            let k = user::read(e.key, 4)?;
            Ok(u32::from_ne_bytes(k[..4].try_into().unwrap()))
        };
        // The checks the kernel makes before it looks at the program.
        if e.flags > BPF_EXIST {
            return Err(Errno::EINVAL);
        }
        match kind {
            MapType::Devmap => {
                if key()? >= map.max_entries() {
                    return Err(Errno::E2BIG);
                }
                if e.flags == BPF_NOEXIST {
                    return Err(Errno::EEXIST);
                }
                if first == 0 {
                    // "can not specify fd if ifindex is 0"; else a delete.
                    return if fd > 0 {
                        Err(Errno::EINVAL)
                    } else {
                        Ok(Some([0; 8]))
                    };
                }
            }
            MapType::DevmapHash => {
                if first == 0 {
                    return Err(Errno::EINVAL);
                }
            }
            _ => {
                let cpu = key()?;
                if cpu >= map.max_entries() {
                    return Err(Errno::E2BIG);
                }
                if e.flags == BPF_NOEXIST {
                    return Err(Errno::EEXIST);
                }
                if first > CPUMAP_MAX_QSIZE {
                    return Err(Errno(libc::EOVERFLOW));
                }
                if cpu >= map.ncpus() {
                    return Err(Errno(libc::ENODEV));
                }
                if first == 0 {
                    return Ok(Some([0; 8]));
                }
            }
        }
        if kind != MapType::Cpumap && crate::attach::ifname(first).is_err() {
            // __dev_map_alloc_node: the device, before the program.
            return Err(Errno::EINVAL);
        }
        let id = if fd > 0 {
            let (attach, refusal) = if kind == MapType::Cpumap {
                (BPF_XDP_CPUMAP, Errno::ENOMEM)
            } else {
                (BPF_XDP_DEVMAP, Errno::EINVAL)
            };
            match self.obj(fd as u32) {
                Some(Obj::Prog(p))
                    if p.rec.prog_type == BPF_PROG_TYPE_XDP
                        && p.rec.expected_attach_type == attach =>
                {
                    // bpf_prog_map_compatible: the map's first entry
                    // program is its owner; later ones must match its
                    // frags flag (the attach type they share).
                    self.claim_prog_array(map.id(), &p.rec)
                        .map_err(|_| refusal)?;
                    p.rec.id
                }
                _ => return Err(refusal),
            }
        } else {
            0
        };
        let mut value = [0u8; 8];
        value[..4].copy_from_slice(&first.to_ne_bytes());
        value[4..].copy_from_slice(&id.to_ne_bytes());
        Ok(Some(value))
    }
}
