//! `PATH:SYMBOL[+OFF]` → an address in this process.
//!
//! PATH is resolved as libbpf does for uprobes: a path with a '/' is used as
//! is; a bare name (`libc`, `libc.so.6`) is looked up among the objects the
//! process has loaded, then in the ld.so directories. The symbol comes from
//! `.symtab` or `.dynsym` of the file on disk, or from the `.symtab` of its
//! detached debug file (a stripped library's, e.g. Debian's `libc6-dbg`:
//! found by build id under `/usr/lib/debug/.build-id`, or by
//! `.gnu_debuglink` as gdb looks for it), where bcc and bpftrace find the
//! names of functions a stripped file does not export; its run-time
//! address is the object's load bias (from `dl_iterate_phdr`) plus the
//! symbol's value.

use crate::ProbeError;
use object::{Object, ObjectSymbol, SymbolKind};
use std::collections::HashMap;
use std::ffi::CStr;
use std::path::{Path, PathBuf};

/// A parsed `uprobe/PATH:SYMBOL[+OFF]` target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UprobeTarget {
    pub path: String,
    pub symbol: String,
    pub offset: u64,
}

impl UprobeTarget {
    /// Parses `PATH:SYMBOL[+OFF]` (OFF decimal or 0x-hex).
    pub fn parse(spec: &str) -> Result<Self, ProbeError> {
        let bad = || ProbeError::BadTarget { spec: spec.into() };
        let (path, rest) = spec.rsplit_once(':').ok_or_else(bad)?;
        let (symbol, offset) = match rest.split_once('+') {
            Some((s, off)) => {
                let off = off.trim();
                let v = if let Some(h) = off.strip_prefix("0x") {
                    u64::from_str_radix(h, 16)
                } else {
                    off.parse()
                };
                (s, v.map_err(|_| bad())?)
            }
            None => (rest, 0),
        };
        if path.is_empty() || symbol.is_empty() {
            return Err(bad());
        }
        Ok(UprobeTarget {
            path: path.into(),
            symbol: symbol.into(),
            offset,
        })
    }
}

/// An ELF object mapped into this process.
#[derive(Debug, Clone)]
pub struct LoadedObject {
    /// Canonical path on disk (the main program's is /proc/self/exe's target).
    pub path: PathBuf,
    /// Load bias: run-time address minus ELF virtual address.
    pub bias: u64,
}

/// The objects of this process, main program first.
pub fn loaded_objects() -> Vec<LoadedObject> {
    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        let out = &mut *(data as *mut Vec<LoadedObject>);
        let info = &*info;
        let name = if info.dlpi_name.is_null() {
            ""
        } else {
            CStr::from_ptr(info.dlpi_name).to_str().unwrap_or("")
        };
        let path = if name.is_empty() {
            if !out.is_empty() {
                // The vDSO and other nameless entries after the main program.
                return 0;
            }
            std::fs::read_link("/proc/self/exe").unwrap_or_default()
        } else {
            PathBuf::from(name)
        };
        let path = path.canonicalize().unwrap_or(path);
        out.push(LoadedObject {
            path,
            bias: info.dlpi_addr,
        });
        0
    }
    let mut out: Vec<LoadedObject> = Vec::new();
    // SAFETY: the callback only reads the entries it is given.
    unsafe { libc::dl_iterate_phdr(Some(visit), &mut out as *mut _ as *mut libc::c_void) };
    out
}

const LD_SO_DIRS: &[&str] = &[
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
    "/usr/local/lib",
];

/// Candidate file names for a bare library name, as libbpf accepts them.
fn library_names(name: &str) -> Vec<String> {
    let mut v = vec![name.to_string()];
    if !name.contains(".so") {
        let base = if name.starts_with("lib") {
            name.to_string()
        } else {
            format!("lib{name}")
        };
        v.push(format!("{base}.so"));
        v.push(format!("{base}.so.6"));
        v.push(format!("{base}.so.1"));
        v.push(format!("{base}.so.0"));
    }
    v
}

/// Whether the file starts with the ELF magic.
fn is_elf(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path).is_ok_and(|mut f| f.read_exact(&mut magic).is_ok())
        && magic == *b"\x7fELF"
}

/// Resolves the PATH part of a target to a file. `objects` are the
/// process's loaded objects (empty when resolving before the target runs).
pub fn resolve_path(path: &str, objects: &[LoadedObject]) -> Result<PathBuf, ProbeError> {
    if path.contains('/') {
        let p = PathBuf::from(path);
        return Ok(p.canonicalize().unwrap_or(p));
    }
    let names = library_names(path);
    for o in objects {
        let file = o.path.file_name().and_then(|f| f.to_str()).unwrap_or("");
        if names.iter().any(|n| file == n)
            || (!path.contains(".so")
                && file.starts_with(&format!("{}.so", names[1].trim_end_matches(".so"))))
        {
            return Ok(o.path.clone());
        }
    }
    for dir in LD_SO_DIRS {
        for n in &names {
            let p = Path::new(dir).join(n);
            // `libc.so` in a lib directory is a linker script for the
            // static linker, not the library: skip what is not ELF.
            if p.is_file() && is_elf(&p) {
                return Ok(p.canonicalize().unwrap_or(p));
            }
        }
    }
    Err(ProbeError::LibraryNotFound { name: path.into() })
}

/// A function symbol found in a file.
#[derive(Debug, Clone, Copy)]
pub struct FileSymbol {
    /// ELF virtual address (st_value).
    pub vaddr: u64,
    /// st_size; 0 when the ELF does not say.
    pub size: u64,
}

/// Looks `symbol` up in `.symtab`, then `.dynsym`, of the ELF at `path`.
pub fn file_symbol(path: &Path, symbol: &str) -> Result<FileSymbol, ProbeError> {
    let shown = path.display().to_string();
    let table = symbol_table(path)?;
    match table.function(symbol) {
        Some(Some(found)) => return Ok(*found),
        Some(None) => {
            return Err(ProbeError::NotAFunction {
                path: shown,
                symbol: symbol.into(),
            })
        }
        None => {}
    }
    let hint = if !table.has_static_symbols && table.debug().is_none() {
        if table.has_any_symbol {
            " (the file is stripped: only exported symbols of .dynsym are visible)"
        } else {
            " (the file is stripped: it has no symbol table)"
        }
    } else {
        ""
    };
    Err(ProbeError::SymbolNotFound {
        path: shown,
        symbol: symbol.into(),
        hint,
    })
}

/// Defined symbols by name: the first definition in table order, `None`
/// when it is not a function; and every named function (start, size,
/// name) in the same order, what maps an address back to its function.
#[derive(Default)]
struct Symbols {
    functions: HashMap<String, Option<FileSymbol>>,
    by_order: Vec<(u64, u64, String)>,
}

impl Symbols {
    fn add(&mut self, sym: object::Symbol<'_, '_>) {
        let Ok(name) = sym.name() else { return };
        if sym.is_undefined() || name.is_empty() {
            return;
        }
        let text = sym.kind() == SymbolKind::Text;
        if text {
            self.by_order
                .push((sym.address(), sym.size(), name.to_string()));
        }
        if self.functions.contains_key(name) {
            return;
        }
        let found = text.then(|| FileSymbol {
            vaddr: sym.address(),
            size: sym.size(),
        });
        self.functions.insert(name.to_string(), found);
    }

    /// The function holding `vaddr` and the offset into it, preferring
    /// the one that starts exactly there.
    fn covering(&self, vaddr: u64) -> Option<(String, u64)> {
        let mut best: Option<(String, u64)> = None;
        for (start, size, name) in &self.by_order {
            let (start, size) = (*start, *size);
            let inside = vaddr == start || (vaddr > start && vaddr < start + size);
            if inside && best.as_ref().is_none_or(|(_, off)| vaddr - start < *off) {
                best = Some((name.clone(), vaddr - start));
            }
        }
        best
    }
}

/// The symbols of one ELF file: its `.symtab` then `.dynsym`, and for a
/// stripped file (no `.symtab`) its detached debug file's `.symtab`, read
/// only when a lookup misses the file's own (a traced process resolves
/// libc's exported wrappers at every start: the debug file, megabytes,
/// is not read for them).
struct SymbolTable {
    path: PathBuf,
    own: Symbols,
    has_static_symbols: bool,
    has_any_symbol: bool,
    debug: std::sync::OnceLock<Option<Symbols>>,
}

impl SymbolTable {
    /// The debug file's symbols of a stripped file, read once.
    fn debug(&self) -> Option<&Symbols> {
        if self.has_static_symbols {
            return None;
        }
        self.debug
            .get_or_init(|| {
                let data = std::fs::read(&self.path).ok()?;
                let file = object::File::parse(&*data).ok()?;
                let debug = debug_file(&self.path, &file)?;
                let dfile = object::File::parse(&*debug).ok()?;
                let mut symbols = Symbols::default();
                dfile.symbols().for_each(|s| symbols.add(s));
                (!symbols.by_order.is_empty()).then_some(symbols)
            })
            .as_ref()
    }

    fn function(&self, name: &str) -> Option<&Option<FileSymbol>> {
        self.own
            .functions
            .get(name)
            .or_else(|| self.debug()?.functions.get(name))
    }

    fn covering(&self, vaddr: u64) -> Option<(String, u64)> {
        self.own
            .covering(vaddr)
            .or_else(|| self.debug()?.covering(vaddr))
    }
}

/// The detached debug file of an ELF file (its bytes): by build id,
/// `/usr/lib/debug/.build-id/NN/REST.debug`; else by `.gnu_debuglink`
/// NAME with a matching CRC, next to the file, in its `.debug`
/// directory, or under `/usr/lib/debug` with the file's directory.
fn debug_file(path: &Path, file: &object::File<'_>) -> Option<Vec<u8>> {
    const ROOT: &str = "/usr/lib/debug";
    if let Ok(Some(id)) = file.build_id() {
        if id.len() > 1 {
            let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
            let p = format!("{ROOT}/.build-id/{}/{}.debug", &hex[..2], &hex[2..]);
            if let Ok(data) = std::fs::read(&p) {
                return Some(data);
            }
        }
    }
    let (name, crc) = file.gnu_debuglink().ok()??;
    let name = std::str::from_utf8(name).ok()?;
    let real = path.canonicalize().ok()?;
    let dir = real.parent()?;
    let candidates = [
        dir.join(name),
        dir.join(".debug").join(name),
        Path::new(ROOT)
            .join(dir.strip_prefix("/").unwrap_or(dir))
            .join(name),
    ];
    candidates
        .iter()
        .filter(|c| c.as_path() != real.as_path())
        .filter_map(|c| std::fs::read(c).ok())
        .find(|data| crc32(data) == crc)
}

/// The CRC-32 (IEEE) `.gnu_debuglink` records of the debug file.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// The file's identity: a file replaced at the same path is read again.
type FileKey = (PathBuf, u64, u64, i64, i64, u64);

/// Each file's table, read once per process: attaching reads libc's for
/// every fast-path wrapper (a hundred lookups), and every image of a
/// traced tree attaches anew.
fn symbol_table(path: &Path) -> Result<std::sync::Arc<SymbolTable>, ProbeError> {
    use std::os::unix::fs::MetadataExt;
    static TABLES: std::sync::Mutex<Vec<(FileKey, std::sync::Arc<SymbolTable>)>> =
        std::sync::Mutex::new(Vec::new());
    let shown = path.display().to_string();
    let elf_error = |reason: String| ProbeError::Elf {
        path: shown.clone(),
        reason,
    };
    let meta = std::fs::metadata(path).map_err(|e| elf_error(e.to_string()))?;
    let key: FileKey = (
        path.to_path_buf(),
        meta.dev(),
        meta.ino(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.size(),
    );
    if let Some((_, t)) = TABLES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(k, _)| *k == key)
    {
        return Ok(t.clone());
    }
    let data = std::fs::read(path).map_err(|e| elf_error(e.to_string()))?;
    let file = object::File::parse(&*data).map_err(|e| elf_error(e.to_string()))?;
    let mut own = Symbols::default();
    file.symbols()
        .chain(file.dynamic_symbols())
        .for_each(|s| own.add(s));
    let has_static_symbols = file.symbols().next().is_some();
    let table = std::sync::Arc::new(SymbolTable {
        path: path.to_path_buf(),
        own,
        has_static_symbols,
        has_any_symbol: has_static_symbols || file.dynamic_symbols().next().is_some(),
        debug: std::sync::OnceLock::new(),
    });
    TABLES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((key, table.clone()));
    Ok(table)
}

/// The function containing file offset `file_offset` of the ELF at `path`,
/// and the offset into it: `(SYMBOL, OFF)` for `PATH:SYMBOL+OFF`. A
/// control plane names uprobes as the kernel takes them, by file offset
/// (libbpf computes it from the symbol); bpfjet patches functions it can
/// name, so it maps the offset back through the `PT_LOAD` segment that
/// holds it to a function symbol (`.symtab`, then `.dynsym`, then the
/// debug file's), preferring the symbol that starts exactly there.
pub fn symbol_at_file_offset(path: &Path, file_offset: u64) -> Result<(String, u64), ProbeError> {
    with_elf(path, |elf| function_at_file_offset(path, elf, file_offset))
}

/// As [`symbol_at_file_offset`], but an offset no function symbol covers
/// (a stripped file without a debug file) in an executable `PT_LOAD`
/// segment is a raw probe point: `("", file_offset)`, which bpfjet probes
/// with an `int3` as the kernel probes any offset.
pub fn symbol_or_raw_at_file_offset(
    path: &Path,
    file_offset: u64,
) -> Result<(String, u64), ProbeError> {
    with_elf(path, |elf| {
        match function_at_file_offset(path, elf, file_offset) {
            Ok(found) => Ok(found),
            Err(e) => {
                if executable_segment(elf, file_offset) {
                    Ok((String::new(), file_offset))
                } else {
                    Err(e)
                }
            }
        }
    })
}

/// Whether file offset `file_offset` is in the file bytes of an
/// executable `PT_LOAD` segment.
fn executable_segment(
    elf: &object::read::elf::ElfFile64<'_, object::Endianness>,
    file_offset: u64,
) -> bool {
    use object::read::elf::ProgramHeader;
    let endian = elf.endian();
    elf.elf_program_headers().iter().any(|ph| {
        let (off, size) = (ph.p_offset(endian), ph.p_filesz(endian));
        ph.p_type(endian) == object::elf::PT_LOAD
            && ph.p_flags(endian) & object::elf::PF_X != 0
            && file_offset >= off
            && file_offset < off + size
    })
}

fn function_at_file_offset(
    path: &Path,
    elf: &object::read::elf::ElfFile64<'_, object::Endianness>,
    file_offset: u64,
) -> Result<(String, u64), ProbeError> {
    let elf_error = |reason: String| ProbeError::Elf {
        path: path.display().to_string(),
        reason,
    };
    let vaddr = segment_vaddr(elf, file_offset).ok_or_else(|| {
        elf_error(format!(
            "file offset {file_offset:#x} is in no loadable segment"
        ))
    })?;
    let best = symbol_table(path)?.covering(vaddr);
    best.ok_or_else(|| {
        elf_error(format!(
            "no function symbol covers file offset {file_offset:#x} (address {vaddr:#x}): \
             bpfjet attaches uprobes inside functions it can name"
        ))
    })
}

/// Parse the ELF file at `path` and hand it to `f`; read and parse errors
/// name the file.
fn with_elf<T>(
    path: &Path,
    f: impl FnOnce(&object::read::elf::ElfFile64<'_, object::Endianness>) -> Result<T, ProbeError>,
) -> Result<T, ProbeError> {
    let elf_error = |reason: String| ProbeError::Elf {
        path: path.display().to_string(),
        reason,
    };
    let data = std::fs::read(path).map_err(|e| elf_error(e.to_string()))?;
    let elf = object::read::elf::ElfFile64::<object::Endianness>::parse(&*data)
        .map_err(|e| elf_error(e.to_string()))?;
    f(&elf)
}

/// The first `len` bytes of a resolved function as its file holds them
/// (None when the file or its symbol cannot say): code bpfjet finds in
/// memory is the file's own when they are equal, not an earlier patch.
pub fn file_code(target: &ResolvedSymbol, len: usize) -> Option<Vec<u8>> {
    use object::read::elf::ProgramHeader;
    let data = std::fs::read(&target.path).ok()?;
    let elf = object::read::elf::ElfFile64::<object::Endianness>::parse(&*data).ok()?;
    let vaddr = if target.symbol.is_empty() {
        // A raw point: `offset` is the file offset.
        segment_vaddr(&elf, target.offset)?
    } else {
        file_symbol(&target.path, &target.symbol).ok()?.vaddr + target.offset
    };
    let endian = elf.endian();
    let at = elf
        .elf_program_headers()
        .iter()
        .filter(|ph| ph.p_type(endian) == object::elf::PT_LOAD)
        .find_map(|ph| {
            let (va, size) = (ph.p_vaddr(endian), ph.p_filesz(endian));
            (vaddr >= va && vaddr + len as u64 <= va + size)
                .then(|| (vaddr - va + ph.p_offset(endian)) as usize)
        })?;
    data.get(at..at + len).map(<[u8]>::to_vec)
}

/// The ELF virtual address of file offset `file_offset`, through the
/// `PT_LOAD` segment whose file bytes hold it.
fn segment_vaddr(
    elf: &object::read::elf::ElfFile64<'_, object::Endianness>,
    file_offset: u64,
) -> Option<u64> {
    use object::read::elf::ProgramHeader;
    let endian = elf.endian();
    elf.elf_program_headers()
        .iter()
        .filter(|ph| ph.p_type(endian) == object::elf::PT_LOAD)
        .find_map(|ph| {
            let (off, size) = (ph.p_offset(endian), ph.p_filesz(endian));
            (file_offset >= off && file_offset < off + size)
                .then(|| file_offset - off + ph.p_vaddr(endian))
        })
}

/// The run-time address in this process of file offset `file_offset` of
/// the loaded object at `path` (a USDT semaphore a control plane names by
/// file offset, as the kernel's `ref_ctr_offset`).
pub fn loaded_address_of_file_offset(path: &Path, file_offset: u64) -> Result<u64, ProbeError> {
    let objects = loaded_objects();
    let canon = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let obj = objects
        .iter()
        .find(|o| o.path == canon)
        .ok_or_else(|| ProbeError::NotLoaded {
            path: path.display().to_string(),
        })?;
    let vaddr = with_elf(path, |elf| {
        segment_vaddr(elf, file_offset).ok_or_else(|| ProbeError::Elf {
            path: path.display().to_string(),
            reason: format!("file offset {file_offset:#x} is in no loadable segment"),
        })
    })?;
    Ok(obj.bias.wrapping_add(vaddr))
}

/// Whether the executable at `path` is dynamically linked (has PT_INTERP),
/// which the LD_PRELOAD agent needs.
pub fn check_dynamic(path: &Path) -> Result<(), ProbeError> {
    with_elf(path, |elf| check_interp(path, elf))
}

fn check_interp(
    path: &Path,
    elf: &object::read::elf::ElfFile64<'_, object::Endianness>,
) -> Result<(), ProbeError> {
    let shown = path.display().to_string();
    use object::read::elf::ProgramHeader;
    let endian = elf.endian();
    let interp = elf
        .elf_program_headers()
        .iter()
        .any(|ph| ph.p_type(endian) == object::elf::PT_INTERP);
    if interp {
        Ok(())
    } else {
        Err(ProbeError::StaticBinary { path: shown })
    }
}

/// A target resolved to an address in this process.
#[derive(Debug, Clone)]
pub struct ResolvedSymbol {
    pub path: PathBuf,
    /// Empty for a raw probe point: `offset` is then its file offset.
    pub symbol: String,
    pub offset: u64,
    /// Run-time address of SYMBOL+OFF.
    pub address: u64,
    /// Bytes of the function from `address` to its end (0: unknown).
    pub remaining: u64,
}

/// Resolves a target against the objects loaded in this process (an
/// empty symbol: `offset` is a raw file offset).
pub fn resolve(
    target: &UprobeTarget,
    objects: &[LoadedObject],
) -> Result<ResolvedSymbol, ProbeError> {
    let path = resolve_path(&target.path, objects)?;
    let obj = objects
        .iter()
        .find(|o| o.path == path)
        .ok_or_else(|| ProbeError::NotLoaded {
            path: path.display().to_string(),
        })?;
    if target.symbol.is_empty() {
        // A raw file offset: no function around it is known (an int3
        // probes it, crates/probe/src/uprobe.rs).
        let vaddr = with_elf(&path, |elf| {
            segment_vaddr(elf, target.offset).ok_or_else(|| ProbeError::Elf {
                path: path.display().to_string(),
                reason: format!("file offset {:#x} is in no loadable segment", target.offset),
            })
        })?;
        return Ok(ResolvedSymbol {
            path,
            symbol: String::new(),
            offset: target.offset,
            address: obj.bias.wrapping_add(vaddr),
            remaining: 0,
        });
    }
    let sym = file_symbol(&path, &target.symbol)?;
    if sym.size != 0 && target.offset >= sym.size {
        return Err(ProbeError::Unpatchable {
            symbol: target.symbol.clone(),
            offset: target.offset,
            address: obj.bias.wrapping_add(sym.vaddr),
            reason: format!("offset is past the function's end (size {})", sym.size),
        });
    }
    Ok(ResolvedSymbol {
        path,
        symbol: target.symbol.clone(),
        offset: target.offset,
        address: obj.bias.wrapping_add(sym.vaddr).wrapping_add(target.offset),
        remaining: sym.size.saturating_sub(target.offset),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debuglink_crc_is_ieee_crc32() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn parses_targets() {
        assert_eq!(
            UprobeTarget::parse("/bin/x:main+0x10").unwrap(),
            UprobeTarget {
                path: "/bin/x".into(),
                symbol: "main".into(),
                offset: 16
            }
        );
        assert_eq!(UprobeTarget::parse("libc:malloc").unwrap().symbol, "malloc");
        assert!(UprobeTarget::parse("nocolon").is_err());
        assert!(UprobeTarget::parse("/x:").is_err());
        assert!(UprobeTarget::parse("/x:f+zz").is_err());
    }

    #[test]
    fn file_offsets_map_back_to_symbols() {
        let objs = loaded_objects();
        let t = UprobeTarget::parse("libc:getpid").unwrap();
        let r = resolve(&t, &objs).unwrap();
        let sym = file_symbol(&r.path, "getpid").unwrap();
        // libc's text segment: file offset = vaddr - p_vaddr + p_offset;
        // for libc both are equal, as for most shared objects.
        let data = std::fs::read(&r.path).unwrap();
        let elf = object::read::elf::ElfFile64::<object::Endianness>::parse(&*data).unwrap();
        use object::read::elf::ProgramHeader;
        let e = elf.endian();
        let ph = elf
            .elf_program_headers()
            .iter()
            .find(|ph| {
                ph.p_type(e) == object::elf::PT_LOAD
                    && sym.vaddr >= ph.p_vaddr(e)
                    && sym.vaddr < ph.p_vaddr(e) + ph.p_filesz(e)
            })
            .unwrap();
        let off = sym.vaddr - ph.p_vaddr(e) + ph.p_offset(e);
        let (name, at) = symbol_at_file_offset(&r.path, off + 1).unwrap();
        assert_eq!(at, 1);
        // getpid may have aliases (__getpid): any name with the same address.
        assert_eq!(file_symbol(&r.path, &name).unwrap().vaddr, sym.vaddr);
        assert!(symbol_at_file_offset(&r.path, u64::MAX / 2).is_err());
    }

    #[test]
    fn finds_libc_in_this_process() {
        let objs = loaded_objects();
        assert!(!objs.is_empty());
        let t = UprobeTarget::parse("libc:getpid").unwrap();
        let r = resolve(&t, &objs).unwrap();
        assert_eq!(r.address, libc::getpid as *const () as u64);
    }

    #[test]
    fn missing_symbol_is_named() {
        let objs = loaded_objects();
        let t = UprobeTarget::parse("libc:no_such_function_here").unwrap();
        let e = resolve(&t, &objs).unwrap_err().to_string();
        assert!(e.contains("no_such_function_here"), "{e}");
    }
}
