//! The check that a program's `extern ... __ksym` declaration of a kfunc
//! (its BTF `FUNC_PROTO`) matches the library's: same number of parameters,
//! a pointer where the library takes memory, an integer where it takes a
//! scalar or a size, and a value returned exactly when the library returns
//! one. Integer widths and pointee types are not compared: the C headers of
//! eNetSTL and bpfjet spell them differently for the same ABI (`u16 val` is
//! passed in a 64-bit register either way), and the verifier checks the
//! memory a pointer must reach from the library's prototype.

use crate::catalog::Kfunc;
use bpfjet_obj::{Btf, BtfType};
use bpfjet_verifier::proto::{KfuncArg, KfuncRet};

/// What a parameter or return type is at the ABI level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Void,
    Integer,
    Pointer,
    Other,
}

fn kind(btf: &Btf, id: u32) -> Kind {
    match btf.resolve(id).and_then(|id| btf.type_by_id(id)) {
        Some(BtfType::Void) => Kind::Void,
        Some(BtfType::Int { .. } | BtfType::Enum { .. }) => Kind::Integer,
        Some(BtfType::Ptr { .. }) => Kind::Pointer,
        _ => Kind::Other,
    }
}

fn expected(arg: KfuncArg) -> Kind {
    match arg {
        KfuncArg::None => Kind::Void,
        KfuncArg::Scalar | KfuncArg::Size | KfuncArg::KnownSize => Kind::Integer,
        _ => Kind::Pointer,
    }
}

fn name(k: Kind) -> &'static str {
    match k {
        Kind::Void => "void",
        Kind::Integer => "an integer",
        Kind::Pointer => "a pointer",
        Kind::Other => "neither an integer nor a pointer",
    }
}

/// `Ok` when the object's BTF declares `k` compatibly (or does not declare
/// it at all: objects without BTF for their externs are taken as written);
/// otherwise why not, naming the parameter.
pub fn check(k: &Kfunc, btf: &Btf) -> Result<(), String> {
    let Some(func) = btf.func_id(k.name) else {
        return Ok(());
    };
    let Some(BtfType::Func { proto, .. }) = btf.type_by_id(func) else {
        return Ok(());
    };
    let Some(BtfType::FuncProto { ret, params }) = btf.type_by_id(*proto) else {
        return Err(format!(
            "its BTF declaration has no prototype (bpfjet's: {})",
            k.c_decl
        ));
    };
    let args: Vec<KfuncArg> = k
        .proto
        .args
        .iter()
        .copied()
        .filter(|a| *a != KfuncArg::None)
        .collect();
    if params.len() != args.len() {
        return Err(format!(
            "declared with {} parameters, bpfjet's has {}: {}",
            params.len(),
            args.len(),
            k.c_decl
        ));
    }
    for (i, (p, a)) in params.iter().zip(&args).enumerate() {
        let (got, want) = (kind(btf, p.type_id), expected(*a));
        if got != want {
            return Err(format!(
                "parameter {} ({}) is {}, bpfjet's is {}: {}",
                i + 1,
                if p.name.is_empty() {
                    "unnamed"
                } else {
                    &p.name
                },
                name(got),
                name(want),
                k.c_decl
            ));
        }
    }
    let got = kind(btf, *ret);
    let want = match k.proto.ret {
        KfuncRet::Void => Kind::Void,
        KfuncRet::Integer => Kind::Integer,
        KfuncRet::Mem(_) | KfuncRet::MemOfArgSize(_) | KfuncRet::Module(_) => Kind::Pointer,
    };
    // A program may ignore a result (declare it void); it may not expect
    // one the kfunc does not produce.
    if got != want && !(got == Kind::Void && want == Kind::Integer) {
        return Err(format!(
            "returns {}, bpfjet's returns {}: {}",
            name(got),
            name(want),
            k.c_decl
        ));
    }
    Ok(())
}
