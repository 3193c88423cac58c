//! Kernel functions named as libbpf names them in `BPF_PROG_LOAD`.
//!
//! libbpf resolves a `__ksym` kfunc against the kernel's BTF and hands the
//! kernel `call` (src = `BPF_PSEUDO_KFUNC_CALL`) with imm = the function's
//! BTF id and off = 0 for vmlinux (an `fd_array` index of a module's BTF
//! otherwise), and `bpf_ksym_exists(kfunc)` as an `ld_imm64` with src =
//! `BPF_PSEUDO_BTF_ID` (the second slot's imm: 0, or a module BTF's fd).
//! bpfjet's runtime names kfuncs by their index in the object's kfunc table
//! (`bpfjet_obj::Object::kfuncs`), so each vmlinux id is turned back into
//! its name here and the instruction into that index. Whether bpfjet
//! provides the function is the verifier's to say, at the call, with the
//! name.

use crate::progs::Refusal;
use bpfjet_isa::opcode::{CALL_KFUNC, CLASS_JMP, JMP_CALL, LDDW, PSEUDO_BTF_ID};
use bpfjet_isa::RawInsn;
use bpfjet_obj::{BtfType, TargetBtf, KSYM_ADDRESS_SRC};
use bpfjet_sys::Errno;
use bpfjet_verifier::graph::GraphKfunc;

/// The kfunc table of a program (its instructions rewritten to index it).
pub struct KfuncTable {
    pub kfuncs: Vec<String>,
    /// Named only by `bpf_ksym_exists`: a missing one reads as NULL, as
    /// libbpf resolves a missing weak kfunc.
    pub weak: Vec<String>,
}

fn refusal(log: String) -> Refusal {
    Refusal::new(Errno::EINVAL, log)
}

/// The vmlinux type `id` an instruction at `pc` names.
fn vmlinux_type(pc: usize, id: u32) -> Result<BtfType, Refusal> {
    let kernel = TargetBtf::running_kernel()
        .map_err(|e| refusal(format!("insn {pc}: kernel btf_id {id}: {e}")))?;
    kernel.btf().type_by_id(id).cloned().ok_or_else(|| {
        refusal(format!(
            "insn {pc}: kernel btf_id {id} is not a type of the running kernel"
        ))
    })
}

fn index_of(table: &mut Vec<String>, name: &str) -> u32 {
    let i = match table.iter().position(|n| n == name) {
        Some(i) => i,
        None => {
            table.push(name.to_string());
            table.len() - 1
        }
    };
    i as u32
}

fn word(insn: RawInsn) -> u64 {
    u64::from_le_bytes(insn.to_bytes())
}

/// Rewrite the kfunc calls and kfunc addresses of `words` (vmlinux BTF ids,
/// as libbpf passes them) into indices of the returned table. Module BTFs,
/// kernel variables and the allocating object kfuncs are refused with the
/// reason.
pub fn resolve(words: &mut [u64]) -> Result<KfuncTable, Refusal> {
    let mut table = KfuncTable {
        kfuncs: Vec::new(),
        weak: Vec::new(),
    };
    let mut pc = 0;
    while pc < words.len() {
        let mut insn = RawInsn::from_bytes(&words[pc].to_le_bytes());
        let id = insn.imm as u32;
        if insn.code == CLASS_JMP | JMP_CALL && insn.src == CALL_KFUNC {
            if insn.off != 0 {
                return Err(module_refusal(pc, id, &format!("fd_array[{}]", insn.off)));
            }
            let BtfType::Func { name, .. } = vmlinux_type(pc, id)? else {
                return Err(refusal(format!(
                    "insn {pc}: kernel btf_id {id} is not a function"
                )));
            };
            if matches!(
                GraphKfunc::from_name(&name),
                Some(GraphKfunc::ObjNew | GraphKfunc::RefcountAcquire)
            ) {
                return Err(refusal(format!(
                    "insn {pc}: {name}: the objects bpfjet allocates live in one process's \
                     memory, and a program loaded through bpf() runs in several (each \
                     process that test-runs it, traced processes, the data plane), so \
                     objects and graphs are not served through bpf() yet; bpfjet run, \
                     test-run and bench load such an object from its ELF file"
                )));
            }
            insn.imm = index_of(&mut table.kfuncs, &name) as i32;
            words[pc] = word(insn);
        } else if insn.code == LDDW && insn.src == PSEUDO_BTF_ID {
            let btf_fd = words.get(pc + 1).map_or(0, |w| (w >> 32) as u32);
            if btf_fd != 0 {
                return Err(module_refusal(pc, id, &format!("fd {btf_fd}")));
            }
            match vmlinux_type(pc, id)? {
                BtfType::Func { name, .. } => {
                    if !table.weak.contains(&name) {
                        table.weak.push(name.clone());
                    }
                    insn.src = KSYM_ADDRESS_SRC;
                    insn.imm = index_of(&mut table.kfuncs, &name) as i32;
                    words[pc] = word(insn);
                }
                BtfType::Var { name, .. } => {
                    return Err(refusal(format!(
                        "insn {pc}: kernel variable `{name}` (a typed __ksym): bpfjet runs \
                         programs in userspace, where no kernel variable exists"
                    )))
                }
                _ => {
                    return Err(refusal(format!(
                        "insn {pc}: ld_imm64 of kernel btf_id {id}: not a function or variable"
                    )))
                }
            }
        }
        pc += if insn.code == LDDW { 2 } else { 1 };
    }
    Ok(table)
}

fn module_refusal(pc: usize, id: u32, btf: &str) -> Refusal {
    refusal(format!(
        "insn {pc}: btf_id {id} of a kernel module's BTF ({btf}): through bpf() bpfjet \
         resolves the kernel's own (vmlinux) kfuncs; its NF library and eNetSTL's kfuncs are \
         resolved by name for objects bpfjet loads itself"
    ))
}
