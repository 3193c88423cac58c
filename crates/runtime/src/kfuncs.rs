//! Kfuncs of bpfjet's NF library (`bpfjet_kfuncs`), bound to a program: a
//! program's kfunc call `imm` indexes the object's kfunc table, so its
//! registry maps each index to the library's kfunc of that name.

use crate::error::Access;
use crate::helpers::Helper;
use bpfjet_kfuncs::Kfunc;

use crate::region::Region;
/// The library's verifier prototypes (`VerifyEnv::extra_kfuncs`).
pub use bpfjet_kfuncs::verifier_protos;
/// The library's object types (`VerifyEnv::module_types`).
pub use bpfjet_kfuncs::MODULE_TYPES;
use bpfjet_verifier::proto::{KfuncArg, KfuncRet};

/// `k` callable as kfunc number `index`. In bounds-checked mode every
/// memory argument is checked against the run's regions first (the
/// verifier proves them otherwise).
pub fn kfunc_helper(index: u32, k: &'static Kfunc) -> Helper {
    Helper::new(index, k.name, move |ctx, a| {
        if ctx.is_bounds_checked() {
            for (i, arg) in k.proto.args.iter().enumerate() {
                let (len, access) = match *arg {
                    KfuncArg::Mem => (a[i + 1], Access::Read),
                    KfuncArg::MutMem => (a[i + 1], Access::Write),
                    KfuncArg::InMem(n) => (u64::from(n), Access::Read),
                    KfuncArg::OutMem(n) => (u64::from(n), Access::Write),
                    _ => continue,
                };
                ctx.check_mem(a[i], len, access)?;
                if a[i] == 0 {
                    return Err(ctx.fault(format!(
                        "kfunc {}: argument {} is a null pointer",
                        k.name,
                        i + 1
                    )));
                }
            }
        }
        // SAFETY: the memory arguments are valid for the sizes the
        // prototype names: proven by the verifier, or checked just above.
        let r0 = unsafe { (k.native)(a[0], a[1], a[2], a[3], a[4]) };
        // Memory a kfunc returns (a sampler, a list-bucket handle) is the
        // program's to access for its size, as the verifier assumes.
        let size = match k.proto.ret {
            KfuncRet::Mem(size) => Some(u64::from(size)),
            KfuncRet::MemOfArgSize(n) => a.get(usize::from(n).wrapping_sub(1)).copied(),
            KfuncRet::Integer | KfuncRet::Void | KfuncRet::Module(_) => None,
        };
        if let Some(size) = size.filter(|_| r0 != 0) {
            ctx.register_region(Region::writable(r0, size));
        }
        // A library object (eNetSTL's nodes, list-buckets handle) is
        // read-only to the program; its kfuncs check every object argument
        // themselves, so a forged one is harmless.
        if let KfuncRet::Module(ty) = k.proto.ret {
            if let Some(t) = bpfjet_kfuncs::module_type(ty).filter(|_| r0 != 0) {
                ctx.register_region(Region::read_only(r0, u64::from(t.size)));
            }
        }
        Ok(r0)
    })
}

/// Whether bpfjet provides kfunc `name` (its library's, or the kernel's
/// object and graph kfuncs).
pub fn provided(name: &str) -> bool {
    bpfjet_kfuncs::by_name(name).is_some()
        || bpfjet_verifier::graph::GraphKfunc::from_name(name).is_some()
        || bpfjet_verifier::dynptr_kfunc::DynptrKfunc::from_name(name).is_some()
}

/// `p`'s instructions with every kfunc address (`bpf_ksym_exists(kfunc)`,
/// an `lddw` of [`bpfjet_obj::KSYM_ADDRESS_SRC`]) made a constant, as a
/// loader resolves it: 1 for a kfunc bpfjet provides (the kernel's is a
/// non-NULL pointer the program can only test), 0 for a missing one
/// declared `__weak` (so the calls it guards are dead code). A missing
/// kfunc not declared weak fails the load, as in libbpf.
pub fn resolve_ksym_addresses<'p>(
    p: &'p bpfjet_obj::Program,
    obj: &bpfjet_obj::Object,
) -> Result<std::borrow::Cow<'p, [bpfjet_isa::RawInsn]>, crate::RuntimeError> {
    let is_address = |i: &bpfjet_isa::RawInsn| {
        i.code == bpfjet_isa::opcode::LDDW && i.src == bpfjet_obj::KSYM_ADDRESS_SRC
    };
    if !p.insns.iter().any(is_address) {
        return Ok(std::borrow::Cow::Borrowed(&p.insns));
    }
    let mut insns = p.insns.clone();
    let mut pc = 0;
    while pc + 1 < insns.len() {
        if is_address(&insns[pc]) {
            let index = insns[pc].imm;
            let name = usize::try_from(index)
                .ok()
                .and_then(|i| obj.kfuncs.get(i))
                .cloned()
                .unwrap_or_else(|| format!("#{index}"));
            let value = if provided(&name) {
                1
            } else if obj.weak_kfuncs.contains(&name) {
                0
            } else {
                return Err(crate::RuntimeError::UnsupportedKfunc {
                    program: p.name.clone(),
                    pc,
                    name,
                });
            };
            insns[pc].src = 0;
            insns[pc].imm = value;
            insns[pc + 1].imm = 0;
            pc += 2;
        } else {
            pc += 1;
        }
    }
    Ok(std::borrow::Cow::Owned(insns))
}
