//! The ELF layer: sections, symbols and relocations of a relocatable BPF object,
//! read with the `object` crate (which reports malformed input as errors) and
//! copied into plain structs so the rest of the crate never touches ELF types.

use std::collections::{BTreeMap, HashMap};

use object::elf;
use object::read::elf::{FileHeader, Rel as _, SectionHeader as _, Sym as _};
use object::LittleEndian;

use crate::error::{malformed, ObjError};

const EM_BPF: u16 = 247;
/// `e_ident` indices of the file class and data encoding.
const EI_CLASS: usize = 4;
const EI_DATA: usize = 5;

/// BPF relocation types (`R_BPF_*` in LLVM's `ELFRelocs/BPF.def`).
pub(crate) mod reloc {
    /// 64-bit immediate of an `lddw` (maps, globals, function pointers).
    pub const R_BPF_64_64: u32 = 1;
    /// 64-bit absolute data (pointers in `.maps` initialisers, debug info).
    pub const R_BPF_64_ABS64: u32 = 2;
    /// 32-bit absolute data.
    pub const R_BPF_64_ABS32: u32 = 3;
    /// 32-bit data that a dynamic loader leaves alone (`.BTF`, `.BTF.ext`).
    pub const R_BPF_64_NODYLD32: u32 = 4;
    /// 32-bit pc-relative immediate of a `call`.
    pub const R_BPF_64_32: u32 = 10;
}

#[derive(Debug)]
pub(crate) struct Section<'a> {
    pub name: String,
    pub sh_type: u32,
    pub executable: bool,
    pub size: u64,
    /// Empty for `SHT_NOBITS` (`.bss`).
    pub data: &'a [u8],
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SymKind {
    Func,
    Object,
    Section,
    Other,
}

#[derive(Debug)]
pub(crate) struct Symbol {
    pub name: String,
    /// Defining section; `None` for undefined (extern) and special symbols.
    pub section: Option<usize>,
    pub value: u64,
    pub size: u64,
    pub kind: SymKind,
    /// `STB_WEAK` (an extern declared `__weak`: a loader resolves it to 0
    /// when nothing provides it).
    pub weak: bool,
    /// `STB_LOCAL` (`static` in C).
    pub local: bool,
    /// `STV_HIDDEN` or `STV_INTERNAL`: global to the object, invisible
    /// outside it; libbpf treats such a variable or function as static.
    pub hidden: bool,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Reloc {
    pub r_type: u32,
    pub symbol: usize,
}

pub(crate) struct Elf<'a> {
    pub sections: Vec<Section<'a>>,
    pub symbols: Vec<Symbol>,
    /// Relocations by the section they apply to, keyed by byte offset.
    pub relocs: HashMap<usize, BTreeMap<u64, Reloc>>,
}

impl<'a> Elf<'a> {
    pub fn parse(data: &'a [u8]) -> Result<Elf<'a>, ObjError> {
        if data.get(..4) != Some(&elf::ELFMAG[..]) {
            return Err(ObjError::NotElf);
        }
        match data.get(EI_CLASS) {
            Some(&elf::ELFCLASS64) => {}
            Some(_) => return Err(ObjError::UnsupportedElf("32-bit ELF")),
            None => return Err(malformed("truncated ELF header")),
        }
        match data.get(EI_DATA) {
            Some(&elf::ELFDATA2LSB) => {}
            Some(_) => return Err(ObjError::UnsupportedElf("big-endian ELF")),
            None => return Err(malformed("truncated ELF header")),
        }
        let e = |err: object::read::Error| malformed(err.to_string());
        let header = elf::FileHeader64::<LittleEndian>::parse(data).map_err(e)?;
        let endian = header.endian().map_err(e)?;
        let machine = header.e_machine(endian);
        if machine != EM_BPF {
            return Err(ObjError::NotBpf { machine });
        }
        let table = header.sections(endian, data).map_err(e)?;

        let mut sections = Vec::with_capacity(table.len());
        let mut relocs: HashMap<usize, BTreeMap<u64, Reloc>> = HashMap::new();
        for (index, sh) in table.iter().enumerate() {
            let name = table.section_name(endian, sh).map_err(e)?;
            let name = String::from_utf8_lossy(name).into_owned();
            let bytes = sh
                .data(endian, data)
                .map_err(|err| malformed(format!("section [{index}] `{name}`: {err}")))?;
            if let Some((rels, _symtab)) = sh.rel(endian, data).map_err(e)? {
                // `sh_info` names the section the relocations apply to.
                let entry = relocs.entry(sh.sh_info(endian) as usize).or_default();
                for r in rels {
                    entry.insert(
                        r.r_offset(endian),
                        Reloc {
                            r_type: r.r_type(endian),
                            symbol: r.r_sym(endian) as usize,
                        },
                    );
                }
            }
            sections.push(Section {
                name,
                sh_type: sh.sh_type(endian),
                executable: sh.sh_flags(endian) & u64::from(elf::SHF_EXECINSTR) != 0,
                size: sh.sh_size(endian),
                data: bytes,
            });
        }

        let symtab = table.symbols(endian, data, elf::SHT_SYMTAB).map_err(e)?;
        let mut symbols = Vec::with_capacity(symtab.len());
        for sym in symtab.iter() {
            let name = sym.name(endian, symtab.strings()).map_err(e)?;
            let shndx = sym.st_shndx(endian);
            let in_section = shndx != elf::SHN_UNDEF && shndx < elf::SHN_LORESERVE;
            symbols.push(Symbol {
                name: String::from_utf8_lossy(name).into_owned(),
                section: in_section.then_some(shndx as usize),
                value: sym.st_value(endian),
                size: sym.st_size(endian),
                kind: match sym.st_type() {
                    elf::STT_FUNC => SymKind::Func,
                    elf::STT_OBJECT => SymKind::Object,
                    elf::STT_SECTION => SymKind::Section,
                    _ => SymKind::Other,
                },
                weak: sym.st_bind() == elf::STB_WEAK,
                local: sym.st_bind() == elf::STB_LOCAL,
                hidden: matches!(sym.st_other() & 3, elf::STV_HIDDEN | elf::STV_INTERNAL),
            });
        }
        Ok(Elf {
            sections,
            symbols,
            relocs,
        })
    }

    pub fn section_by_name(&self, name: &str) -> Option<(usize, &Section<'a>)> {
        self.sections
            .iter()
            .enumerate()
            .find(|(_, s)| s.name == name)
    }

    pub fn section_name(&self, index: usize) -> &str {
        self.sections
            .get(index)
            .map_or("<bad section>", |s| s.name.as_str())
    }

    pub fn symbol(&self, index: usize) -> Option<&Symbol> {
        self.symbols.get(index)
    }

    /// A display name for a symbol: its own, or its section's for section symbols.
    pub fn symbol_name(&self, sym: &Symbol) -> String {
        match (sym.kind, sym.section) {
            (SymKind::Section, Some(s)) => self.section_name(s).to_string(),
            _ => sym.name.clone(),
        }
    }
}
