//! Kernel functions named as libbpf names them in `BPF_PROG_LOAD`.
//!
//! libbpf resolves a `__ksym` kfunc against the kernel's BTF and hands the
//! kernel `call` (src = `BPF_PSEUDO_KFUNC_CALL`) with imm = the function's
//! BTF id and off = 0 for vmlinux (an `fd_array` index of a module's BTF
//! otherwise), and `bpf_ksym_exists(kfunc)` as an `ld_imm64` with src =
//! `BPF_PSEUDO_BTF_ID`. bpfjet's runtime names kfuncs by their index in the
//! object's kfunc table (`bpfjet_obj::Object::kfuncs`), so each vmlinux id
//! is turned back into its name here and the instruction into that index.
//! Whether bpfjet provides the function is the verifier's to say, at the
//! call, with the name.

use crate::progs::Refusal;
use bpfjet_obj::{Btf, BtfType, KSYM_ADDRESS_SRC};
use bpfjet_sys::Errno;
use std::sync::OnceLock;

const JMP_CALL: u8 = 0x85;
const LD_IMM64: u8 = 0x18;
const PSEUDO_KFUNC_CALL: u8 = 2;
const PSEUDO_BTF_ID: u8 = 3;

/// The kernel's allocating kfuncs (`bpf_obj_new` and the like).
const ALLOCATORS: [&str; 3] = [
    "bpf_obj_new_impl",
    "bpf_percpu_obj_new_impl",
    "bpf_refcount_acquire_impl",
];

/// The kfunc table of a program, and its instructions rewritten to index it.
pub struct KfuncTable {
    pub kfuncs: Vec<String>,
    /// Named only by `bpf_ksym_exists`: a missing one reads as NULL, as
    /// libbpf resolves a missing weak kfunc.
    pub weak: Vec<String>,
}

/// The running kernel's BTF, parsed once per process.
fn vmlinux() -> Result<&'static Btf, String> {
    static BTF: OnceLock<Result<Btf, String>> = OnceLock::new();
    BTF.get_or_init(|| {
        let path = bpfjet_obj::core::VMLINUX_BTF;
        let raw = std::fs::read(path).map_err(|e| format!("reading {path}: {e}"))?;
        Btf::parse(&raw).map_err(|e| format!("{path}: {e}"))
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// The vmlinux function a kfunc reference at `pc` names.
fn vmlinux_func(pc: usize, id: u32) -> Result<String, Refusal> {
    let btf = vmlinux().map_err(|e| {
        Refusal::new(
            Errno::EINVAL,
            format!("insn {pc}: kfunc BTF id {id}: the kernel's BTF: {e}"),
        )
    })?;
    match btf.type_by_id(id) {
        Some(BtfType::Func { name, .. }) => Ok(name.clone()),
        Some(other) => Err(Refusal::new(
            Errno::EINVAL,
            format!(
                "insn {pc}: kernel btf_id {id} is not a function (a {} named {:?})",
                kind_name(other),
                other.name()
            ),
        )),
        None => Err(Refusal::new(
            Errno::EINVAL,
            format!("insn {pc}: kernel btf_id {id} is not a type of the running kernel"),
        )),
    }
}

fn kind_name(t: &BtfType) -> &'static str {
    match t {
        BtfType::Var { .. } => "variable",
        BtfType::Struct { .. } => "struct",
        BtfType::Union { .. } => "union",
        BtfType::Typedef { .. } => "typedef",
        BtfType::FuncProto { .. } => "function prototype",
        _ => "type",
    }
}

fn index_of(table: &mut Vec<String>, name: String) -> usize {
    match table.iter().position(|n| *n == name) {
        Some(i) => i,
        None => {
            table.push(name);
            table.len() - 1
        }
    }
}

/// Rewrite the kfunc calls and kfunc addresses of `words` (vmlinux BTF ids,
/// as libbpf passes them) into indices of the returned table. Calls into
/// a module's BTF (off != 0), and kernel variables, are refused with the
/// reason: bpfjet has neither.
pub fn resolve(words: &mut [u64]) -> Result<KfuncTable, Refusal> {
    let mut table = KfuncTable {
        kfuncs: Vec::new(),
        weak: Vec::new(),
    };
    let mut pc = 0;
    while pc < words.len() {
        let mut b = words[pc].to_le_bytes();
        let src = b[1] >> 4;
        let off = i16::from_le_bytes([b[2], b[3]]);
        let id = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
        if b[0] == JMP_CALL && src == PSEUDO_KFUNC_CALL {
            if off != 0 {
                return Err(module_refusal(pc, id, i64::from(off)));
            }
            let name = vmlinux_func(pc, id)?;
            if ALLOCATORS.contains(&name.as_str()) {
                return Err(Refusal::new(
                    Errno::EINVAL,
                    format!(
                        "insn {pc}: {name}: the objects bpfjet allocates live in one process's \
                         memory, and a program loaded through bpf() runs in several (each \
                         process that test-runs it, traced processes, the data plane), so \
                         objects and graphs are not served through bpf() yet; bpfjet run, \
                         test-run and bench load such an object from its ELF file"
                    ),
                ));
            }
            let index = index_of(&mut table.kfuncs, name) as u32;
            b[4..8].copy_from_slice(&index.to_le_bytes());
            words[pc] = u64::from_le_bytes(b);
        } else if b[0] == LD_IMM64 && src == PSEUDO_BTF_ID {
            let obj_fd = words.get(pc + 1).map_or(0, |w| (w >> 32) as u32 as i32);
            if obj_fd != 0 {
                return Err(module_refusal(pc, id, i64::from(obj_fd)));
            }
            let btf = vmlinux().map_err(|e| Refusal::new(Errno::EINVAL, e))?;
            match btf.type_by_id(id) {
                Some(BtfType::Func { name, .. }) => {
                    let name = name.clone();
                    if !table.weak.contains(&name) {
                        table.weak.push(name.clone());
                    }
                    let index = index_of(&mut table.kfuncs, name) as u32;
                    b[1] = (b[1] & 0x0f) | (KSYM_ADDRESS_SRC << 4);
                    b[4..8].copy_from_slice(&index.to_le_bytes());
                    words[pc] = u64::from_le_bytes(b);
                    words[pc + 1] &= 0x0000_0000_ffff_ffff;
                }
                Some(BtfType::Var { name, .. }) => {
                    return Err(Refusal::new(
                        Errno::EINVAL,
                        format!(
                            "insn {pc}: kernel variable `{name}` (a typed __ksym): bpfjet runs \
                             programs in userspace, where no kernel variable exists"
                        ),
                    ))
                }
                _ => {
                    return Err(Refusal::new(
                        Errno::EINVAL,
                        format!("insn {pc}: ld_imm64 of kernel btf_id {id}: not a function or variable of the running kernel"),
                    ))
                }
            }
        }
        pc += if b[0] == LD_IMM64 { 2 } else { 1 };
    }
    Ok(table)
}

fn module_refusal(pc: usize, id: u32, fd_index: i64) -> Refusal {
    Refusal::new(
        Errno::EINVAL,
        format!(
            "insn {pc}: kfunc btf_id {id} of a kernel module's BTF (fd_array[{fd_index}]): through \
             bpf() bpfjet resolves the kernel's own (vmlinux) kfuncs; its NF library and eNetSTL's \
             kfuncs are resolved by name for objects bpfjet loads itself"
        ),
    )
}
