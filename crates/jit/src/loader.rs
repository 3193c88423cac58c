//! A small loader for the relocatable ELF objects LLVM emits (x86-64, small
//! PIC code model): it maps the allocated sections into one anonymous
//! mapping, gives every external symbol a GOT slot and a jump stub inside
//! that mapping (so 32-bit PC-relative calls always reach), applies the
//! relocations and makes the code executable. No LLVM is needed here, which
//! is what lets cached (and later AOT) objects run without compiling.

use crate::error::JitError;
use bpfjet_maps::page_size;
use object::elf;
use object::read::elf::ElfFile64;
use object::{
    Architecture, LittleEndian, Object, ObjectSection, ObjectSymbol, RelocationFlags,
    RelocationTarget, SectionFlags, SectionIndex, SymbolSection,
};
use std::collections::HashMap;

/// Native code in memory. Unmapped on drop.
pub(crate) struct Image {
    base: *mut u8,
    len: usize,
    /// Addresses of the object's global symbols.
    symbols: HashMap<String, usize>,
    /// The object's `.eh_frame`, registered with the unwinder (functions
    /// a forced unwind may cross: a fused pair's frame while the traced
    /// call it makes is cancelled).
    eh_frame: Option<usize>,
}

#[link(name = "gcc_s")]
extern "C" {
    /// Registers an `.eh_frame` block (ended by a zero length) with
    /// libgcc's unwinder.
    fn __register_frame(begin: *const u8);
    fn __deregister_frame(begin: *const u8);
}

// SAFETY: the mapping is owned exclusively and immutable after loading
// (executable part read-only; no writable sections are shared mutably by
// Rust code).
unsafe impl Send for Image {}
unsafe impl Sync for Image {}

impl Drop for Image {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` describe a mapping created by `load` and
        // unmapped only here; its unwind information, registered by
        // `load`, is withdrawn first.
        unsafe {
            if let Some(eh) = self.eh_frame {
                __deregister_frame(eh as *const u8);
            }
            libc::munmap(self.base.cast(), self.len);
        }
    }
}

impl Image {
    pub(crate) fn symbol(&self, name: &str) -> Option<usize> {
        self.symbols.get(name).copied()
    }

    pub(crate) fn code_bytes(&self) -> usize {
        self.len
    }
}

fn err(message: impl Into<String>) -> JitError {
    JitError::Loader(message.into())
}

fn align_up(v: usize, align: usize) -> usize {
    let align = align.max(1);
    v.div_ceil(align) * align
}

/// Where a symbol of the object points: a section offset or an external.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum SymRef {
    Local(SectionIndex, u64),
    External(String),
    Absolute(u64),
}

const STUB_SIZE: usize = 8;
const SHF_ALLOC: u64 = elf::SHF_ALLOC as u64;
const SHF_WRITE: u64 = elf::SHF_WRITE as u64;

/// Load `bytes` and resolve undefined symbols with `resolve`.
pub(crate) fn load(
    bytes: &[u8],
    resolve: &dyn Fn(&str) -> Option<usize>,
) -> Result<Image, JitError> {
    let file = ElfFile64::<LittleEndian>::parse(bytes).map_err(|e| err(e.to_string()))?;
    if file.architecture() != Architecture::X86_64 {
        return Err(err(format!(
            "objects for {:?} are not supported yet",
            file.architecture()
        )));
    }
    // 1. The sections to load: read-only/executable ones, then writable ones.
    let mut ro = Vec::new();
    let mut rw = Vec::new();
    for section in file.sections() {
        let SectionFlags::Elf { sh_flags } = section.flags() else {
            continue;
        };
        if sh_flags & SHF_ALLOC == 0 || section.size() == 0 {
            continue;
        }
        if sh_flags & SHF_WRITE != 0 {
            rw.push(section.index());
        } else {
            ro.push(section.index());
        }
    }
    let loaded: Vec<SectionIndex> = ro.iter().chain(&rw).copied().collect();
    // 2. Which symbols need a GOT slot (and stub): every external one and
    //    every target of a GOT-relative relocation.
    let symref = |target: RelocationTarget| -> Result<SymRef, JitError> {
        match target {
            RelocationTarget::Section(idx) => Ok(SymRef::Local(idx, 0)),
            RelocationTarget::Symbol(idx) => {
                let sym = file.symbol_by_index(idx).map_err(|e| err(e.to_string()))?;
                match sym.section() {
                    SymbolSection::Section(s) => Ok(SymRef::Local(s, sym.address())),
                    SymbolSection::Absolute => Ok(SymRef::Absolute(sym.address())),
                    SymbolSection::Undefined => Ok(SymRef::External(
                        sym.name().map_err(|e| err(e.to_string()))?.to_string(),
                    )),
                    other => Err(err(format!("unsupported symbol section {other:?}"))),
                }
            }
            other => Err(err(format!("unsupported relocation target {other:?}"))),
        }
    };
    let mut got: Vec<SymRef> = Vec::new();
    let mut got_index: HashMap<SymRef, usize> = HashMap::new();
    for &idx in &loaded {
        let section = file.section_by_index(idx).map_err(|e| err(e.to_string()))?;
        for (_, reloc) in section.relocations() {
            let RelocationFlags::Elf { r_type } = reloc.flags() else {
                return Err(err("non-ELF relocation"));
            };
            let target = symref(reloc.target())?;
            let needs_got = matches!(target, SymRef::External(_))
                || matches!(
                    r_type,
                    elf::R_X86_64_GOTPCREL | elf::R_X86_64_GOTPCRELX | elf::R_X86_64_REX_GOTPCRELX
                );
            if needs_got && !got_index.contains_key(&target) {
                got_index.insert(target.clone(), got.len());
                got.push(target);
            }
        }
    }
    // 3. Layout: read-only sections, GOT, stubs | page | writable sections.
    let mut placed: HashMap<SectionIndex, usize> = HashMap::new();
    let mut cursor = 0usize;
    let size_of = |idx: SectionIndex| -> usize {
        file.section_by_index(idx)
            .map(|s| s.size() as usize)
            .unwrap_or(0)
    };
    let align_of = |idx: SectionIndex| -> usize {
        file.section_by_index(idx)
            .map(|s| s.align() as usize)
            .unwrap_or(1)
    };
    let eh_frame = file.section_by_name(".eh_frame").map(|s| s.index());
    // `.eh_frame` gets four zero bytes after it: the end marker a linker
    // would add, which `__register_frame` stops at.
    let size_of = |idx: SectionIndex| size_of(idx) + if Some(idx) == eh_frame { 4 } else { 0 };
    for &idx in &ro {
        cursor = align_up(cursor, align_of(idx));
        placed.insert(idx, cursor);
        cursor += size_of(idx);
    }
    let got_start = align_up(cursor, 16);
    let stubs_start = got_start + got.len() * 8;
    let ro_end = stubs_start + got.len() * STUB_SIZE;
    let rx_len = align_up(ro_end.max(1), page_size());
    cursor = rx_len;
    for &idx in &rw {
        cursor = align_up(cursor, align_of(idx));
        placed.insert(idx, cursor);
        cursor += size_of(idx);
    }
    let total = align_up(cursor, page_size());
    // 3. Map and copy.
    // SAFETY: an anonymous private mapping with no address hint.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            total,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(err("mmap failed"));
    }
    let mut image = Image {
        base: base.cast(),
        len: total,
        symbols: HashMap::new(),
        eh_frame: None,
    };
    let base_addr = image.base as usize;
    // SAFETY: the mapping is `total` bytes, readable and writable, and all
    // offsets below were laid out inside it.
    let mem = unsafe { std::slice::from_raw_parts_mut(image.base, total) };
    for &idx in &loaded {
        let section = file.section_by_index(idx).map_err(|e| err(e.to_string()))?;
        let data = section.data().map_err(|e| err(e.to_string()))?;
        let off = placed[&idx];
        if !data.is_empty() {
            mem.get_mut(off..off + data.len())
                .ok_or_else(|| err("section outside the image"))?
                .copy_from_slice(data);
        }
    }
    let address = |target: &SymRef| -> Result<usize, JitError> {
        match target {
            SymRef::Local(idx, value) => placed
                .get(idx)
                .map(|off| base_addr + off + *value as usize)
                .ok_or_else(|| err(format!("reference to unloaded section {idx:?}"))),
            SymRef::Absolute(value) => Ok(*value as usize),
            SymRef::External(name) => {
                resolve(name).ok_or_else(|| err(format!("undefined symbol {name}")))
            }
        }
    };
    for (i, target) in got.iter().enumerate() {
        let value = address(target)? as u64;
        let slot = got_start + i * 8;
        mem[slot..slot + 8].copy_from_slice(&value.to_le_bytes());
        // jmp *[rip + disp32], where rip is the end of this 6-byte insn.
        let stub = stubs_start + i * STUB_SIZE;
        let disp = slot as i64 - (stub as i64 + 6);
        let disp = i32::try_from(disp).map_err(|_| err("stub displacement"))?;
        mem[stub..stub + 2].copy_from_slice(&[0xff, 0x25]);
        mem[stub + 2..stub + 6].copy_from_slice(&disp.to_le_bytes());
        mem[stub + 6..stub + 8].copy_from_slice(&[0xcc, 0xcc]);
    }
    // 4. Relocate.
    for &idx in &loaded {
        let section = file.section_by_index(idx).map_err(|e| err(e.to_string()))?;
        let sec_off = placed[&idx];
        for (offset, reloc) in section.relocations() {
            let RelocationFlags::Elf { r_type } = reloc.flags() else {
                return Err(err("non-ELF relocation"));
            };
            let target = symref(reloc.target())?;
            let a = reloc.addend();
            let at = sec_off + offset as usize;
            let p = (base_addr + at) as i64;
            let got_slot = got_index
                .get(&target)
                .map(|i| base_addr + got_start + i * 8);
            let stub = got_index
                .get(&target)
                .map(|i| base_addr + stubs_start + i * STUB_SIZE);
            let direct = || -> Result<i64, JitError> {
                Ok(match (&target, stub) {
                    (SymRef::External(_), Some(stub)) => stub as i64,
                    _ => address(&target)? as i64,
                })
            };
            let write32 = |mem: &mut [u8], v: i64| -> Result<(), JitError> {
                let v =
                    i32::try_from(v).map_err(|_| err(format!("relocation {r_type} overflows")))?;
                mem.get_mut(at..at + 4)
                    .ok_or_else(|| err("relocation outside the image"))?
                    .copy_from_slice(&v.to_le_bytes());
                Ok(())
            };
            match r_type {
                elf::R_X86_64_64 => {
                    let v = (address(&target)? as i64).wrapping_add(a) as u64;
                    mem.get_mut(at..at + 8)
                        .ok_or_else(|| err("relocation outside the image"))?
                        .copy_from_slice(&v.to_le_bytes());
                }
                elf::R_X86_64_PC64 => {
                    let v = (address(&target)? as i64).wrapping_add(a).wrapping_sub(p) as u64;
                    mem.get_mut(at..at + 8)
                        .ok_or_else(|| err("relocation outside the image"))?
                        .copy_from_slice(&v.to_le_bytes());
                }
                elf::R_X86_64_PC32 | elf::R_X86_64_PLT32 => {
                    write32(mem, direct()?.wrapping_add(a).wrapping_sub(p))?;
                }
                elf::R_X86_64_GOTPCREL | elf::R_X86_64_GOTPCRELX | elf::R_X86_64_REX_GOTPCRELX => {
                    let slot = got_slot.ok_or_else(|| err("missing GOT slot"))? as i64;
                    write32(mem, slot.wrapping_add(a).wrapping_sub(p))?;
                }
                other => return Err(err(format!("unsupported relocation type {other}"))),
            }
        }
    }
    // 5. Symbols, then protections.
    for sym in file.symbols() {
        if let (SymbolSection::Section(idx), Ok(name)) = (sym.section(), sym.name()) {
            if sym.is_global() {
                if let Some(off) = placed.get(&idx) {
                    image
                        .symbols
                        .insert(name.to_string(), base_addr + off + sym.address() as usize);
                }
            }
        }
    }
    // SAFETY: protecting a prefix of our own mapping.
    let rc =
        unsafe { libc::mprotect(image.base.cast(), rx_len, libc::PROT_READ | libc::PROT_EXEC) };
    if rc != 0 {
        return Err(err("mprotect failed"));
    }
    if let Some(off) = eh_frame.and_then(|idx| placed.get(&idx)) {
        let eh = base_addr + off;
        // SAFETY: the relocated `.eh_frame` with its zero end marker,
        // inside the mapping, which stays until `Drop` deregisters it.
        unsafe { __register_frame(eh as *const u8) };
        image.eh_frame = Some(eh);
    }
    Ok(image)
}
