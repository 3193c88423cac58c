//! The loaded object and the `load` entry point tying the layers together:
//! ELF → BTF → maps → programs (linked).

use std::path::Path;

use bpfjet_maps::MapSpec;

use crate::btf::{Btf, BtfExt, BtfType, Linkage};
use crate::core::{CoreTargets, KernelBtf, TargetBtf};
use crate::elf::{Elf, SymKind};
use crate::error::{malformed, ObjError};
use crate::link::{CodeIndex, Linker};
use crate::maps::{MapSlotInit, MapTable};
use crate::prog_kind::{ProgKind, ProgType};
use crate::program::Program;

#[derive(Clone, Debug)]
pub struct Object {
    pub license: String,
    /// Indexed by the imm of `PSEUDO_MAP_IDX` / `PSEUDO_MAP_IDX_VALUE` lddws.
    pub maps: Vec<MapSpec>,
    /// Parallel to `maps`: byte offset of the `struct bpf_spin_lock` in the
    /// map's value type (from its BTF), `None` when the value has no lock.
    pub spin_locks: Vec<Option<u32>>,
    /// Parallel to `maps`: the special fields of each map's value (locks,
    /// graph roots, kptrs; `special_fields`), from its BTF.
    pub map_fields: Vec<Vec<crate::SpecialField>>,
    /// Map-in-maps (by index in `maps`) whose inner template's value has
    /// special fields: those fields (a timer, a spin lock, ...).
    pub inner_map_fields: std::collections::BTreeMap<usize, Vec<crate::SpecialField>>,
    /// Slots of outer maps and PROG_ARRAYs that the object initialises itself.
    pub map_inits: Vec<MapSlotInit>,
    /// In section order, then by offset within the section.
    pub programs: Vec<Program>,
    /// Kernel functions called, indexed by the imm of `CALL_KFUNC` calls
    /// (and of `KSYM_ADDRESS_SRC` lddws).
    pub kfuncs: Vec<String>,
    /// The kfuncs declared `__weak`: when the runtime does not provide one,
    /// its address is 0 (and calls to it must be dead code), as libbpf
    /// resolves a missing weak kfunc.
    pub weak_kfuncs: Vec<String>,
    pub btf: Option<Btf>,
}

impl Object {
    /// Give RINGBUF map `name` a data area of `bytes` instead of the
    /// object's `max_entries`, before the maps are created (a libbpf
    /// skeleton's `bpf_map__set_max_entries` before load). The kernel's
    /// rule applies: a power of two and a multiple of `page_size`.
    pub fn resize_ringbuf(&mut self, name: &str, bytes: u64, page_size: u64) -> Result<(), String> {
        let map = self
            .maps
            .iter_mut()
            .find(|m| m.name == name)
            .ok_or_else(|| format!("the object has no map {name:?}"))?;
        if map.map_type != bpfjet_maps::MapType::Ringbuf {
            return Err(format!(
                "map {name:?} is a {:?} map, not a RINGBUF",
                map.map_type
            ));
        }
        if !bytes.is_power_of_two() || page_size == 0 || !bytes.is_multiple_of(page_size) {
            return Err(format!(
                "{bytes} bytes: a ring buffer's size must be a power of two and a multiple of \
                 the page size ({page_size})"
            ));
        }
        map.max_entries = u32::try_from(bytes)
            .map_err(|_| format!("{bytes} bytes: at most 2 GiB (max_entries is 32 bits)"))?;
        Ok(())
    }

    /// Sets map `name`'s `max_entries` before it is created, as a loader's
    /// `bpf_map__set_max_entries` does.
    pub fn set_max_entries(&mut self, name: &str, n: u32) -> Result<(), String> {
        let map = self
            .maps
            .iter_mut()
            .find(|m| m.name == name)
            .ok_or_else(|| format!("the object has no map {name:?}"))?;
        map.max_entries = n;
        Ok(())
    }

    pub fn program(&self, name: &str) -> Option<&Program> {
        self.programs.iter().find(|p| p.name == name)
    }

    pub fn map_index(&self, name: &str) -> Option<usize> {
        self.maps.iter().position(|m| m.name == name)
    }

    /// `prog`'s global (non-static) subprograms, from the BTF linkage of
    /// their `FUNC` types: (entry slot, `FUNC` id, name, prototype id).
    fn global_funcs<'a>(
        &'a self,
        prog: &'a Program,
    ) -> impl Iterator<Item = (usize, u32, &'a str, u32)> + 'a {
        let btf = self.btf.as_ref();
        prog.func_info
            .iter()
            .filter(|f| f.slot != 0)
            .filter_map(move |f| {
                let id = f.btf_type_id?;
                match btf?.type_by_id(id)? {
                    BtfType::Func {
                        name,
                        proto,
                        linkage: Linkage::Global,
                    } => Some((f.slot, id, name.as_str(), *proto)),
                    _ => None,
                }
            })
    }

    /// `prog`'s global subprograms with their arguments as the kernel's
    /// verifier types them from the BTF prototype alone
    /// (`btf_prepare_func_args`): it verifies such a function once, on its
    /// own, and checks each call's arguments against these types. A
    /// prototype it cannot verify from (not returning a scalar, more than 5
    /// arguments, a pointer to a type of unknown size that is not tagged
    /// `arg:ctx`, an argument of another kind) gives the reason instead:
    /// a call to it refuses the program.
    pub fn global_subprog_sigs(&self, prog: &Program) -> Vec<GlobalSubprog> {
        let Some(btf) = &self.btf else {
            return Vec::new();
        };
        let ctx = prog.kind.prog_type().map_or(&[][..], ctx_struct_names);
        self.global_funcs(prog)
            .map(|(slot, id, name, proto)| GlobalSubprog {
                slot,
                name: name.to_string(),
                args: global_func_args(btf, id, name, proto, ctx),
            })
            .collect()
    }

    /// Gives every program the type `kind`, like bpftool's
    /// `prog load OBJ PATH type TYPE` (which sets the type of all programs
    /// of the object): for programs in sections whose name says nothing
    /// (`SEC("xdp_patch_ports")`) or says something else.
    pub fn override_prog_kind(&mut self, kind: &ProgKind) {
        for p in &mut self.programs {
            p.kind = kind.clone();
        }
    }

    /// The XDP program to run on packets: the one named `name`, or else the
    /// first XDP one; an error names the program and its type if it is not
    /// XDP (tracing programs run through the runtime's tracing objects).
    pub fn runnable_program(&self, name: Option<&str>) -> Result<&Program, ObjError> {
        let prog = match name {
            Some(n) => self
                .program(n)
                .ok_or_else(|| ObjError::NoSuchProgram(n.to_string()))?,
            None => match self
                .programs
                .iter()
                .find(|p| p.kind.is_xdp() && p.autoload())
            {
                Some(p) => p,
                None => self
                    .programs
                    .first()
                    .ok_or_else(|| ObjError::NoSuchProgram("<any>".into()))?,
            },
        };
        if !prog.kind.is_xdp() {
            return Err(ObjError::UnsupportedProgram {
                program: prog.name.clone(),
                section: prog.section.clone(),
                kind: prog.kind.to_string(),
            });
        }
        Ok(prog)
    }
}

/// How the kernel's verifier types one argument of a global function
/// (`btf_prepare_func_args`), in the function's own verification and at
/// its calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GlobalArg {
    /// An integer or enum: any value.
    Scalar,
    /// The program's context: a pointer to its context struct, or any
    /// pointer tagged `arg:ctx`.
    Ctx,
    /// A pointer to a type of `size` bytes: that much readable and
    /// writable memory, or NULL unless tagged `arg:nonnull`.
    Mem { size: u32, nullable: bool },
    /// A pointer to a `struct bpf_dynptr`: an initialised dynptr, which
    /// the body sees as a read-only one of the local kind.
    Dynptr,
}

/// One global subprogram of a program ([`Object::global_subprog_sigs`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GlobalSubprog {
    /// Entry slot.
    pub slot: usize,
    pub name: String,
    /// Its arguments, or why the kernel cannot verify it from its
    /// prototype.
    pub args: Result<Vec<GlobalArg>, String>,
}

/// The context struct names a pointer argument of a global function of a
/// program of type `t` is the context through (the kernel's
/// `btf_is_prog_ctx_type`: the user-visible context type; `pt_regs` for
/// kprobes too). Tracepoint and tracing contexts are not structs: only
/// `arg:ctx` makes an argument their context.
fn ctx_struct_names(t: ProgType) -> &'static [&'static str] {
    match t {
        ProgType::Xdp => &["xdp_md"],
        ProgType::Kprobe => &["pt_regs"],
        ProgType::PerfEvent => &["bpf_perf_event_data"],
        ProgType::RawTracepoint => &["bpf_raw_tracepoint_args"],
        ProgType::Tracepoint | ProgType::Tracing => &[],
    }
}

/// The arguments of global function `name` (BTF `FUNC` `func` with
/// prototype `proto`) as the kernel types them, or its objection to the
/// prototype as its verifier words it.
fn global_func_args(
    btf: &Btf,
    func: u32,
    name: &str,
    proto: u32,
    ctx: &[&str],
) -> Result<Vec<GlobalArg>, String> {
    let Some(BtfType::FuncProto { ret, params }) = btf.type_by_id(proto) else {
        return Err(format!("global function {name}() has no BTF prototype"));
    };
    let kind = |id: u32| btf.resolve(id).and_then(|r| btf.type_by_id(r));
    let scalar =
        |t: Option<&BtfType>| matches!(t, Some(BtfType::Int { .. } | BtfType::Enum { .. }));
    if !scalar(kind(*ret)) {
        return Err(format!(
            "global function {name}() does not return a scalar (the kernel verifies a \
             global function only when it returns an integer or an enum)"
        ));
    }
    if params.len() > 5 {
        return Err(format!(
            "global function {name}() takes {} arguments, more than the 5 registers \
             that pass them",
            params.len()
        ));
    }
    // The argument tags (`__arg_ctx`, `__arg_nonnull`, ...) of argument `arg`.
    let tags = |arg: usize| -> Vec<&str> {
        btf.types()
            .iter()
            .filter_map(|t| match t {
                BtfType::DeclTag {
                    name,
                    target,
                    component,
                } if *target == func && *component == arg as i32 => name.strip_prefix("arg:"),
                _ => None,
            })
            .collect()
    };
    let mut args = Vec::with_capacity(params.len());
    for (i, p) in params.iter().enumerate() {
        let tags = tags(i);
        if let Some(t) = tags.iter().find(|t| !matches!(**t, "ctx" | "nonnull")) {
            return Err(format!(
                "argument {i} (R{}) of global function {name}() is tagged arg:{t}, which \
                 bpfjet does not support (arg:ctx and arg:nonnull are)",
                i + 1
            ));
        }
        let arg = match kind(p.type_id) {
            t if scalar(t) => GlobalArg::Scalar,
            Some(BtfType::Ptr { .. }) if tags.contains(&"ctx") => GlobalArg::Ctx,
            Some(BtfType::Ptr { target }) => {
                let pointee = kind(*target);
                match pointee {
                    Some(t @ BtfType::Struct { .. }) if ctx.contains(&t.name()) => GlobalArg::Ctx,
                    Some(t @ BtfType::Struct { .. }) if t.name() == "bpf_dynptr" => {
                        GlobalArg::Dynptr
                    }
                    None | Some(BtfType::Void | BtfType::Fwd { .. }) => {
                        let pointee = match pointee {
                            None | Some(BtfType::Void) => "void".to_string(),
                            Some(t) => format!("{} {}", t.kind_name(), t.name()),
                        };
                        return Err(format!(
                            "argument {i} (R{}) of global function {name}() points to {pointee}, \
                             whose size is unknown (a global function is verified from its \
                             prototype alone: give the pointer a sized type, tag it arg:ctx, \
                             or make the function static)",
                            i + 1
                        ));
                    }
                    Some(_) => match btf.size_of(*target).and_then(|s| u32::try_from(s).ok()) {
                        Some(size) => GlobalArg::Mem {
                            size,
                            nullable: !tags.contains(&"nonnull"),
                        },
                        None => {
                            return Err(format!(
                                "argument {i} (R{}) of global function {name}() points to a \
                                 type whose size is unknown",
                                i + 1
                            ))
                        }
                    },
                }
            }
            t => {
                let what = t.map_or("unknown", |t| t.kind_name());
                return Err(format!(
                    "argument {i} (R{}) of global function {name}() is of kind {what}: the kernel \
                     types a global function's arguments as scalars or pointers only",
                    i + 1
                ));
            }
        };
        args.push(arg);
    }
    Ok(args)
}

/// Loads the object at `path`, CO-RE relocated against the running kernel.
pub fn load_file(path: impl AsRef<Path>) -> Result<Object, ObjError> {
    load_file_with(path, &KernelBtf::Running)
}

/// Loads the object at `path`, CO-RE relocated against `kernel_btf`.
pub fn load_file_with(path: impl AsRef<Path>, kernel_btf: &KernelBtf) -> Result<Object, ObjError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|source| ObjError::Io {
        path: path.display().to_string(),
        source,
    })?;
    load_with(&bytes, kernel_btf)
}

/// Loads an object from memory, CO-RE relocated against the running kernel.
pub fn load(bytes: &[u8]) -> Result<Object, ObjError> {
    load_with(bytes, &KernelBtf::Running)
}

/// Global-data `DATASEC`s get their sizes and offsets from the ELF, as
/// libbpf fixes them before load (`.data`, `.rodata*`, `.bss*`, ...).
fn fix_datasecs(elf: &Elf, btf: &mut Btf) {
    // libbpf's fixup: a global variable or function of hidden visibility
    // is static to the loader (a hidden map is refused, a hidden global
    // subprogram is verified as a static one, a section of hidden
    // variables is not mmapable).
    let hidden = elf
        .symbols
        .iter()
        .filter(|s| s.hidden && !s.local && matches!(s.kind, SymKind::Object | SymKind::Func))
        .map(|s| s.name.as_str())
        .collect();
    btf.make_static(&hidden);
    for (index, section) in elf.sections.iter().enumerate() {
        let Ok(size) = u32::try_from(section.size) else {
            continue;
        };
        btf.fix_datasec(&section.name, size, |var| {
            elf.symbols
                .iter()
                .find(|s| s.section == Some(index) && s.kind != SymKind::Section && s.name == var)
                .and_then(|s| u32::try_from(s.value).ok())
        });
    }
}

/// Loads an object from memory: ELF → BTF → maps → programs (linked) →
/// CO-RE relocations applied against `kernel_btf` and bpfjet's context types.
pub fn load_with(bytes: &[u8], kernel_btf: &KernelBtf) -> Result<Object, ObjError> {
    let elf = Elf::parse(bytes)?;
    let license = license(&elf)?;
    let mut btf = match elf.section_by_name(".BTF") {
        Some((_, s)) => Some(Btf::parse(s.data)?),
        None => None,
    };
    if let Some(btf) = &mut btf {
        fix_datasecs(&elf, btf);
    }
    let ext = match (&btf, elf.section_by_name(".BTF.ext")) {
        (Some(btf), Some((_, s))) => Some(BtfExt::parse(s.data, btf)?),
        _ => None,
    };
    let maps = MapTable::collect(&elf, btf.as_ref())?;
    let code = CodeIndex::build(&elf)?;

    let mut linker = Linker {
        elf: &elf,
        maps: &maps,
        btf: btf.as_ref(),
        ext: ext.as_ref(),
        code: &code,
        kfuncs: Vec::new(),
        weak_kfuncs: Vec::new(),
    };
    let mut programs = Vec::new();
    for (index, section) in elf.sections.iter().enumerate() {
        // `.text` holds subprograms, linked into the programs that call them.
        if !section.executable || section.name == ".text" || section.data.is_empty() {
            continue;
        }
        let mut entries: Vec<usize> = (0..code.funcs.len())
            .filter(|&f| code.funcs[f].section == index)
            .collect();
        if entries.is_empty() {
            return Err(malformed(format!(
                "section `{}` has code but no function symbols",
                section.name
            )));
        }
        entries.sort_by_key(|&f| code.funcs[f].start);
        // libbpf takes only global functions as entry points outside
        // `.text` ("program ... is static and not supported").
        if let Some(&f) = entries.iter().find(|&&f| code.funcs[f].local) {
            return Err(ObjError::StaticProgram {
                program: code.funcs[f].name.clone(),
                section: section.name.clone(),
            });
        }
        for f in entries {
            let linked = linker.link(f)?;
            programs.push(Program {
                name: code.funcs[f].name.clone(),
                section: section.name.clone(),
                kind: ProgKind::from_section(&section.name),
                insns: linked.insns,
                func_info: linked.func_info,
                line_info: linked.line_info,
                core_relos: linked.core_relos,
                unresolved_core: Vec::new(),
            });
        }
    }
    let kfuncs = linker.kfuncs;
    let weak_kfuncs = linker.weak_kfuncs;
    if let Some(local) = &btf {
        apply_core(&mut programs, local, kernel_btf)?;
    }
    Ok(Object {
        license,
        maps: maps.specs,
        spin_locks: maps.spin_locks,
        map_fields: maps.fields,
        inner_map_fields: maps.inner_fields,
        map_inits: maps.inits,
        programs,
        kfuncs,
        weak_kfuncs,
        btf,
    })
}

/// The CO-RE step: relocates every program; the kernel BTF is read only
/// when some program has relocations, and only needed if one of them names
/// a type outside bpfjet's context types.
fn apply_core(
    programs: &mut [Program],
    local: &Btf,
    kernel_btf: &KernelBtf,
) -> Result<(), ObjError> {
    if programs.iter().all(|p| p.core_relos.is_empty()) {
        return Ok(());
    }
    let context = TargetBtf::context();
    let kernel = kernel_btf.load();
    let targets = CoreTargets {
        context: &context,
        kernel: kernel.as_deref().map_err(String::as_str),
    };
    for prog in programs {
        let fixups = crate::core::relocate(prog, local, &targets)?;
        crate::core::apply(prog, fixups);
    }
    Ok(())
}

/// libbpf's reading of the `license` section: the text up to its first NUL,
/// at most 63 bytes (libbpf's buffer); an object without the section has
/// the empty license, which the kernel accepts for programs that call no
/// GPL-only helper.
fn license(elf: &Elf) -> Result<String, ObjError> {
    const LIBBPF_LICENSE_MAX: usize = 63;
    let Some((_, section)) = elf.section_by_name("license") else {
        return Ok(String::new());
    };
    let text = section.data.split(|&b| b == 0).next().unwrap_or_default();
    let text = &text[..text.len().min(LIBBPF_LICENSE_MAX)];
    Ok(String::from_utf8_lossy(text).into_owned())
}

/// The kernel's `license_is_gpl_compatible()`: the licenses whose programs
/// may call GPL-only helpers.
pub fn license_is_gpl_compatible(license: &str) -> bool {
    matches!(
        license,
        "GPL"
            | "GPL v2"
            | "GPL and additional rights"
            | "Dual BSD/GPL"
            | "Dual MIT/GPL"
            | "Dual MPL/GPL"
    )
}
