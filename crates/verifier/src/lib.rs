//! bpfjet's verifier: proves an eBPF program safe before it runs, in the
//! spirit of the kernel's verifier (and aiming for its verdicts on real
//! programs).
//!
//! The analysis is an abstract interpretation over every path of the
//! program, with state pruning: each register has a type (scalar, context,
//! packet, packet end, map pointer, map value, stack, helper memory, ...);
//! scalars and pointer offsets are tracked as tristate numbers plus signed
//! and unsigned 64/32-bit ranges; packet ranges are learned from comparisons
//! against `data_end`; stack bytes are tracked for initialisation and
//! spilled registers; helper calls are checked against prototypes
//! ([`proto`]); ringbuf reservations must be released on every path; loops
//! are explored until their state converges or the complexity budget runs out.
//!
//! ```
//! use bpfjet_verifier::{verify, VerifyEnv};
//! let prog = bpfjet_isa::assemble(
//!     "ldxw %r2, [%r1+0]\n ldxw %r3, [%r1+4]\n mov %r4, %r2\n add %r4, 14\n\
//!      jgt %r4, %r3, out\n ldxb %r0, [%r2+13]\n out:\n mov %r0, 2\n exit",
//! ).unwrap();
//! let facts = verify(&prog, &VerifyEnv::new(&[])).unwrap();
//! assert_eq!(facts.ctx_accesses.len(), 2);
//!
//! // One byte further is past what the comparison proved.
//! let bad = bpfjet_isa::assemble(
//!     "ldxw %r2, [%r1+0]\n ldxw %r3, [%r1+4]\n mov %r4, %r2\n add %r4, 14\n\
//!      jgt %r4, %r3, out\n ldxb %r0, [%r2+14]\n out:\n mov %r0, 2\n exit",
//! ).unwrap();
//! let e = verify(&bad, &VerifyEnv::new(&[])).unwrap_err();
//! assert_eq!((e.pc, e.rule), (Some(5), "pkt_out_of_range"));
//! ```
//!
//! Module map: the abstract domains ([`tnum`], [`range`], [`range_ops`],
//! [`reg_state`], [`stack`], [`frame`]) are independent of the driver;
//! instruction rules live in `alu`, `mem`, `branch`, `helper_check`,
//! `calls` (with `global_func`: global functions verified from their
//! prototypes) and [`ctx_rules`]; `cfg` is the static structure, `liveness`
//! what each instruction's continuation may read, `precision` which scalars'
//! values decisions depended on (walked back through the path's history),
//! `pruning` the state comparison and `driver` the exploration.

// A rejection carries its disassembly, source line and register dump; it is
// returned once per verification, so its size does not matter.
#![allow(clippy::result_large_err)]

mod alu;
mod branch;
mod calls;
mod cfg;
pub mod ctx_rules;
mod driver;
mod dynptr;
pub mod dynptr_kfunc;
pub mod env;
pub mod error;
pub mod facts;
pub mod frame;
mod global_func;
pub mod graph;
mod helper_check;
pub mod iter;
mod kfunc;
mod liveness;
mod map_refs;
pub mod map_struct;
mod may_goto;
mod mem;
pub mod module_kptr;
mod object_env;
mod precision;
pub mod printf_format;
pub mod proto;
mod pruning;
pub mod range;
pub mod range_ops;
pub mod reg_state;
mod spin_lock;
pub mod stack;
mod timer;
pub mod tnum;
mod tp_btf;

pub use branch::{decide as decide_branch, eval_cond, refine_side as refine_branch};
pub use env::{Policy, ProgType, VerifyEnv, COMPLEXITY_LIMIT};
pub use error::VerifyError;
pub use facts::{ConstKeyLookup, CtxAccess, Facts, MemBase, PktAccess, SubprogInfo, XdpMdField};
pub use object_env::ObjectProgramEnv;
pub use proto::{
    helper_proto, helper_protos, kfunc_proto, kfunc_protos, ArgType, HelperProto, KfuncArg,
    KfuncFlags, KfuncProto, KfuncRet, RetType,
};

use std::collections::BTreeMap;

use bpfjet_isa::{Decoded, Insn, RawInsn};

/// Verify a typed program (slot form, as `bpfjet_isa::decode_program`
/// returns it). `Ok` carries what the analysis proved.
pub fn verify(program: &[Insn], env: &VerifyEnv) -> Result<Facts, VerifyError> {
    verify_with_invalid(program, &BTreeMap::new(), env)
}

/// Verify a program decoded for loading ([`bpfjet_isa::decode_for_load`]):
/// a malformed slot is refused, with the decoder's reason, only when the
/// analysis reaches it, as the kernel does; `slots` are the raw slots the
/// program was decoded from (for the rejection's text). On `Ok` every
/// malformed slot is dead, and the caller must replace them
/// ([`bpfjet_isa::Decoded::trap_invalid`]) before running the program.
pub fn verify_decoded(
    decoded: &Decoded,
    slots: &[RawInsn],
    env: &VerifyEnv,
) -> Result<Facts, VerifyError> {
    if let (ProgType::Tracing, Some(why)) = (env.prog_type, env.tp_error) {
        return Err(VerifyError::new("tp_btf_attach", why));
    }
    // The kernel refuses an opcode outside its table for every slot at
    // load, also one bpfjet decodes (`callx`).
    let unknown = decoded.insns.iter().enumerate().find(|&(pc, insn)| {
        *insn != Insn::LdDwTail
            && slots
                .get(pc)
                .is_some_and(|raw| !bpfjet_isa::deferred::in_kernel_insn_table(raw.code))
    });
    if let Some((pc, _)) = unknown {
        let code = slots[pc].code;
        return Err(decode_rejection(
            &bpfjet_isa::DecodeError::BadOpcode { pc, code },
            slots,
        ));
    }
    let invalid = decoded
        .invalid
        .iter()
        .map(|(&pc, e)| (pc, decode_rejection(e, slots)))
        .collect();
    verify_with_invalid(&decoded.insns, &invalid, env)
}

/// Optimistic runs before the exact one ([`verify_with_invalid`]).
const OPTIMISTIC_ROUNDS: u32 = 8;

fn verify_with_invalid(
    program: &[Insn],
    invalid: &BTreeMap<usize, VerifyError>,
    env: &VerifyEnv,
) -> Result<Facts, VerifyError> {
    let cfg = match cfg::build(program) {
        Ok(c) => c,
        Err((pc, mut e)) => {
            e.pc = pc;
            if let Some(insn) = pc.and_then(|p| program.get(p)) {
                e.insn_text = bpfjet_isa::format_insn(insn, pc);
            }
            return Err(e);
        }
    };
    map_refs::check(program, env)?;
    let mut cfg = cfg;
    cfg.mark_callback_calls(program, env.kfuncs);
    // Optimistic pruning first: fully explored states whose precision
    // marks still wait for a loop's exploration prune on those marks, and
    // each such prune is checked again once they are final. A run whose
    // checks all held stands. Otherwise the next run compares, at the
    // prune points whose checks failed, the scalars the failed sources
    // ended up needing as if precise (learned precision), for a few
    // rounds; then the exact rule decides, and its verdict and message are
    // the ones reported.
    let mut hints = driver::Hints::new();
    let mut runs = 0;
    let counted = |verdict: Result<Facts, VerifyError>, runs: u32, learned: usize| {
        verdict.map(|mut facts| {
            facts.runs = runs;
            facts.learned_prune_points = learned as u32;
            facts
        })
    };
    while env.privileged() && runs < OPTIMISTIC_ROUNDS {
        let (verdict, failed) =
            driver::Verifier::new(program, invalid, env, cfg.clone(), true, &hints).run();
        runs += 1;
        if failed.is_empty() {
            if verdict.is_ok() {
                return counted(verdict, runs, hints.len());
            }
            break;
        }
        for (pc, marks) in &failed {
            driver::add_hint(&mut hints, *pc, marks);
        }
    }
    let exact_rule = driver::Hints::new();
    let (verdict, _) = driver::Verifier::new(program, invalid, env, cfg, false, &exact_rule).run();
    counted(verdict, runs + 1, 0)
}

/// Verify raw instruction slots: encoding errors (bad opcodes, jumps out of
/// range, truncated `lddw`) are rejections like any other — at load for
/// the kernel's load-time checks, when the analysis reaches the slot for
/// the others ([`verify_decoded`]).
pub fn verify_raw(slots: &[RawInsn], env: &VerifyEnv) -> Result<Facts, VerifyError> {
    match bpfjet_isa::decode_for_load(slots) {
        Ok(decoded) => verify_decoded(&decoded, slots, env),
        Err(e) => Err(decode_rejection(&e, slots)),
    }
}

/// A malformed encoding as a rejection (the kernel refuses these at load,
/// before or while verifying): the decoder's reason, naming the slot, with
/// the raw instruction when there is one.
pub fn decode_rejection(e: &bpfjet_isa::DecodeError, slots: &[RawInsn]) -> VerifyError {
    let rule = match e {
        bpfjet_isa::DecodeError::JumpOutOfRange { .. }
        | bpfjet_isa::DecodeError::CallOutOfRange { .. } => "jump_out_of_range",
        bpfjet_isa::DecodeError::JumpIntoLdDw { .. } => "jump_into_lddw",
        bpfjet_isa::DecodeError::BadRegister { .. } => "bad_register",
        _ => "bad_insn",
    };
    let text = e.to_string();
    // The decoder names the slot itself; the rejection names it once.
    let message = match e.pc() {
        Some(pc) => text
            .strip_prefix(&format!("insn {pc}: "))
            .unwrap_or(&text)
            .to_string(),
        None => text,
    };
    let mut v = VerifyError::new(rule, message);
    v.pc = e.pc();
    if let Some(raw) = e.pc().and_then(|pc| slots.get(pc)) {
        v.insn_text = format!(
            "code {:#04x} dst r{} src r{} off {} imm {}",
            raw.code, raw.dst, raw.src, raw.off, raw.imm
        );
    }
    v
}
