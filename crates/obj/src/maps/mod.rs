//! Collects every map an object defines, in the order bpfjet numbers them:
//! BTF-defined maps (`.maps`, in BTF declaration order), then legacy maps
//! (`maps`, by offset), then global data sections (by section index).

mod btf_defs;

pub use btf_defs::spin_lock_offset;
mod global_data;
mod kconfig;
pub use kconfig::has_syscall_wrapper;
mod legacy;

use std::collections::HashMap;

use bpfjet_maps::{MapSpec, MapType};

use crate::btf::{Btf, BtfType, Linkage};
use crate::bytes::slice_at;
use crate::elf::{reloc, Elf, SymKind, Symbol};
use crate::error::{malformed, ObjError};
use crate::special_fields::{self, SpecialField};

/// A slot of an outer map or PROG_ARRAY filled in by the object itself
/// (`.values = { [1] = &inner_map }` in C).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapSlotInit {
    /// Index of the outer map / PROG_ARRAY in `Object::maps`.
    pub map: usize,
    /// The key (array index) being set.
    pub slot: u32,
    pub target: SlotTarget,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlotTarget {
    /// Another map of the object, by index in `Object::maps`.
    Map(usize),
    /// A program of the object, by (function) name.
    Program(String),
}

/// Where a BTF map definition lives in `.maps`, for resolving `.values` relocations.
struct Extent {
    map: usize,
    start: u64,
    size: u64,
    values: Option<btf_defs::ValuesArray>,
}

pub(crate) struct MapTable {
    pub specs: Vec<MapSpec>,
    /// Parallel to `specs`: offset of the value's `bpf_spin_lock`.
    pub spin_locks: Vec<Option<u32>>,
    /// Parallel to `specs`: the special fields of the value (locks, graph
    /// roots, kptrs), from its BTF.
    pub fields: Vec<Vec<SpecialField>>,
    /// Map-in-maps (by index) whose inner template's value has special
    /// fields (a timer, a lock, ...): those fields.
    pub inner_fields: std::collections::BTreeMap<usize, Vec<SpecialField>>,
    pub inits: Vec<MapSlotInit>,
    /// BTF and legacy definitions by (section, byte offset of the definition).
    by_location: HashMap<(usize, u64), usize>,
    by_data_section: HashMap<usize, usize>,
    /// `__kconfig` externs: (the `.kconfig` map, offset in its value).
    kconfig: HashMap<String, (usize, u32)>,
}

impl MapTable {
    pub fn collect(elf: &Elf, btf: Option<&Btf>) -> Result<MapTable, ObjError> {
        let mut table = MapTable {
            specs: Vec::new(),
            spin_locks: Vec::new(),
            fields: Vec::new(),
            inner_fields: Default::default(),
            inits: Vec::new(),
            by_location: HashMap::new(),
            by_data_section: HashMap::new(),
            kconfig: HashMap::new(),
        };
        if let Some((index, _)) = elf.section_by_name(".maps") {
            let btf = btf.ok_or(ObjError::Btf {
                section: ".BTF",
                reason: "the object defines maps in `.maps` but has no BTF".into(),
            })?;
            table.collect_btf_maps(elf, btf, index)?;
        }
        if let Some((index, _)) = elf.section_by_name("maps") {
            table.collect_legacy_maps(elf, index)?;
        }
        for (index, section) in elf.sections.iter().enumerate() {
            let mmapable = btf.is_some_and(|b| b.datasec_has_non_static_var(&section.name));
            if let Some(spec) = global_data::map_for(section, mmapable)? {
                table.by_data_section.insert(index, table.specs.len());
                let fields = match btf {
                    Some(btf) => special_fields::datasec_fields(btf, &spec.name, |var| {
                        elf.symbols
                            .iter()
                            .find(|s| {
                                s.section == Some(index)
                                    && s.kind != SymKind::Section
                                    && s.name == var
                            })
                            .and_then(|s| u32::try_from(s.value).ok())
                    })
                    .map_err(|reason| ObjError::InvalidMap {
                        map: spec.name.clone(),
                        reason,
                    })?,
                    None => Vec::new(),
                };
                table.spin_locks.push(
                    fields
                        .iter()
                        .find(|f| f.kind == special_fields::FieldKind::SpinLock)
                        .map(|f| f.off),
                );
                table.fields.push(fields);
                table.specs.push(spec);
            }
        }
        if let Some(k) = kconfig::collect(elf, btf)? {
            let map = table.specs.len();
            table.kconfig = k.offsets.into_iter().map(|(n, o)| (n, (map, o))).collect();
            table.specs.push(k.spec);
            table.spin_locks.push(None);
        }
        Ok(table)
    }

    /// The map whose definition starts at `offset` of `section` (`.maps` or `maps`).
    pub fn def_at(&self, section: usize, offset: u64) -> Option<usize> {
        self.by_location.get(&(section, offset)).copied()
    }

    /// The global-data map backing `section`.
    pub fn data_map(&self, section: usize) -> Option<usize> {
        self.by_data_section.get(&section).copied()
    }

    /// Where the `__kconfig` extern `name` lives: (map, offset).
    pub fn kconfig_var(&self, name: &str) -> Option<(usize, u32)> {
        self.kconfig.get(name).copied()
    }

    fn collect_btf_maps(&mut self, elf: &Elf, btf: &Btf, section: usize) -> Result<(), ObjError> {
        let mut extents = Vec::new();
        for var in btf.datasec(".maps").unwrap_or_default() {
            let Some(BtfType::Var {
                name,
                target,
                linkage,
            }) = btf.type_by_id(var.type_id)
            else {
                return Err(ObjError::Btf {
                    section: ".BTF",
                    reason: format!("`.maps` entry type [{}] is not a variable", var.type_id),
                });
            };
            // libbpf builds maps only from global definitions ("unsupported
            // map linkage"): map names are global in an object and across
            // the objects a loader links.
            if *linkage != Linkage::Global {
                return Err(ObjError::InvalidMap {
                    map: name.clone(),
                    reason: format!(
                        "{} linkage: libbpf takes only global map definitions \
                         (not `static`, not hidden visibility)",
                        match linkage {
                            Linkage::Static => "static".to_string(),
                            Linkage::Extern => "extern".to_string(),
                            other => format!("{other:?}"),
                        }
                    ),
                });
            }
            let sym = elf
                .symbols
                .iter()
                .find(|s| {
                    s.section == Some(section) && s.kind != SymKind::Section && s.name == *name
                })
                .ok_or_else(|| malformed(format!("map `{name}` has no symbol in `.maps`")))?;
            let def = btf_defs::parse(btf, name, *target, true)?;
            let map = self.specs.len();
            self.by_location.insert((section, sym.value), map);
            extents.push(Extent {
                map,
                start: sym.value,
                size: sym.size.max(var.size as u64),
                values: def.values,
            });
            let fields = match def.value_type {
                Some(t) => special_fields::struct_fields(btf, t).map_err(|reason| {
                    ObjError::InvalidMap {
                        map: name.clone(),
                        reason,
                    }
                })?,
                None => Vec::new(),
            };
            let (fields, spin_lock) =
                if special_fields::kernel_refuses_value(def.spec.map_type, &fields) {
                    // libbpf's "Retrying without BTF": no special fields.
                    (Vec::new(), None)
                } else {
                    (fields, def.spin_lock)
                };
            // The inner template's fields, as the kernel records them for
            // the template map (`inner_map_fd`): what a program may do with
            // an inner value (bpf_timer_*, bpf_spin_lock) follows them.
            if let (Some(t), Some(inner)) = (def.inner_value_type, &def.spec.inner) {
                let inner_fields = special_fields::struct_fields(btf, t).map_err(|reason| {
                    ObjError::InvalidMap {
                        map: format!("{name}.inner"),
                        reason,
                    }
                })?;
                if !inner_fields.is_empty()
                    && !special_fields::kernel_refuses_value(inner.map_type, &inner_fields)
                {
                    self.inner_fields.insert(map, inner_fields);
                }
            }
            self.fields.push(fields);
            self.specs.push(def.spec);
            self.spin_locks.push(spin_lock);
        }
        let Some(relocs) = elf.relocs.get(&section) else {
            return Ok(());
        };
        let data = elf.sections.get(section).map_or(&[][..], |s| s.data);
        for (&offset, r) in relocs {
            let fail = |reason: String| ObjError::BadRelocation {
                section: ".maps".into(),
                offset,
                reason,
            };
            if r.r_type != reloc::R_BPF_64_ABS64 {
                return Err(ObjError::UnknownRelocation {
                    section: ".maps".into(),
                    offset,
                    r_type: r.r_type,
                });
            }
            let ext = extents
                .iter()
                .find(|e| offset >= e.start && offset - e.start < e.size)
                .ok_or_else(|| fail("not inside any map definition".into()))?;
            let outer = &self.specs[ext.map];
            let values = ext
                .values
                .filter(|v| {
                    offset - ext.start >= v.offset && (offset - ext.start - v.offset) % 8 == 0
                })
                .ok_or_else(|| fail(format!("not a `values` slot of map `{}`", outer.name)))?;
            let slot = u32::try_from((offset - ext.start - values.offset) / 8)
                .map_err(|_| fail("slot index too large".into()))?;
            let sym = elf
                .symbol(r.symbol)
                .ok_or_else(|| fail(format!("symbol index {} out of range", r.symbol)))?;
            // REL relocations keep their addend in the place itself.
            let addend = slice_at(data, offset as usize, 8)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
                .unwrap_or(0);
            let target = self.slot_target(elf, sym, section, addend).map_err(fail)?;
            let expects_program = outer.map_type == MapType::ProgArray;
            if expects_program != matches!(target, SlotTarget::Program(_)) {
                return Err(ObjError::InvalidMap {
                    map: outer.name.clone(),
                    reason: format!("slot {slot} initialised with the wrong kind of object"),
                });
            }
            self.inits.push(MapSlotInit {
                map: ext.map,
                slot,
                target,
            });
        }
        Ok(())
    }

    fn slot_target(
        &self,
        elf: &Elf,
        sym: &Symbol,
        maps_section: usize,
        addend: u64,
    ) -> Result<SlotTarget, String> {
        let Some(section) = sym.section else {
            return Err(format!("refers to undefined symbol `{}`", sym.name));
        };
        let at = sym.value.wrapping_add(addend);
        if section == maps_section {
            return self
                .def_at(section, at)
                .map(SlotTarget::Map)
                .ok_or_else(|| format!("no map definition at `.maps`+{at:#x}"));
        }
        if elf.sections.get(section).is_some_and(|s| s.executable) {
            let func = elf
                .symbols
                .iter()
                .find(|s| s.section == Some(section) && s.kind == SymKind::Func && s.value == at);
            return func
                .map(|f| SlotTarget::Program(f.name.clone()))
                .ok_or_else(|| format!("no function at `{}`+{at:#x}", elf.section_name(section)));
        }
        Err(format!(
            "refers to `{}`, neither a map nor a program",
            elf.symbol_name(sym)
        ))
    }

    fn collect_legacy_maps(&mut self, elf: &Elf, section: usize) -> Result<(), ObjError> {
        let sec = &elf.sections[section];
        let mut syms: Vec<&Symbol> = elf
            .symbols
            .iter()
            .filter(|s| {
                s.section == Some(section) && matches!(s.kind, SymKind::Object | SymKind::Other)
            })
            .collect();
        syms.sort_by_key(|s| s.value);
        if syms.is_empty() {
            if sec.size > 0 {
                return Err(malformed("section `maps` has no symbols naming its maps"));
            }
            return Ok(());
        }
        // Old objects lack symbol sizes; libbpf then splits the section evenly.
        let even = sec.size / syms.len() as u64;
        for sym in syms {
            // As for BTF maps (and libbpf 0.x's legacy maps): only global
            // definitions.
            if sym.local {
                return Err(ObjError::InvalidMap {
                    map: sym.name.clone(),
                    reason: "static linkage: loaders take only global map definitions \
                             (not `static`)"
                        .into(),
                });
            }
            let size = if sym.size > 0 { sym.size } else { even };
            let def = usize::try_from(sym.value)
                .ok()
                .zip(usize::try_from(size).ok())
                .and_then(|(off, len)| slice_at(sec.data, off, len))
                .ok_or_else(|| {
                    malformed(format!("map `{}` lies outside section `maps`", sym.name))
                })?;
            let spec = legacy::parse(&sym.name, def)?;
            self.by_location
                .insert((section, sym.value), self.specs.len());
            // Legacy definitions carry no value type, hence no lock.
            self.specs.push(spec);
            self.fields.push(Vec::new());
            self.spin_locks.push(None);
        }
        Ok(())
    }
}
