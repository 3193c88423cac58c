//! Reading BPF ELF objects compiled by clang for the kernel, with libbpf
//! conventions, into self-contained programs and map specifications.
//!
//! ```no_run
//! let obj = bpfjet_obj::load_file("prog.o")?;
//! let prog = obj.runnable_program(None)?;
//! println!("{} slots, {} maps", prog.insns.len(), obj.maps.len());
//! # Ok::<(), bpfjet_obj::ObjError>(())
//! ```
//!
//! # What a loaded program looks like
//!
//! [`Program::insns`] is the program's own code followed by every function it
//! reaches (calls and `bpf_loop`-style callbacks, transitively), so it can be
//! verified and run without the object. Everything that referred to the ELF
//! is rewritten:
//!
//! | in the object | in `insns` |
//! |---|---|
//! | `lddw` of a map symbol | `lddw` src = `PSEUDO_MAP_IDX`, imm = index into [`Object::maps`] |
//! | `lddw` of a global variable | `lddw` src = `PSEUDO_MAP_IDX_VALUE`, imm = map index, second imm = byte offset |
//! | `call` of a subprogram | `call` src = `CALL_LOCAL`, imm = slot offset from the next slot |
//! | `lddw` of a function | `lddw` src = `PSEUDO_FUNC`, imm = slot offset from the next slot |
//! | `call` of a `__ksym` extern | `call` src = `CALL_KFUNC`, imm = index into [`Object::kfuncs`] |
//! | helper `call` | unchanged |
//!
//! Global data sections become one-element ARRAY maps named after the section
//! (`.rodata`, `.data.foo`, `.bss`), where libbpf would prefix the object name.
//!
//! # Why not aya-obj
//!
//! aya-obj 0.2.1 was evaluated and not used: it panics on malformed input
//! (unchecked slicing in its BTF, BTF.ext and program parsers), rejects whole
//! objects over section names it does not know (`xdp_prog`, `tc`), and has
//! no `map_extra`, inner-map templates, `.values` initialisers or kfunc
//! externs. ELF is read with the `object` crate; BTF is read here.
//!
//! # CO-RE
//!
//! CO-RE relocations (`.BTF.ext`) are applied after linking, by [`core`],
//! against bpfjet's own context types and the kernel BTF ([`KernelBtf`]:
//! the running kernel's, or a file, libbpf's `btf_custom_path`).
//! [`load`] and [`load_file`] use the running kernel's.
//!
//! # Not supported
//!
//! `__ksym` extern variables (`__kconfig` ones are read as libbpf reads
//! them: `maps/kconfig.rs`); CO-RE against kernel module BTF (split BTF);
//! big-endian and 32-bit objects; `struct_ops`.

mod btf;
mod bytes;
pub mod core;
mod elf;
mod error;
mod link;
pub use link::KSYM_ADDRESS_SRC;
mod loader_settings;
mod maps;
mod object;
mod prog_kind;
mod program;
pub mod special_fields;
pub mod tp_btf;

pub use btf::{
    Btf, BtfExt, BtfType, CoreReloRecord, DataSecVar, FuncRecord, LineRecord, Linkage, Member,
    Param,
};
pub use core::{KernelBtf, TargetBtf};
pub use error::ObjError;
pub use loader_settings::LoaderSettings;
pub use maps::{has_syscall_wrapper, spin_lock_offset, MapSlotInit, SlotTarget};
pub use object::{
    license_is_gpl_compatible, load, load_file, load_file_with, load_with, GlobalArg,
    GlobalSubprog, Object,
};
pub use prog_kind::{
    force_type_hint, KernelProgType, ProbeFlavor, ProbeSection, ProbeTarget, ProgKind, ProgType,
    SyscallEntryProbe, SyscallTracepoint, XdpAttach, SYSCALL_ENTRY_PREFIX,
    SYSCALL_TRACEPOINT_SECTIONS,
};
pub use program::{FuncInfo, LineInfo, Program};
pub use special_fields::{FieldKind, GraphKind, LocalType, SpecialField};
pub use tp_btf::{KernelField, KernelStruct, TpArg, TpBtfProto};
