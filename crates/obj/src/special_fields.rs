//! The BTF "special fields" the kernel's verifier gives meaning to (its
//! `btf_parse_fields`): a `bpf_spin_lock`, graph roots (`bpf_list_head`,
//! `bpf_rb_root`) tagged `__contains(type, field)` with a BTF decl tag,
//! graph nodes (`bpf_list_node`, `bpf_rb_node`), a `bpf_refcount` and
//! `__kptr` pointers (a `kptr` type tag). Found in map value types, in
//! global data sections and in the program's own types that `bpf_obj_new`
//! allocates. A `bpf_timer` is one too (map values only). Programs may not
//! load or store these fields directly; the graph kfuncs, `bpf_kptr_xchg`
//! and the timer helpers own them.

use crate::btf::{Btf, BtfType};

/// Which graph a root or node belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GraphKind {
    List,
    Rbtree,
}

impl GraphKind {
    pub fn root_name(self) -> &'static str {
        match self {
            GraphKind::List => "bpf_list_head",
            GraphKind::Rbtree => "bpf_rb_root",
        }
    }

    pub fn node_name(self) -> &'static str {
        match self {
            GraphKind::List => "bpf_list_node",
            GraphKind::Rbtree => "bpf_rb_node",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldKind {
    SpinLock,
    /// A graph root holding objects of BTF type `value_type` linked through
    /// their node field at byte `node_off`.
    Root {
        graph: GraphKind,
        value_type: u32,
        node_off: u32,
    },
    Node(GraphKind),
    Refcount,
    /// A referenced kernel pointer to a program-local struct of BTF type
    /// `target` (owned by the field; exchanged with `bpf_kptr_xchg`).
    Kptr {
        target: u32,
    },
    /// A `struct bpf_timer` (16 bytes, 8-aligned), driven by the
    /// `bpf_timer_*` helpers.
    Timer,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SpecialField {
    /// Byte offset in the value (or object).
    pub off: u32,
    pub size: u32,
    pub kind: FieldKind,
}

impl SpecialField {
    /// The C name of the field's type, for messages.
    pub fn type_name(&self) -> &'static str {
        match self.kind {
            FieldKind::SpinLock => "bpf_spin_lock",
            FieldKind::Root { graph, .. } => graph.root_name(),
            FieldKind::Node(g) => g.node_name(),
            FieldKind::Refcount => "bpf_refcount",
            FieldKind::Kptr { .. } => "kptr",
            FieldKind::Timer => "bpf_timer",
        }
    }

    /// Whether `[lo, hi)` overlaps the field.
    pub fn overlaps(&self, lo: i64, hi: i64) -> bool {
        lo < i64::from(self.off) + i64::from(self.size) && i64::from(self.off) < hi
    }
}

/// The byte ranges `(offset, size)` of a map value the runtime owns: its
/// kptrs, graph roots and timer, whose bytes user space never writes
/// (updates keep them out) nor reads (copies read zeros).
pub fn runtime_owned_ranges(fields: &[SpecialField]) -> Vec<(u32, u32)> {
    fields
        .iter()
        .filter(|f| {
            matches!(
                f.kind,
                FieldKind::Kptr { .. } | FieldKind::Root { .. } | FieldKind::Timer
            )
        })
        .map(|f| (f.off, f.size))
        .collect()
}

/// The kernel's `map_check_btf`: a `bpf_timer` may only be in a hash, LRU
/// hash or array map's value; `BPF_MAP_CREATE` of another type with such a
/// value type fails (EOPNOTSUPP), and libbpf then creates the map again
/// without BTF ("Retrying without BTF"). Such a map then has no special
/// fields at all: the verifier refuses timer (and lock) helpers on it, as
/// the kernel does after libbpf's retry.
pub fn kernel_refuses_value(map_type: bpfjet_maps::MapType, fields: &[SpecialField]) -> bool {
    use bpfjet_maps::MapType::{Array, Hash, LruHash};
    fields.iter().any(|f| f.kind == FieldKind::Timer) && !matches!(map_type, Hash | LruHash | Array)
}

/// The size the kernel's uapi gives a special struct, if `name` is one.
fn special_struct(name: &str) -> Option<(u32, Option<FieldKind>)> {
    Some(match name {
        "bpf_spin_lock" => (4, Some(FieldKind::SpinLock)),
        "bpf_list_head" => (16, None),
        "bpf_rb_root" => (16, None),
        "bpf_list_node" => (24, Some(FieldKind::Node(GraphKind::List))),
        "bpf_rb_node" => (32, Some(FieldKind::Node(GraphKind::Rbtree))),
        "bpf_refcount" => (4, Some(FieldKind::Refcount)),
        "bpf_timer" => (16, Some(FieldKind::Timer)),
        _ => return None,
    })
}

/// Nesting deeper than this is not searched (the kernel bounds it too).
const MAX_NESTING: u32 = 8;

/// `contains:NAME:FIELD` of a decl tag on `target` (component
/// `component`, -1 for the whole variable).
fn contains_tag(btf: &Btf, target: u32, component: i32) -> Option<&str> {
    btf.types().iter().find_map(|t| match t {
        BtfType::DeclTag {
            name,
            target: t,
            component: c,
        } if *t == target && *c == component => name.strip_prefix("contains:"),
        _ => None,
    })
}

/// The struct named `name` (the first one: program BTF has one per name).
pub fn struct_by_name(btf: &Btf, name: &str) -> Option<u32> {
    btf.types()
        .iter()
        .position(|t| matches!(t, BtfType::Struct { name: n, .. } if n == name))
        .map(|i| i as u32)
}

/// The root field a `bpf_list_head`/`bpf_rb_root` with tag `contains:`
/// `spec` describes.
fn root_field(btf: &Btf, graph: GraphKind, spec: &str, off: u32) -> Result<SpecialField, String> {
    let (ty, field) = spec
        .split_once(':')
        .ok_or_else(|| format!("malformed __contains tag \"contains:{spec}\""))?;
    let value_type = struct_by_name(btf, ty)
        .ok_or_else(|| format!("__contains names struct {ty}, which the BTF does not define"))?;
    let Some(BtfType::Struct { members, .. }) = btf.type_by_id(value_type) else {
        return Err(format!("{ty} is not a struct"));
    };
    let m = members
        .iter()
        .find(|m| m.name == field)
        .ok_or_else(|| format!("struct {ty} has no member {field} (named by __contains)"))?;
    let node_ty = btf.resolve(m.type_id).and_then(|id| btf.type_by_id(id));
    if node_ty.map(BtfType::name) != Some(graph.node_name()) {
        return Err(format!(
            "member {ty}.{field} named by __contains of a {} is not a struct {}",
            graph.root_name(),
            graph.node_name()
        ));
    }
    Ok(SpecialField {
        off,
        size: 16,
        kind: FieldKind::Root {
            graph,
            value_type,
            node_off: m.bit_offset / 8,
        },
    })
}

/// The special field a value of type `type_id` at `off` is, if any;
/// `tag` is the `__contains` tag on it.
fn field_of_type(
    btf: &Btf,
    type_id: u32,
    off: u32,
    tag: Option<&str>,
    out: &mut Vec<SpecialField>,
    depth: u32,
) -> Result<(), String> {
    let id = btf.resolve(type_id).unwrap_or(0);
    match btf.type_by_id(id) {
        Some(BtfType::Struct { name, .. }) if special_struct(name).is_some() => {
            let (size, kind) = special_struct(name).unwrap_or((0, None));
            let graph = match name.as_str() {
                "bpf_list_head" => Some(GraphKind::List),
                "bpf_rb_root" => Some(GraphKind::Rbtree),
                _ => None,
            };
            match (graph, kind) {
                (Some(g), _) => {
                    let spec = tag.ok_or_else(|| {
                        format!("a struct {} without a __contains tag", g.root_name())
                    })?;
                    out.push(root_field(btf, g, spec, off)?);
                }
                (None, Some(kind)) => out.push(SpecialField { off, size, kind }),
                (None, None) => {}
            }
        }
        Some(BtfType::Struct { members, .. }) if depth < MAX_NESTING => {
            for (i, m) in members.iter().enumerate() {
                let tag = contains_tag(btf, id, i as i32);
                field_of_type(btf, m.type_id, off + m.bit_offset / 8, tag, out, depth + 1)?;
            }
        }
        Some(BtfType::Ptr { target }) => {
            if let Some(BtfType::TypeTag { name, target }) = btf.type_by_id(*target) {
                if name == "kptr" {
                    let mut target = btf.resolve(*target).unwrap_or(0);
                    match btf.type_by_id(target) {
                        Some(BtfType::Struct { .. }) => {}
                        // Declared only: the struct of that name, if the
                        // program defines it (else no object will match).
                        Some(BtfType::Fwd { name, union: false }) => {
                            target = struct_by_name(btf, name).unwrap_or(target);
                        }
                        _ => return Err("a __kptr must point to a struct".into()),
                    }
                    out.push(SpecialField {
                        off,
                        size: 8,
                        kind: FieldKind::Kptr { target },
                    });
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// The special fields of struct `type_id` (a map value or an object type),
/// sorted by offset.
pub fn struct_fields(btf: &Btf, type_id: u32) -> Result<Vec<SpecialField>, String> {
    let mut out = Vec::new();
    let id = btf.resolve(type_id).unwrap_or(0);
    if let Some(BtfType::Struct { members, .. }) = btf.type_by_id(id) {
        for (i, m) in members.iter().enumerate() {
            let tag = contains_tag(btf, id, i as i32);
            field_of_type(btf, m.type_id, m.bit_offset / 8, tag, &mut out, 1)?;
        }
    }
    check_fields(&mut out)?;
    Ok(out)
}

/// The special fields of the variables of global data section `section`
/// (`.data`, `.bss`, `.data.NAME`, ...), by offset in the section.
/// `symbol_off` gives a variable's offset from the ELF symbol table: clang
/// leaves the `DATASEC` offsets of these sections 0 for the loader to fix
/// (libbpf's `btf_fixup_datasec`).
pub fn datasec_fields(
    btf: &Btf,
    section: &str,
    symbol_off: impl Fn(&str) -> Option<u32>,
) -> Result<Vec<SpecialField>, String> {
    let mut out = Vec::new();
    for v in btf.datasec(section).unwrap_or_default() {
        let Some(BtfType::Var { target, name, .. }) = btf.type_by_id(v.type_id) else {
            continue;
        };
        let off = symbol_off(name).unwrap_or(v.offset);
        let tag = contains_tag(btf, v.type_id, -1);
        field_of_type(btf, *target, off, tag, &mut out, 0)?;
    }
    check_fields(&mut out)?;
    Ok(out)
}

/// The special fields of a map value given by its BTF type id, as
/// `BPF_MAP_CREATE` gives it: a struct's, or, for a global data map (libbpf
/// gives its DATASEC, the offsets fixed up), its variables'.
pub fn value_fields(btf: &Btf, type_id: u32) -> Result<Vec<SpecialField>, String> {
    match btf.type_by_id(type_id) {
        Some(BtfType::DataSec { name, .. }) => datasec_fields(btf, name, |_| None),
        _ => struct_fields(btf, type_id),
    }
}

fn check_fields(out: &mut [SpecialField]) -> Result<(), String> {
    out.sort_by_key(|f| f.off);
    let locks = out.iter().filter(|f| f.kind == FieldKind::SpinLock).count();
    if locks > 1 {
        return Err("more than one bpf_spin_lock".into());
    }
    let timers: Vec<&SpecialField> = out.iter().filter(|f| f.kind == FieldKind::Timer).collect();
    if timers.len() > 1 {
        // The kernel's btf_find_field: one bpf_timer per value (E2BIG).
        return Err("more than one bpf_timer".into());
    }
    if let Some(t) = timers.first() {
        if t.off % 8 != 0 {
            return Err(format!(
                "a bpf_timer at offset {} is not 8-byte aligned",
                t.off
            ));
        }
    }
    let has_root = out.iter().any(|f| matches!(f.kind, FieldKind::Root { .. }));
    if has_root && locks == 0 {
        // The kernel's btf_parse_fields: a graph root needs its lock.
        return Err("a graph root (bpf_list_head/bpf_rb_root) without a bpf_spin_lock".into());
    }
    let node = |g: GraphKind| out.iter().any(|f| f.kind == FieldKind::Node(g));
    if node(GraphKind::List)
        && node(GraphKind::Rbtree)
        && !out.iter().any(|f| f.kind == FieldKind::Refcount)
    {
        // The kernel's btf_parse_fields: an object in a list and a tree at
        // once has non-owning references whose collection cannot be told
        // without a reference count (the kernel refuses the BTF: EINVAL).
        return Err(
            "a bpf_list_node and a bpf_rb_node in one struct without a bpf_refcount".into(),
        );
    }
    Ok(())
}

/// A program-local struct `bpf_obj_new` may allocate: its size and fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalType {
    pub type_id: u32,
    pub name: String,
    pub size: u32,
    pub fields: Vec<SpecialField>,
}

impl LocalType {
    pub fn of(btf: &Btf, type_id: u32) -> Result<LocalType, String> {
        let Some(BtfType::Struct { name, size, .. }) = btf.type_by_id(type_id) else {
            return Err(format!(
                "type id {type_id} is not a struct of the program's BTF"
            ));
        };
        if special_struct(name).is_some() {
            return Err(format!("struct {name} cannot be allocated by itself"));
        }
        Ok(LocalType {
            type_id,
            name: name.clone(),
            size: *size,
            fields: struct_fields(btf, type_id)?,
        })
    }

    /// The offset of the `bpf_refcount`, if the type has one.
    pub fn refcount_off(&self) -> Option<u32> {
        self.fields
            .iter()
            .find(|f| f.kind == FieldKind::Refcount)
            .map(|f| f.off)
    }
}
