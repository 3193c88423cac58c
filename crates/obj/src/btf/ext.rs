//! `.BTF.ext`: per-section function and line records. In an object file the
//! records' instruction offsets are byte offsets into the named ELF section;
//! the linker turns them into slots of the linked program.

use std::collections::HashMap;

use super::Btf;
use crate::bytes::{u16_at, u32_at};
use crate::error::ObjError;

const MAGIC: u16 = 0xeb9f;

/// One `bpf_func_info`: a function starts at `insn_off` and has BTF `FUNC` type `type_id`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuncRecord {
    pub insn_off: u32,
    pub type_id: u32,
}

/// One `bpf_line_info`, with its strings resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineRecord {
    pub insn_off: u32,
    pub file: String,
    pub source: String,
    pub line: u32,
    pub column: u32,
}

/// One `bpf_core_relo` as recorded by clang: the instruction at byte
/// `insn_off` of its section depends on `kind` applied to local type
/// `type_id` along `access` (`"0:1:2"`, indices into members and arrays).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoreReloRecord {
    pub insn_off: u32,
    pub type_id: u32,
    pub access: String,
    /// The raw `enum bpf_core_relo_kind`; checked when the relocation is applied.
    pub kind: u32,
}

/// Records grouped by the ELF section they describe.
#[derive(Clone, Debug, Default)]
pub struct BtfExt {
    pub func_info: HashMap<String, Vec<FuncRecord>>,
    pub line_info: HashMap<String, Vec<LineRecord>>,
    /// CO-RE relocations, in record order per section.
    pub core_relos: HashMap<String, Vec<CoreReloRecord>>,
}

fn err(reason: impl Into<String>) -> ObjError {
    ObjError::Btf {
        section: ".BTF.ext",
        reason: reason.into(),
    }
}

/// One info block: walks `(section name, records)` groups, handing each record's
/// bytes to `each`.
fn walk_block(
    data: &[u8],
    btf: &Btf,
    min_rec: usize,
    mut each: impl FnMut(&str, &[u8]) -> Result<(), ObjError>,
) -> Result<(), ObjError> {
    if data.is_empty() {
        return Ok(());
    }
    let rec_size = u32_at(data, 0).ok_or_else(|| err("truncated record size"))? as usize;
    if rec_size < min_rec {
        return Err(err(format!(
            "record size {rec_size} is smaller than {min_rec}"
        )));
    }
    let mut pos = 4;
    while pos < data.len() {
        let name_off = u32_at(data, pos).ok_or_else(|| err("truncated section header"))?;
        let count = u32_at(data, pos + 4).ok_or_else(|| err("truncated section header"))? as usize;
        let section = btf
            .string_at(name_off)
            .ok_or_else(|| err(format!("section name offset {name_off:#x} is not a string")))?
            .to_string();
        pos += 8;
        for _ in 0..count {
            let rec = data
                .get(pos..pos + rec_size)
                .ok_or_else(|| err(format!("records of `{section}` run past the end")))?;
            each(&section, rec)?;
            pos += rec_size;
        }
    }
    Ok(())
}

impl BtfExt {
    pub fn parse(data: &[u8], btf: &Btf) -> Result<BtfExt, ObjError> {
        let magic = u16_at(data, 0).ok_or_else(|| err("truncated header"))?;
        if magic != MAGIC {
            return Err(err(format!("bad magic {magic:#x}")));
        }
        let word = |i: usize| u32_at(data, 4 + 4 * i).ok_or_else(|| err("truncated header"));
        let hdr_len = word(0)? as usize;
        let block = |off: u32, len: u32, what: &str| {
            let start = hdr_len.checked_add(off as usize);
            let end = start.and_then(|s| s.checked_add(len as usize));
            start
                .zip(end)
                .and_then(|(s, e)| data.get(s..e))
                .ok_or_else(|| err(format!("{what} block lies outside the data")))
        };
        let mut ext = BtfExt::default();
        if hdr_len < 24 {
            return Err(err(format!("header length {hdr_len} is too short")));
        }
        walk_block(
            block(word(1)?, word(2)?, "func_info")?,
            btf,
            8,
            |sec, rec| {
                let r = FuncRecord {
                    insn_off: u32_at(rec, 0).unwrap_or_default(),
                    type_id: u32_at(rec, 4).unwrap_or_default(),
                };
                ext.func_info.entry(sec.to_string()).or_default().push(r);
                Ok(())
            },
        )?;
        walk_block(
            block(word(3)?, word(4)?, "line_info")?,
            btf,
            16,
            |sec, rec| {
                let field = |i: usize| u32_at(rec, 4 * i).unwrap_or_default();
                let text = |off: u32| btf.string_at(off).unwrap_or_default().to_string();
                let line_col = field(3);
                ext.line_info
                    .entry(sec.to_string())
                    .or_default()
                    .push(LineRecord {
                        insn_off: field(0),
                        file: text(field(1)),
                        source: text(field(2)),
                        line: line_col >> 10,
                        column: line_col & 0x3ff,
                    });
                Ok(())
            },
        )?;
        if hdr_len >= 32 {
            walk_block(
                block(word(5)?, word(6)?, "core_relo")?,
                btf,
                16,
                |sec, rec| {
                    let field = |i: usize| u32_at(rec, 4 * i).unwrap_or_default();
                    let access_off = field(2);
                    let access = btf.string_at(access_off).ok_or_else(|| {
                        err(format!(
                            "CO-RE relocation of `{sec}` at {:#x}: access string offset {access_off:#x} is not a string",
                            field(0)
                        ))
                    })?;
                    ext.core_relos
                        .entry(sec.to_string())
                        .or_default()
                        .push(CoreReloRecord {
                            insn_off: field(0),
                            type_id: field(1),
                            access: access.to_string(),
                            kind: field(3),
                        });
                    Ok(())
                },
            )?;
        }
        Ok(ext)
    }
}
