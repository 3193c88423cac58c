//! The BTF type graph (kernel `Documentation/bpf/btf.rst`): a header, a type
//! section (type ids count from 1 in order of appearance; id 0 is `void`) and a
//! string section the types' names point into.

use crate::bytes::{cstr_at, slice_at, u16_at, u32_at};
use crate::error::ObjError;

const MAGIC: u16 = 0xeb9f;
const HEADER_MIN: usize = 24;
/// Following a chain of typedefs/qualifiers longer than this means a cycle in
/// malformed input, not a real program.
const MAX_CHAIN: usize = 64;

/// Function and variable linkage as encoded in `FUNC` vlen / `VAR` linkage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Linkage {
    Static,
    Global,
    Extern,
    Other(u32),
}

impl Linkage {
    fn from_raw(v: u32) -> Linkage {
        match v {
            0 => Linkage::Static,
            1 => Linkage::Global,
            2 => Linkage::Extern,
            o => Linkage::Other(o),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub type_id: u32,
    /// Offset from the start of the struct, in bits.
    pub bit_offset: u32,
    /// Width in bits for a bitfield member (kind_flag structs), 0 otherwise.
    pub bitfield_size: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub type_id: u32,
}

/// One variable of a `DATASEC`. In relocatable objects clang leaves `offset`
/// at 0 (libbpf fixes it from the symbol table), so locate variables by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataSecVar {
    pub type_id: u32,
    pub offset: u32,
    pub size: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BtfType {
    Void,
    Int {
        name: String,
        size: u32,
        encoding: u32,
    },
    Ptr {
        target: u32,
    },
    Array {
        elem: u32,
        index: u32,
        nelems: u32,
    },
    Struct {
        name: String,
        size: u32,
        members: Vec<Member>,
    },
    Union {
        name: String,
        size: u32,
        members: Vec<Member>,
    },
    /// `ENUM` and `ENUM64`, which CO-RE treats as one kind.
    Enum {
        name: String,
        size: u32,
        values: Vec<(String, i64)>,
        /// kind_flag: the enumerators are signed.
        signed: bool,
    },
    Fwd {
        name: String,
        /// kind_flag: a forward-declared union rather than a struct.
        union: bool,
    },
    Typedef {
        name: String,
        target: u32,
    },
    Volatile {
        target: u32,
    },
    Const {
        target: u32,
    },
    Restrict {
        target: u32,
    },
    Func {
        name: String,
        proto: u32,
        linkage: Linkage,
    },
    FuncProto {
        ret: u32,
        params: Vec<Param>,
    },
    Var {
        name: String,
        target: u32,
        linkage: Linkage,
    },
    DataSec {
        name: String,
        size: u32,
        vars: Vec<DataSecVar>,
    },
    Float {
        name: String,
        size: u32,
    },
    DeclTag {
        name: String,
        target: u32,
        component: i32,
    },
    TypeTag {
        name: String,
        target: u32,
    },
}

impl BtfType {
    /// The type's name, empty for anonymous and unnamed kinds.
    pub fn name(&self) -> &str {
        use BtfType::*;
        match self {
            Int { name, .. }
            | Struct { name, .. }
            | Union { name, .. }
            | Enum { name, .. }
            | Fwd { name, .. }
            | Typedef { name, .. }
            | Func { name, .. }
            | Var { name, .. }
            | DataSec { name, .. }
            | Float { name, .. }
            | DeclTag { name, .. }
            | TypeTag { name, .. } => name,
            _ => "",
        }
    }

    /// The kind as the kernel's verifier log names it (`btf_type_str`).
    pub fn kind_name(&self) -> &'static str {
        use BtfType::*;
        match self {
            Void => "UNKNOWN",
            Int { .. } => "INT",
            Ptr { .. } => "PTR",
            Array { .. } => "ARRAY",
            Struct { .. } => "STRUCT",
            Union { .. } => "UNION",
            Enum { .. } => "ENUM",
            Fwd { .. } => "FWD",
            Typedef { .. } => "TYPEDEF",
            Volatile { .. } => "VOLATILE",
            Const { .. } => "CONST",
            Restrict { .. } => "RESTRICT",
            Func { .. } => "FUNC",
            FuncProto { .. } => "FUNC_PROTO",
            Var { .. } => "VAR",
            DataSec { .. } => "DATASEC",
            Float { .. } => "FLOAT",
            DeclTag { .. } => "DECL_TAG",
            TypeTag { .. } => "TYPE_TAG",
        }
    }
}

/// A parsed `.BTF` section.
#[derive(Clone, Debug)]
pub struct Btf {
    raw: Vec<u8>,
    /// Indexed by type id; entry 0 is `void`.
    types: Vec<BtfType>,
    strings: Vec<u8>,
}

fn err(reason: impl Into<String>) -> ObjError {
    ObjError::Btf {
        section: ".BTF",
        reason: reason.into(),
    }
}

impl Btf {
    pub fn parse(data: &[u8]) -> Result<Btf, ObjError> {
        let magic = u16_at(data, 0).ok_or_else(|| err("truncated header"))?;
        if magic != MAGIC {
            return Err(err(format!(
                "bad magic {magic:#x} (big-endian BTF is not supported)"
            )));
        }
        let field = |i: usize| u32_at(data, 4 + 4 * i).ok_or_else(|| err("truncated header"));
        let hdr_len = field(0)? as usize;
        if hdr_len < HEADER_MIN {
            return Err(err(format!("header length {hdr_len} is too short")));
        }
        let (type_off, type_len, str_off, str_len) = (field(1)?, field(2)?, field(3)?, field(4)?);
        let sub = |off: u32, len: u32, what: &str| {
            (hdr_len as u64)
                .checked_add(off as u64)
                .and_then(|start| slice_at(data, start as usize, len as usize))
                .ok_or_else(|| err(format!("{what} section lies outside the data")))
        };
        let type_data = sub(type_off, type_len, "type")?;
        let strings = sub(str_off, str_len, "string")?.to_vec();

        let mut types = vec![BtfType::Void];
        let mut pos = 0;
        while pos < type_data.len() {
            let (ty, len) = parse_type(type_data, pos, &strings)
                .map_err(|reason| err(format!("type [{}] at {pos:#x}: {reason}", types.len())))?;
            types.push(ty);
            pos += len;
        }
        Ok(Btf {
            raw: data.to_vec(),
            types,
            strings,
        })
    }

    /// The section bytes exactly as found in the object (for handing to a kernel).
    pub fn raw(&self) -> &[u8] {
        &self.raw
    }

    /// All types, indexed by id (entry 0 is `void`).
    pub fn types(&self) -> &[BtfType] {
        &self.types
    }

    pub fn type_by_id(&self, id: u32) -> Option<&BtfType> {
        self.types.get(id as usize)
    }

    pub fn string_at(&self, off: u32) -> Option<&str> {
        cstr_at(&self.strings, off as usize)
    }

    /// Skips typedefs, qualifiers and type tags down to the type they name.
    pub fn resolve(&self, mut id: u32) -> Option<u32> {
        for _ in 0..MAX_CHAIN {
            match self.type_by_id(id)? {
                BtfType::Typedef { target, .. }
                | BtfType::Volatile { target }
                | BtfType::Const { target }
                | BtfType::Restrict { target }
                | BtfType::TypeTag { target, .. } => id = *target,
                _ => return Some(id),
            }
        }
        None
    }

    /// The size in bytes of a value of type `id`, `None` for sizeless or
    /// malformed types.
    pub fn size_of(&self, id: u32) -> Option<u64> {
        self.size_of_depth(id, 0)
    }

    fn size_of_depth(&self, id: u32, depth: usize) -> Option<u64> {
        if depth > MAX_CHAIN {
            return None;
        }
        match self.type_by_id(self.resolve(id)?)? {
            BtfType::Int { size, .. }
            | BtfType::Struct { size, .. }
            | BtfType::Union { size, .. }
            | BtfType::Enum { size, .. }
            | BtfType::Float { size, .. }
            | BtfType::DataSec { size, .. } => Some(*size as u64),
            BtfType::Ptr { .. } => Some(8),
            BtfType::Array { elem, nelems, .. } => self
                .size_of_depth(*elem, depth + 1)?
                .checked_mul(*nelems as u64),
            BtfType::Var { target, .. } => self.size_of_depth(*target, depth + 1),
            _ => None,
        }
    }

    /// A type graph built in memory (bpfjet's own context layouts), with no
    /// encoded form.
    pub fn from_types(types: Vec<BtfType>) -> Btf {
        let mut all = vec![BtfType::Void];
        all.extend(types);
        Btf {
            raw: Vec::new(),
            types: all,
            strings: vec![0],
        }
    }

    /// The `DATASEC` named `name` (`.maps`, `.ksyms`, ...), if present.
    pub fn datasec(&self, name: &str) -> Option<&[DataSecVar]> {
        self.types.iter().find_map(|t| match t {
            BtfType::DataSec { name: n, vars, .. } if n == name => Some(vars.as_slice()),
            _ => None,
        })
    }

    /// libbpf's `btf_fixup_datasec`: clang leaves the size of a global-data
    /// `DATASEC` and its variables' offsets 0 for the loader to fill from
    /// the ELF section and symbol table. Variables `offset_of` does not
    /// know keep their offset.
    pub fn fix_datasec(
        &mut self,
        section: &str,
        size: u32,
        offset_of: impl Fn(&str) -> Option<u32>,
    ) {
        let names: Vec<Option<String>> = self
            .types
            .iter()
            .map(|t| match t {
                BtfType::Var { name, .. } => Some(name.clone()),
                _ => None,
            })
            .collect();
        for t in &mut self.types {
            if let BtfType::DataSec {
                name,
                size: sec_size,
                vars,
            } = t
            {
                if name != section {
                    continue;
                }
                *sec_size = size;
                for v in vars.iter_mut() {
                    let var = names.get(v.type_id as usize).cloned().flatten();
                    if let Some(off) = var.as_deref().and_then(&offset_of) {
                        v.offset = off;
                    }
                }
            }
        }
    }

    /// Gives the global `VAR`s and `FUNC`s whose name `names` holds static
    /// linkage (libbpf's treatment of hidden-visibility globals), in one
    /// pass over the types.
    pub fn make_static(&mut self, names: &std::collections::HashSet<&str>) {
        for t in &mut self.types {
            match t {
                BtfType::Var {
                    name: n, linkage, ..
                }
                | BtfType::Func {
                    name: n, linkage, ..
                } if *linkage == Linkage::Global && names.contains(n.as_str()) => {
                    *linkage = Linkage::Static
                }
                _ => {}
            }
        }
    }

    /// Whether the `DATASEC` named `section` holds a variable that is not
    /// static (libbpf makes such a global-data map `BPF_F_MMAPABLE`).
    pub fn datasec_has_non_static_var(&self, section: &str) -> bool {
        self.datasec(section).is_some_and(|vars| {
            vars.iter().any(|v| {
                matches!(self.type_by_id(v.type_id),
                    Some(BtfType::Var { linkage, .. }) if *linkage != Linkage::Static)
            })
        })
    }

    /// The id of the `FUNC` named `name`.
    pub fn func_id(&self, name: &str) -> Option<u32> {
        self.types
            .iter()
            .position(|t| matches!(t, BtfType::Func { name: n, .. } if n == name))
            .map(|i| i as u32)
    }
}

/// Parses the type at `pos`; returns it and its encoded length.
fn parse_type(data: &[u8], pos: usize, strings: &[u8]) -> Result<(BtfType, usize), String> {
    let word = |i: usize| u32_at(data, pos + 4 * i).ok_or_else(|| "truncated".to_string());
    let name_of = |off: u32| {
        cstr_at(strings, off as usize)
            .map(str::to_string)
            .ok_or_else(|| format!("name offset {off:#x} is not a string"))
    };
    let name_off = word(0)?;
    let info = word(1)?;
    let size_or_type = word(2)?;
    let vlen = (info & 0xffff) as usize;
    let kind = (info >> 24) & 0x1f;
    let kind_flag = info >> 31 != 0;
    let base = 12;
    // Records trailing the common header: `vlen` entries of `rec` bytes each.
    let rec = |i: usize, rec_len: usize, field: usize| {
        u32_at(data, pos + base + i * rec_len + 4 * field).ok_or_else(|| "truncated".to_string())
    };
    let name = name_of(name_off)?;
    let ty = match kind {
        1 => BtfType::Int {
            name,
            size: size_or_type,
            encoding: word(3)?,
        },
        2 => BtfType::Ptr {
            target: size_or_type,
        },
        3 => BtfType::Array {
            elem: word(3)?,
            index: word(4)?,
            nelems: word(5)?,
        },
        4 | 5 => {
            let mut members = Vec::with_capacity(vlen.min(1024));
            for i in 0..vlen {
                let raw_off = rec(i, 12, 2)?;
                members.push(Member {
                    name: name_of(rec(i, 12, 0)?)?,
                    type_id: rec(i, 12, 1)?,
                    // With kind_flag set the top 8 bits hold a bitfield size.
                    bit_offset: if kind_flag {
                        raw_off & 0xff_ffff
                    } else {
                        raw_off
                    },
                    bitfield_size: if kind_flag { raw_off >> 24 } else { 0 },
                });
            }
            if kind == 4 {
                BtfType::Struct {
                    name,
                    size: size_or_type,
                    members,
                }
            } else {
                BtfType::Union {
                    name,
                    size: size_or_type,
                    members,
                }
            }
        }
        6 | 19 => {
            let rec_len = if kind == 6 { 8 } else { 12 };
            let mut values = Vec::with_capacity(vlen.min(1024));
            for i in 0..vlen {
                let lo = rec(i, rec_len, 1)?;
                let v = if kind == 6 {
                    lo as i32 as i64
                } else {
                    ((rec(i, rec_len, 2)? as u64) << 32 | lo as u64) as i64
                };
                values.push((name_of(rec(i, rec_len, 0)?)?, v));
            }
            BtfType::Enum {
                name,
                size: size_or_type,
                values,
                signed: kind_flag,
            }
        }
        7 => BtfType::Fwd {
            name,
            union: kind_flag,
        },
        8 => BtfType::Typedef {
            name,
            target: size_or_type,
        },
        9 => BtfType::Volatile {
            target: size_or_type,
        },
        10 => BtfType::Const {
            target: size_or_type,
        },
        11 => BtfType::Restrict {
            target: size_or_type,
        },
        12 => BtfType::Func {
            name,
            proto: size_or_type,
            linkage: Linkage::from_raw(vlen as u32),
        },
        13 => {
            let mut params = Vec::with_capacity(vlen.min(1024));
            for i in 0..vlen {
                params.push(Param {
                    name: name_of(rec(i, 8, 0)?)?,
                    type_id: rec(i, 8, 1)?,
                });
            }
            BtfType::FuncProto {
                ret: size_or_type,
                params,
            }
        }
        14 => BtfType::Var {
            name,
            target: size_or_type,
            linkage: Linkage::from_raw(word(3)?),
        },
        15 => {
            let mut vars = Vec::with_capacity(vlen.min(1024));
            for i in 0..vlen {
                vars.push(DataSecVar {
                    type_id: rec(i, 12, 0)?,
                    offset: rec(i, 12, 1)?,
                    size: rec(i, 12, 2)?,
                });
            }
            BtfType::DataSec {
                name,
                size: size_or_type,
                vars,
            }
        }
        16 => BtfType::Float {
            name,
            size: size_or_type,
        },
        17 => BtfType::DeclTag {
            name,
            target: size_or_type,
            component: word(3)? as i32,
        },
        18 => BtfType::TypeTag {
            name,
            target: size_or_type,
        },
        k => return Err(format!("unknown kind {k}")),
    };
    let trailing = match kind {
        1 | 14 | 17 => 4,
        3 => 12,
        4 | 5 | 15 | 19 => 12 * vlen,
        6 | 13 => 8 * vlen,
        _ => 0,
    };
    Ok((ty, base + trailing))
}
