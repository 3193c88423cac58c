//! PROG_ARRAY maps under `bpf()`: program fds as values, program ids inside.
//!
//! libbpf's tail-call setup writes a program fd into a PROG_ARRAY slot
//! (`bpf_map_update_elem(prog_array_fd, &k, &prog_fd)`); the kernel stores
//! the program and a lookup from user space returns its id. bpfjet stores
//! the id in the shared map, so every process of the instance (and `bpfjet
//! map`) reads the kernel's answer.
//!
//! The kernel's compatibility rule (`bpf_prog_map_compatible`): the first
//! program that uses a PROG_ARRAY (loaded with a reference to it, or put
//! into it) makes its class the map's owner — program type, frags flag,
//! expected attach type — and later programs of another class are refused
//! (`EINVAL`), at load or at update.
//!
//! A program runs with the programs its PROG_ARRAYs hold: it is built
//! together with every program reachable through them (the closure, each
//! with its freplace extensions linked in), as one loaded object whose
//! tail-call table is indexed by program id. An update of a PROG_ARRAY that
//! an attached program reaches rebuilds that program in its running data
//! plane (the attachment's revision), so the next packet takes the new
//! slot, as in the kernel.

use crate::backend::BpfjetBackend;
use crate::freplace::{self, BPF_PROG_TYPE_EXT};
use crate::namespace::{Kind, Namespace};
use crate::objects::{MapMeta, Obj, ProgRecord};
use crate::progs::{self, Refusal, BPF_PROG_TYPE_XDP};
use bpfjet_maps::{Instance, Map, MapType};
use bpfjet_obj::Object;
use bpfjet_runtime::LoadedObject;
use bpfjet_sys::Errno;
use std::collections::BTreeSet;

const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;

/// What the kernel compares: the program type (an EXT program counts as
/// its target's, XDP), the frags flag, the expected attach type.
pub type TailClass = (u32, bool, u32);

pub fn class_of(rec: &ProgRecord) -> TailClass {
    let ty = if rec.prog_type == BPF_PROG_TYPE_EXT {
        BPF_PROG_TYPE_XDP
    } else {
        rec.prog_type
    };
    (
        ty,
        rec.prog_flags & BPF_F_XDP_HAS_FRAGS != 0,
        rec.expected_attach_type,
    )
}

fn map_meta(ns: &Namespace, id: u32) -> Option<MapMeta> {
    serde_json::from_slice(&ns.read_record(Kind::Map, id).ok()?).ok()
}

/// Whether `map` holds programs a program using it runs: a PROG_ARRAY's
/// tail-call targets, a devmap's or cpumap's entry programs
/// (`worker/egress.rs` in the runtime).
fn holds_programs(map: &Map) -> bool {
    map.map_type() == MapType::ProgArray || crate::redirect_progs::entries_hold_programs(map)
}

/// The program ids `map` holds now (see [`holds_programs`]).
pub(crate) fn held_ids(map: &Map) -> Vec<u32> {
    if map.map_type() != MapType::ProgArray {
        // `struct bpf_devmap_val`: the program id after the ifindex.
        return map
            .entries_raw()
            .unwrap_or_default()
            .iter()
            .filter_map(|e| e.values.first()?.get(4..8)?.try_into().ok())
            .map(u32::from_ne_bytes)
            .filter(|&id| id != 0)
            .collect();
    }
    (0..map.max_entries())
        .filter_map(|k| {
            let slot = map.lookup(&k.to_ne_bytes(), 0)?;
            // SAFETY: a PROG_ARRAY value is 4 bytes: the program id.
            Some(unsafe { std::ptr::read_unaligned(slot as *const u32) })
        })
        .collect()
}

/// Program `rec` and every program reachable through the PROG_ARRAYs they
/// use, each with its extensions linked in; `rec` first. Also the
/// PROG_ARRAY map ids they use.
fn closure(ns: &Namespace, rec: &ProgRecord) -> Result<(Vec<ProgRecord>, Vec<u32>), String> {
    let mut progs = vec![freplace::linked_record(ns, rec)?];
    let mut seen: BTreeSet<u32> = BTreeSet::from([rec.id]);
    let mut arrays: Vec<u32> = Vec::new();
    let mut i = 0;
    while i < progs.len() {
        for &m in &progs[i].map_ids.clone() {
            let Ok(map) = ns.instance().map_by_id(m) else {
                continue;
            };
            if !holds_programs(&map) || arrays.contains(&m) {
                continue;
            }
            arrays.push(m);
            for id in held_ids(&map) {
                if !seen.insert(id) {
                    continue;
                }
                let r: ProgRecord = serde_json::from_slice(
                    &ns.read_record(Kind::Prog, id)
                        .map_err(|_| format!("map {m} holds program {id}, now gone"))?,
                )
                .map_err(|e| format!("program {id}: corrupt record: {e}"))?;
                progs.push(freplace::linked_record(ns, &r)?);
            }
        }
        i += 1;
    }
    Ok((progs, arrays))
}

/// Program `rec` as it runs: with its extensions and the programs its
/// PROG_ARRAYs hold, verified and bound to the instance's maps. The object
/// (for engines that compile it), the loaded object, the entry's name.
pub fn runnable(
    ns: &Namespace,
    rec: &ProgRecord,
    instance: Instance,
) -> Result<(Object, LoadedObject, String), Refusal> {
    let fail = |log: String| Refusal::new(Errno::EINVAL, log);
    let (progs, _) = closure(ns, rec).map_err(fail)?;
    // One map table for all: each program's map indices follow it.
    let mut map_ids: Vec<u32> = Vec::new();
    let mut programs = Vec::new();
    for p in &progs {
        let mut p = p.clone();
        for (pc, src) in progs::map_lddws(&p.insns) {
            let index = (p.insns[pc] >> 32) as usize;
            let id = *p.map_ids.get(index).ok_or_else(|| {
                fail(format!(
                    "{}: insn {pc}: map index {index} out of range",
                    p.name
                ))
            })?;
            let new = map_ids.iter().position(|&m| m == id).unwrap_or_else(|| {
                map_ids.push(id);
                map_ids.len() - 1
            });
            progs::set_map_index(&mut p.insns[pc], src, new as u32);
        }
        programs.push(p);
    }
    let maps = map_ids
        .iter()
        .map(|&m| {
            ns.instance()
                .map_by_id(m)
                .map_err(|e| fail(format!("map id {m}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut object = progs::object_of(&programs[0], &maps);
    for p in &programs[1..] {
        let mut one = progs::object_of(p, &maps);
        let mut prog = one.programs.remove(0);
        // Names are unique within an object: the id tells them apart.
        prog.name = format!("{}_{}", prog.name, p.id);
        object.programs.push(prog);
    }
    let mut loaded = progs::build_object(&object, &maps, instance)?;
    if programs.len() > 1 {
        loaded
            .set_tail_slots(programs.iter().map(|p| p.id).collect())
            .map_err(|e| fail(e.to_string()))?;
    }
    let name = object.programs[0].name.clone();
    Ok((object, loaded, name))
}

impl BpfjetBackend {
    /// The class of PROG_ARRAY `map_id`'s owner, set by `rec` when it has
    /// none; `EINVAL` when `rec` is of another class.
    pub(crate) fn claim_prog_array(&self, map_id: u32, rec: &ProgRecord) -> Result<(), Errno> {
        let mut meta = map_meta(&self.ns, map_id).unwrap_or_default();
        let class = class_of(rec);
        match meta.tail_owner {
            Some(owner) if owner == class => Ok(()),
            Some(_) => Err(Errno::EINVAL),
            None => {
                meta.tail_owner = Some(class);
                let bytes = serde_json::to_vec(&meta).map_err(|_| Errno::EINVAL)?;
                self.ns.write_record(Kind::Map, map_id, &bytes)
            }
        }
    }

    /// A PROG_ARRAY update's value: the program behind the caller's fd, as
    /// its id (the kernel's compatibility rule applied).
    pub(crate) fn prog_array_value(&self, map: &Map, value: u64) -> Result<[u8; 4], Errno> {
        let raw = crate::user::read(value, 4)?;
        let fd = u32::from_ne_bytes(raw[..4].try_into().unwrap());
        let prog = match self.obj(fd) {
            Some(Obj::Prog(p)) => p,
            Some(_) => return Err(Errno::EINVAL),
            None => return Err(Errno::EBADF),
        };
        let rec: ProgRecord =
            serde_json::from_slice(&self.ns.read_record(Kind::Prog, prog.rec.id)?)
                .map_err(|_| Errno::EINVAL)?;
        self.claim_prog_array(map.id(), &rec)?;
        Ok(rec.id.to_ne_bytes())
    }

    /// PROG_ARRAY `map_id` changed: attached programs that reach it are
    /// rebuilt in their data planes.
    pub(crate) fn prog_array_changed(&self, map_id: u32) -> Result<(), Errno> {
        for a in self.ns.attachments() {
            let Ok(bytes) = self.ns.read_record(Kind::Prog, a.prog_id) else {
                continue;
            };
            let Ok(rec) = serde_json::from_slice::<ProgRecord>(&bytes) else {
                continue;
            };
            if closure(&self.ns, &rec).is_ok_and(|(_, arrays)| arrays.contains(&map_id)) {
                let mut next = a.clone();
                next.revision += 1;
                crate::attach::replace(&self.ns, &next)?;
            }
        }
        Ok(())
    }

    /// Whether a program must be rebuilt to run as it would attached: it
    /// has extensions linked in or uses a PROG_ARRAY.
    pub(crate) fn needs_rebuild(&self, rec: &ProgRecord) -> bool {
        freplace::has_links(&self.ns, rec.id)
            || rec.map_ids.iter().any(|&m| {
                self.ns
                    .instance()
                    .map_by_id(m)
                    .is_ok_and(|map| holds_programs(&map))
            })
    }
}
