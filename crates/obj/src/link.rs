//! Static linking of one program: its own code, followed by every function it
//! reaches through `call` or a function-pointer `lddw` (transitively), with all
//! relocations resolved to bpfjet's self-contained encoding:
//!
//! - map references → `lddw` src = `PSEUDO_MAP_IDX`, imm = map index;
//! - global data → `lddw` src = `PSEUDO_MAP_IDX_VALUE`, imm = map index,
//!   second-slot imm = byte offset into the value;
//! - local calls and function pointers → slot offsets relative to the next slot
//!   (`call` src = `CALL_LOCAL`, `lddw` src = `PSEUDO_FUNC`);
//! - kfunc externs → `call` src = `CALL_KFUNC`, imm = index into the kfunc table;
//! - a kfunc's address (`bpf_ksym_exists(kfunc)`) → `lddw` src =
//!   [`KSYM_ADDRESS_SRC`], imm = index into the kfunc table, for the runtime
//!   to resolve (it knows which kfuncs it provides); a `__weak` kernel
//!   variable → `lddw` 0 (bpfjet provides no kernel variables).
//!
//! Jumps never cross function boundaries, so copying whole functions keeps
//! them valid; only calls and function pointers need rewriting.

use std::collections::{HashMap, HashSet, VecDeque};

use bpfjet_isa::opcode::{
    CALL_HELPER, CALL_KFUNC, CALL_LOCAL, CLASS_JMP, JMP_CALL, LDDW, PSEUDO_BTF_ID, PSEUDO_FUNC,
    PSEUDO_MAP_IDX, PSEUDO_MAP_IDX_VALUE, SRC_K,
};

/// `lddw` src of a kfunc's address, imm = its index in `Object::kfuncs`
/// (the kernel's `BPF_PSEUDO_BTF_ID`, a kernel symbol's id, which libbpf
/// puts there for a kfunc that exists). The runtime replaces it by a
/// constant before verification: non-zero when it provides the kfunc, 0
/// for a missing `__weak` one.
pub const KSYM_ADDRESS_SRC: u8 = PSEUDO_BTF_ID;
use bpfjet_isa::RawInsn;

use crate::btf::{Btf, BtfExt, BtfType};
use crate::core::CoreRelo;
use crate::elf::{reloc, Elf, Reloc, SymKind, Symbol};
use crate::error::{malformed, ObjError};
use crate::maps::MapTable;
use crate::program::{FuncInfo, LineInfo};

const CALL: u8 = CLASS_JMP | JMP_CALL | SRC_K;

/// A function symbol in an executable section; offsets in slots.
#[derive(Debug)]
pub(crate) struct Function {
    pub name: String,
    pub section: usize,
    pub start: usize,
    pub len: usize,
    /// A `static` function (`STB_LOCAL`).
    pub local: bool,
}

/// All functions of the object, findable by the slot they contain.
pub(crate) struct CodeIndex {
    pub funcs: Vec<Function>,
    /// Per section, function indices sorted by start.
    by_section: HashMap<usize, Vec<usize>>,
}

impl CodeIndex {
    pub fn build(elf: &Elf) -> Result<CodeIndex, ObjError> {
        let mut funcs = Vec::new();
        let mut by_section: HashMap<usize, Vec<usize>> = HashMap::new();
        for sym in &elf.symbols {
            let Some(section) = sym.section else { continue };
            let Some(sec) = elf.sections.get(section).filter(|s| s.executable) else {
                continue;
            };
            if sym.kind != SymKind::Func || sym.size == 0 {
                continue;
            }
            let in_range = sym
                .value
                .checked_add(sym.size)
                .is_some_and(|end| end <= sec.data.len() as u64);
            if sym.value % 8 != 0 || sym.size % 8 != 0 || !in_range {
                return Err(malformed(format!(
                    "function `{}` ({:#x}+{:#x}) is misaligned or outside section `{}`",
                    sym.name, sym.value, sym.size, sec.name
                )));
            }
            by_section.entry(section).or_default().push(funcs.len());
            funcs.push(Function {
                name: sym.name.clone(),
                section,
                start: (sym.value / 8) as usize,
                len: (sym.size / 8) as usize,
                local: sym.local,
            });
        }
        for list in by_section.values_mut() {
            list.sort_by_key(|&f| funcs[f].start);
        }
        Ok(CodeIndex { funcs, by_section })
    }

    /// The function of `section` whose body contains `slot`.
    pub fn containing(&self, section: usize, slot: i64) -> Option<usize> {
        let slot = usize::try_from(slot).ok()?;
        self.by_section.get(&section)?.iter().copied().find(|&f| {
            let func = &self.funcs[f];
            slot >= func.start && slot < func.start + func.len
        })
    }
}

pub(crate) struct LinkedProgram {
    pub insns: Vec<RawInsn>,
    pub func_info: Vec<FuncInfo>,
    pub line_info: Vec<LineInfo>,
    pub core_relos: Vec<CoreRelo>,
}

/// Links programs of one object; owns the object-wide kfunc table so that
/// every program numbers kfuncs the same way.
pub(crate) struct Linker<'a> {
    pub elf: &'a Elf<'a>,
    pub maps: &'a MapTable,
    pub btf: Option<&'a Btf>,
    pub ext: Option<&'a BtfExt>,
    pub code: &'a CodeIndex,
    pub kfuncs: Vec<String>,
    /// The `__weak` ones among `kfuncs`.
    pub weak_kfuncs: Vec<String>,
}

/// A slot offset to patch once every function has its place.
struct Fixup {
    pos: usize,
    func: usize,
    within: usize,
}

impl Linker<'_> {
    pub fn link(&mut self, entry: usize) -> Result<LinkedProgram, ObjError> {
        let program = self.code.funcs[entry].name.clone();
        let mut insns = Vec::new();
        let mut placed: HashMap<usize, usize> = HashMap::new();
        let mut order = Vec::new();
        let mut queued = HashSet::from([entry]);
        let mut queue = VecDeque::from([entry]);
        let mut fixups = Vec::new();
        while let Some(f) = queue.pop_front() {
            let at = insns.len();
            placed.insert(f, at);
            order.push(f);
            let callees = self.append(&program, f, &mut insns, &mut fixups)?;
            for callee in callees {
                if queued.insert(callee) {
                    queue.push_back(callee);
                }
            }
        }
        for fx in fixups {
            let target = placed[&fx.func] + fx.within;
            let rel = target as i64 - (fx.pos as i64 + 1);
            insns[fx.pos].imm = i32::try_from(rel)
                .map_err(|_| malformed(format!("program `{program}` is too large to link")))?;
        }
        let (func_info, line_info) = self.debug_info(&order, &placed);
        let core_relos = self.core_relos(&order, &placed)?;
        Ok(LinkedProgram {
            insns,
            func_info,
            line_info,
            core_relos,
        })
    }

    /// Copies function `f` to the end of `out`, rewriting its relocated
    /// instructions; returns the functions it refers to.
    fn append(
        &mut self,
        program: &str,
        f: usize,
        out: &mut Vec<RawInsn>,
        fixups: &mut Vec<Fixup>,
    ) -> Result<Vec<usize>, ObjError> {
        // Copies of the shared references, so `self` stays free to be borrowed mutably.
        let (code, elf) = (self.code, self.elf);
        let func = &code.funcs[f];
        let data = elf.sections[func.section].data;
        let at = out.len();
        let bytes = &data[func.start * 8..(func.start + func.len) * 8];
        out.extend(
            bytes
                .chunks_exact(8)
                .map(|c| RawInsn::from_bytes(c.try_into().unwrap_or(&[0; 8]))),
        );
        let empty = Default::default();
        let relocs = elf.relocs.get(&func.section).unwrap_or(&empty);
        let byte_range = (func.start * 8) as u64..((func.start + func.len) * 8) as u64;
        let mut unused: HashSet<u64> = relocs.range(byte_range).map(|(&o, _)| o).collect();
        let mut callees = Vec::new();
        let mut pc = 0;
        while pc < func.len {
            let pos = at + pc;
            let sec_off = ((func.start + pc) * 8) as u64;
            let site = Site {
                section: func.section,
                offset: sec_off,
            };
            let reloc = relocs.get(&sec_off).copied();
            unused.remove(&sec_off);
            let opcode = out[pos].code;
            if opcode == LDDW {
                if pc + 1 >= func.len {
                    return Err(malformed(format!(
                        "function `{}` ends in the middle of an lddw",
                        func.name
                    )));
                }
                if let Some(r) = reloc {
                    if let Some(target) = self.relocate_lddw(&site, r, out, pos)? {
                        callees.push(target.func);
                        fixups.push(target.at(pos));
                    }
                }
                pc += 2;
                continue;
            }
            if opcode == CALL {
                let target = match reloc {
                    Some(r) => self.relocate_call(program, &site, r, &mut out[pos])?,
                    None if out[pos].src == CALL_LOCAL => {
                        // Calls within one section are resolved by clang.
                        let slot = (func.start + pc) as i64 + 1 + out[pos].imm as i64;
                        let callee = self.code.containing(func.section, slot).ok_or_else(|| {
                            ObjError::UndefinedFunction {
                                program: program.to_string(),
                                function: format!(
                                    "<slot {slot} of `{}`>",
                                    self.elf.section_name(func.section)
                                ),
                            }
                        })?;
                        Some(CodeRef::new(self.code, callee, slot))
                    }
                    None => None,
                };
                if let Some(target) = target {
                    callees.push(target.func);
                    fixups.push(target.at(pos));
                }
            } else if reloc.is_some() {
                return Err(site.bad(
                    self.elf,
                    "relocation on an instruction that is neither lddw nor call",
                ));
            }
            pc += 1;
        }
        if let Some(&offset) = unused.iter().min() {
            return Err(Site {
                section: func.section,
                offset,
            }
            .bad(self.elf, "relocation does not point at an instruction"));
        }
        Ok(callees)
    }

    fn symbol(&self, site: &Site, r: Reloc) -> Result<&Symbol, ObjError> {
        self.elf
            .symbol(r.symbol)
            .ok_or_else(|| site.bad(self.elf, &format!("symbol index {} out of range", r.symbol)))
    }

    /// Rewrites the `lddw` at `pos`; returns the function it points to, if any.
    fn relocate_lddw(
        &mut self,
        site: &Site,
        r: Reloc,
        out: &mut [RawInsn],
        pos: usize,
    ) -> Result<Option<CodeRef>, ObjError> {
        site.expect_type(self.elf, r, reloc::R_BPF_64_64)?;
        let sym = self.symbol(site, r)?;
        let addend = out[pos].imm as i64;
        // An `lddw` compiled as a function pointer takes a relocation
        // against code only (libbpf: "unexpected relo for insn").
        let target = sym.section.and_then(|s| self.elf.sections.get(s));
        if out[pos].src == PSEUDO_FUNC && !target.is_some_and(|s| s.executable) {
            let what = match (sym.name.as_str(), target) {
                ("", Some(t)) => format!("section `{}`", t.name),
                (name, _) => format!("`{name}`"),
            };
            return Err(site.bad(
                self.elf,
                &format!(
                    "lddw marked as a function pointer (src {PSEUDO_FUNC}) is relocated \
                     against {what}, which is not code"
                ),
            ));
        }
        let Some(section) = sym.section else {
            if let Some((map, offset)) = self.maps.kconfig_var(&sym.name) {
                out[pos].src = PSEUDO_MAP_IDX_VALUE;
                out[pos].imm = map as i32;
                out[pos + 1].imm = offset as i32 + addend as i32;
                return Ok(None);
            }
            if self.is_ksym_func(&sym.name) {
                // A kfunc's address (`bpf_ksym_exists(kfunc)`): which
                // kfuncs exist is the runtime's to say, at load
                // (`KSYM_ADDRESS_SRC`).
                let (name, weak) = (sym.name.clone(), sym.weak);
                out[pos].src = KSYM_ADDRESS_SRC;
                out[pos].imm = self.kfunc_index(&name, weak) as i32;
                out[pos + 1].imm = 0;
                return Ok(None);
            }
            if sym.weak && self.in_datasec(".ksyms", &sym.name) {
                // A weak kernel variable: bpfjet provides none, and a
                // loader resolves a missing weak one to 0 (libbpf does).
                out[pos].src = 0;
                out[pos].imm = 0;
                out[pos + 1].imm = 0;
                return Ok(None);
            }
            return Err(self.extern_variable(sym));
        };
        let at = sym.value as i64 + addend;
        if let Some(map) = u64::try_from(at)
            .ok()
            .and_then(|o| self.maps.def_at(section, o))
        {
            // libbpf leaves the second slot as compiled, and the kernel
            // refuses a map reference whose upper half is not zero
            // ("unrecognized bpf_ld_imm64 insn").
            if out[pos + 1].imm != 0 {
                return Err(site.bad(
                    self.elf,
                    &format!(
                        "lddw of map `{}` has {} in its second slot's imm, which must be 0 \
                         (the kernel refuses it: unrecognized bpf_ld_imm64 insn)",
                        self.maps.specs[map].name,
                        out[pos + 1].imm
                    ),
                ));
            }
            out[pos].src = PSEUDO_MAP_IDX;
            out[pos].imm = map as i32;
            return Ok(None);
        }
        if let Some(map) = self.maps.data_map(section) {
            let size = self.maps.specs[map].value_size as i64;
            if !(0..=size).contains(&at) {
                return Err(site.bad(
                    self.elf,
                    &format!(
                        "offset {at} is outside `{}` ({size} bytes)",
                        self.maps.specs[map].name
                    ),
                ));
            }
            out[pos].src = PSEUDO_MAP_IDX_VALUE;
            out[pos].imm = map as i32;
            out[pos + 1].imm = at as i32;
            return Ok(None);
        }
        if self.elf.sections.get(section).is_some_and(|s| s.executable) {
            if at % 8 != 0 {
                return Err(site.bad(self.elf, "function pointer is not instruction aligned"));
            }
            let slot = at / 8;
            let func = self
                .code
                .containing(section, slot)
                .ok_or_else(|| site.bad(self.elf, "function pointer to no function"))?;
            out[pos].src = PSEUDO_FUNC;
            out[pos + 1].imm = 0;
            return Ok(Some(CodeRef::new(self.code, func, slot)));
        }
        let what = if self.elf.section_name(section) == ".maps"
            || self.elf.section_name(section) == "maps"
        {
            format!(
                "no map is defined at `{}`+{at:#x}",
                self.elf.section_name(section)
            )
        } else {
            format!(
                "refers to `{}` in section `{}`, which is neither a map, global data nor code",
                self.elf.symbol_name(sym),
                self.elf.section_name(section)
            )
        };
        Err(site.bad(self.elf, &what))
    }

    fn extern_variable(&self, sym: &Symbol) -> ObjError {
        let kconfig = self.in_datasec(".kconfig", &sym.name);
        ObjError::UnsupportedExtern {
            name: sym.name.clone(),
            what: if kconfig {
                "__kconfig variable"
            } else {
                "__ksym variable"
            },
        }
    }

    /// `name`'s index in the object's kfunc table, added if new.
    fn kfunc_index(&mut self, name: &str, weak: bool) -> usize {
        if weak && !self.weak_kfuncs.iter().any(|k| k == name) {
            self.weak_kfuncs.push(name.to_string());
        }
        match self.kfuncs.iter().position(|k| k == name) {
            Some(i) => i,
            None => {
                self.kfuncs.push(name.to_string());
                self.kfuncs.len() - 1
            }
        }
    }

    /// Whether `name` is a function declared `__ksym` (a kfunc).
    fn is_ksym_func(&self, name: &str) -> bool {
        let Some(btf) = self.btf else { return false };
        btf.datasec(".ksyms").unwrap_or_default().iter().any(|v| {
            matches!(btf.type_by_id(v.type_id), Some(BtfType::Func { name: n, .. }) if n == name)
        })
    }

    fn in_datasec(&self, datasec: &str, name: &str) -> bool {
        let Some(btf) = self.btf else { return false };
        btf.datasec(datasec).unwrap_or_default().iter().any(|v| {
            matches!(
                btf.type_by_id(v.type_id),
                Some(BtfType::Func { name: n, .. } | BtfType::Var { name: n, .. }) if n == name
            )
        })
    }

    /// Rewrites a relocated `call`; returns the local function it calls, if any.
    fn relocate_call(
        &mut self,
        program: &str,
        site: &Site,
        r: Reloc,
        insn: &mut RawInsn,
    ) -> Result<Option<CodeRef>, ObjError> {
        site.expect_type(self.elf, r, reloc::R_BPF_64_32)?;
        let sym = self.symbol(site, r)?;
        let Some(section) = sym.section else {
            // Only externs declared `__ksym` are kfuncs; anything else would
            // have needed another object at link time.
            if !self.in_datasec(".ksyms", &sym.name) {
                return Err(ObjError::UndefinedFunction {
                    program: program.to_string(),
                    function: sym.name.clone(),
                });
            }
            let (name, weak) = (sym.name.clone(), sym.weak);
            let index = self.kfunc_index(&name, weak);
            insn.src = CALL_KFUNC;
            insn.off = 0;
            insn.imm = index as i32;
            return Ok(None);
        };
        if !self.elf.sections.get(section).is_some_and(|s| s.executable) {
            return Err(site.bad(
                self.elf,
                &format!("call to `{}`, which is not code", sym.name),
            ));
        }
        if sym.value % 8 != 0 {
            return Err(site.bad(self.elf, "call target is not instruction aligned"));
        }
        let slot = (sym.value / 8) as i64 + insn.imm as i64 + 1;
        let func =
            self.code
                .containing(section, slot)
                .ok_or_else(|| ObjError::UndefinedFunction {
                    program: program.to_string(),
                    function: self.elf.symbol_name(sym),
                })?;
        if insn.src == CALL_HELPER {
            // clang marks bpf-to-bpf calls itself; be explicit regardless.
            insn.src = CALL_LOCAL;
        }
        Ok(Some(CodeRef::new(self.code, func, slot)))
    }

    fn debug_info(
        &self,
        order: &[usize],
        placed: &HashMap<usize, usize>,
    ) -> (Vec<FuncInfo>, Vec<LineInfo>) {
        let mut funcs = Vec::new();
        let mut lines = Vec::new();
        for &f in order {
            let func = &self.code.funcs[f];
            let at = placed[&f];
            let section = self.elf.section_name(func.section);
            let range = func.start..func.start + func.len;
            let recorded = self
                .ext
                .and_then(|e| e.func_info.get(section))
                .and_then(|recs| recs.iter().find(|r| r.insn_off as usize == func.start * 8))
                .map(|r| r.type_id);
            funcs.push(FuncInfo {
                slot: at,
                name: func.name.clone(),
                btf_type_id: recorded.or_else(|| self.btf.and_then(|b| b.func_id(&func.name))),
            });
            let records = self.ext.and_then(|e| e.line_info.get(section));
            for rec in records.into_iter().flatten() {
                let slot = rec.insn_off as usize / 8;
                if range.contains(&slot) {
                    lines.push(LineInfo {
                        slot: at + slot - func.start,
                        file: rec.file.clone(),
                        line: rec.line,
                        column: rec.column,
                        source: rec.source.clone(),
                    });
                }
            }
        }
        lines.sort_by_key(|l| l.slot);
        (funcs, lines)
    }
}

impl Linker<'_> {
    /// The CO-RE relocations of the placed functions, moved from section
    /// byte offsets to slots of the linked program (applied later, by
    /// `core::relocate`, against the target BTF).
    fn core_relos(
        &self,
        order: &[usize],
        placed: &HashMap<usize, usize>,
    ) -> Result<Vec<CoreRelo>, ObjError> {
        let mut relos = Vec::new();
        for &f in order {
            let func = &self.code.funcs[f];
            let section = self.elf.section_name(func.section);
            let Some(records) = self.ext.and_then(|e| e.core_relos.get(section)) else {
                continue;
            };
            let range = func.start..func.start + func.len;
            for rec in records {
                let slot = rec.insn_off as usize / 8;
                if !range.contains(&slot) {
                    continue;
                }
                if rec.insn_off % 8 != 0 {
                    return Err(ObjError::BadRelocation {
                        section: section.to_string(),
                        offset: rec.insn_off as u64,
                        reason: "CO-RE relocation is not instruction aligned".into(),
                    });
                }
                relos.push(CoreRelo {
                    slot: placed[&f] + slot - func.start,
                    type_id: rec.type_id,
                    access: rec.access.clone(),
                    kind: rec.kind,
                });
            }
        }
        relos.sort_by_key(|r| r.slot);
        Ok(relos)
    }
}

/// A reference to slot `within` of function `func`.
struct CodeRef {
    func: usize,
    within: usize,
}

impl CodeRef {
    fn new(code: &CodeIndex, func: usize, slot: i64) -> CodeRef {
        CodeRef {
            func,
            within: slot as usize - code.funcs[func].start,
        }
    }

    fn at(&self, pos: usize) -> Fixup {
        Fixup {
            pos,
            func: self.func,
            within: self.within,
        }
    }
}

/// Where a relocation applies, for error messages.
struct Site {
    section: usize,
    offset: u64,
}

impl Site {
    fn bad(&self, elf: &Elf, reason: &str) -> ObjError {
        ObjError::BadRelocation {
            section: elf.section_name(self.section).to_string(),
            offset: self.offset,
            reason: reason.to_string(),
        }
    }

    fn expect_type(&self, elf: &Elf, r: Reloc, want: u32) -> Result<(), ObjError> {
        match r.r_type {
            t if t == want => Ok(()),
            reloc::R_BPF_64_64
            | reloc::R_BPF_64_ABS64
            | reloc::R_BPF_64_ABS32
            | reloc::R_BPF_64_NODYLD32
            | reloc::R_BPF_64_32 => {
                let reason = format!("relocation type {} does not fit this instruction", r.r_type);
                Err(self.bad(elf, &reason))
            }
            t => Err(ObjError::UnknownRelocation {
                section: elf.section_name(self.section).to_string(),
                offset: self.offset,
                r_type: t,
            }),
        }
    }
}
