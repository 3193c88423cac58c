//! Calls: bpf-to-bpf calls, helpers, kfuncs and `callx`.
//!
//! A helper or kfunc call stores r1–r5 in the frame's argument array and
//! calls the Rust trampoline `bpfjet_jit_helper(ctx, kind, pc, id, depth,
//! args)` (see `crate::trampoline`), which dispatches through the same
//! `HelperRegistry` the interpreter uses. Afterwards the code reads the run
//! context's status word: non-zero means the run was aborted or a tail call
//! was granted, and `bpfjet_jit_resume` (cold) finishes the job — it runs the
//! tail-call target in place of the rest of this function, or returns for an
//! abort, which every caller then propagates by returning too.
//!
//! Helpers the lifter knows how to compile in (see `inline`) never reach
//! [`Lifter::helper_call`]; every other helper call goes through it.
//!
//! `bpf_tail_call` on a bound PROG_ARRAY (programs bound to the XDP
//! helpers) calls `bpfjet_jit_tail_call` directly: it returns the pair
//! (r0, taken); a taken tail call's r0 is the target's, which this function
//! returns at once (the target replaced it), otherwise r0 is the helper's
//! error and execution continues after the call.
//!
//! A bpf-to-bpf call checks the call-depth limit, calls the callee's LLVM
//! function with `depth + 1` and r1–r5, and checks the status word. The
//! callee has its own registers, so r6–r9 of the caller survive by
//! construction.

use super::{function_name, Frame, LResult, LiftError, Lifter, Types};
use crate::analysis::Prov;
use bpfjet_isa::{CallTarget, Reg};
use bpfjet_runtime::MAX_CALL_DEPTH;
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::basic_block::BasicBlock;
use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::values::{
    BasicMetadataValueEnum, BasicValueEnum, CallSiteValue, FunctionValue, IntValue, ValueKind,
};
use inkwell::IntPredicate;

/// Symbol names of the trampolines, resolved by the object loader.
pub(crate) const HELPER_SYMBOL: &str = "bpfjet_jit_helper";
pub(crate) const RESUME_SYMBOL: &str = "bpfjet_jit_resume";
pub(crate) const DEPTH_FAULT_SYMBOL: &str = "bpfjet_jit_depth_fault";
pub(crate) const TAIL_CALL_SYMBOL: &str = "bpfjet_jit_tail_call";

/// Which registry a trampoline call dispatches to.
pub(crate) const KIND_HELPER: u64 = 0;
pub(crate) const KIND_KFUNC: u64 = 1;

/// The Rust functions generated code calls.
pub(crate) struct Externs<'ctx> {
    pub helper: FunctionValue<'ctx>,
    pub resume: FunctionValue<'ctx>,
    pub depth_fault: FunctionValue<'ctx>,
    pub tail_call: FunctionValue<'ctx>,
}

impl<'ctx> Externs<'ctx> {
    pub(crate) fn declare(cx: &'ctx Context, module: &Module<'ctx>, t: Types<'ctx>) -> Self {
        let attr =
            |name: &str| cx.create_enum_attribute(Attribute::get_named_enum_kind_id(name), 0);
        let helper = module.add_function(
            HELPER_SYMBOL,
            t.i64.fn_type(
                &[
                    t.ptr.into(),
                    t.i64.into(),
                    t.i64.into(),
                    t.i64.into(),
                    t.i64.into(),
                    t.ptr.into(),
                ],
                false,
            ),
            Some(Linkage::External),
        );
        let resume = module.add_function(
            RESUME_SYMBOL,
            t.i64.fn_type(
                &[t.ptr.into(), t.i64.into(), t.i64.into(), t.ptr.into()],
                false,
            ),
            Some(Linkage::External),
        );
        let depth_fault = module.add_function(
            DEPTH_FAULT_SYMBOL,
            cx.void_type().fn_type(&[t.ptr.into(), t.i64.into()], false),
            Some(Linkage::External),
        );
        // { r0, taken }: returned in two registers.
        let outcome = cx.struct_type(&[t.i64.into(), t.i64.into()], false);
        let tail_call = module.add_function(
            TAIL_CALL_SYMBOL,
            outcome.fn_type(
                &[
                    t.ptr.into(),
                    t.ptr.into(),
                    t.i64.into(),
                    t.i64.into(),
                    t.ptr.into(),
                    t.i64.into(),
                ],
                false,
            ),
            Some(Linkage::External),
        );
        for f in [helper, resume, depth_fault, tail_call] {
            f.add_attribute(AttributeLoc::Function, attr("nounwind"));
        }
        for f in [resume, depth_fault] {
            f.add_attribute(AttributeLoc::Function, attr("cold"));
        }
        Externs {
            helper,
            resume,
            depth_fault,
            tail_call,
        }
    }
}

/// The value of a call that returns one.
pub(crate) fn basic_result(call: CallSiteValue<'_>) -> LResult<BasicValueEnum<'_>> {
    match call.try_as_basic_value() {
        ValueKind::Basic(v) => Ok(v),
        ValueKind::Instruction(_) => Err(LiftError::Build("call returns no value".into())),
    }
}

impl<'ctx> Lifter<'ctx, '_> {
    pub(super) fn call(
        &mut self,
        fr: &mut Frame<'ctx>,
        pc: usize,
        target: CallTarget,
    ) -> LResult<()> {
        match target {
            CallTarget::Local(off) => self.local_call(fr, pc, pc as i64 + 1 + i64::from(off)),
            CallTarget::Helper(id) => {
                if self.try_inline_helper(fr, pc, id)? {
                    return Ok(());
                }
                let id = self.t.i64.const_int(id as i64 as u64, true);
                self.helper_call(fr, pc, KIND_HELPER, id)
            }
            CallTarget::Kfunc(id) => {
                if self.try_graph_kfunc(fr, pc, id)?
                    || self.try_dynptr_kfunc(fr, pc, id)?
                    || self.try_kfunc(fr, pc, id)?
                {
                    return Ok(());
                }
                let id = self.t.i64.const_int(id as i64 as u64, true);
                self.helper_call(fr, pc, KIND_KFUNC, id)
            }
        }
    }

    /// `callx`: the register holds a helper id (the interpreter's meaning).
    pub(super) fn call_reg(&mut self, fr: &mut Frame<'ctx>, pc: usize, reg: Reg) -> LResult<()> {
        let id = self.reg(fr, reg)?;
        self.helper_call(fr, pc, KIND_HELPER, id)
    }

    fn store_args(&self, fr: &Frame<'ctx>) -> LResult<()> {
        for i in 0..5u8 {
            let v = self.reg(fr, i + 1)?;
            // SAFETY (for LLVM): the argument array has five elements.
            let p = unsafe {
                self.b.build_in_bounds_gep(
                    self.t.i64,
                    fr.args,
                    &[self.t.i64.const_int(u64::from(i), false)],
                    "argp",
                )?
            };
            self.b.build_store(p, v)?;
        }
        Ok(())
    }

    /// A call through the helper trampoline; r0 gets its result.
    fn helper_call(
        &mut self,
        fr: &mut Frame<'ctx>,
        pc: usize,
        kind: u64,
        id: IntValue<'ctx>,
    ) -> LResult<()> {
        let t = self.t;
        self.store_args(fr)?;
        let pc_value = t.i64.const_int(pc as u64, false);
        let args: [BasicMetadataValueEnum<'ctx>; 6] = [
            fr.ctx.into(),
            t.i64.const_int(kind, false).into(),
            pc_value.into(),
            id.into(),
            fr.depth.into(),
            fr.args.into(),
        ];
        let r0 = self.b.build_call(self.ext.helper, &args, "helper")?;
        let r0 = basic_result(r0)?.into_int_value();
        self.set_reg(fr, 0, r0)?;
        // Non-zero status: abort or tail call (see the module docs).
        let status = self.b.build_load(t.i64, fr.ctx, "status")?.into_int_value();
        let ok = self
            .b
            .build_int_compare(IntPredicate::EQ, status, t.i64.const_zero(), "ok")?;
        let cont = self.cx.append_basic_block(fr.func, "after_helper");
        let slow = self.cx.append_basic_block(fr.func, "helper_status");
        self.b.build_conditional_branch(ok, cont, slow)?;
        self.b.position_at_end(slow);
        let resumed = self.b.build_call(
            self.ext.resume,
            &[
                fr.ctx.into(),
                pc_value.into(),
                fr.depth.into(),
                fr.args.into(),
            ],
            "resume",
        )?;
        let resumed = basic_result(resumed)?;
        self.b.build_return(Some(&resumed))?;
        self.b.position_at_end(cont);
        Ok(())
    }

    /// `bpf_tail_call(ctx, map, index)` on a map the program is bound to: a
    /// direct call (see the module docs); other handles take the trampoline.
    pub(super) fn direct_tail_call(&mut self, fr: &mut Frame<'ctx>, pc: usize) -> LResult<bool> {
        let Prov::Const(handle) = self.prov(fr, pc, 2) else {
            return Ok(false);
        };
        if !self.bind.maps.contains_key(&handle) {
            return Ok(false);
        }
        let t = self.t;
        self.store_args(fr)?;
        let map = self.reg(fr, 2)?;
        let map = self.b.build_int_to_ptr(map, t.ptr, "prog_array")?;
        let index = self.reg(fr, 3)?;
        let call = self.b.build_call(
            self.ext.tail_call,
            &[
                fr.ctx.into(),
                map.into(),
                index.into(),
                fr.depth.into(),
                fr.args.into(),
                t.i64.const_int(pc as u64, false).into(),
            ],
            "tail_call",
        )?;
        let outcome = basic_result(call)?.into_struct_value();
        let r0 = self
            .b
            .build_extract_value(outcome, 0, "r0")?
            .into_int_value();
        let taken = self
            .b
            .build_extract_value(outcome, 1, "taken")?
            .into_int_value();
        let taken =
            self.b
                .build_int_compare(IntPredicate::NE, taken, t.i64.const_zero(), "taken")?;
        let done = self.cx.append_basic_block(fr.func, "tail_call_taken");
        let cont = self
            .cx
            .append_basic_block(fr.func, "tail_call_fell_through");
        self.b.build_conditional_branch(taken, done, cont)?;
        self.b.position_at_end(done);
        self.b.build_return(Some(&r0))?;
        self.b.position_at_end(cont);
        self.set_reg(fr, 0, r0)?;
        Ok(true)
    }

    /// The depth of a call one frame deeper than `fr`: branches to `ok` when
    /// it is under `MAX_CALL_DEPTH`, else to `fault`, which reports the
    /// fault at `pc` and returns 0. Leaves the builder at the end of `fault`.
    pub(super) fn deeper(
        &mut self,
        fr: &Frame<'ctx>,
        pc: usize,
        ok: BasicBlock<'ctx>,
        fault: BasicBlock<'ctx>,
    ) -> LResult<IntValue<'ctx>> {
        let t = self.t;
        let depth = self
            .b
            .build_int_add(fr.depth, t.i64.const_int(1, false), "depth")?;
        let too_deep = self.b.build_int_compare(
            IntPredicate::UGE,
            depth,
            t.i64.const_int(MAX_CALL_DEPTH as u64, false),
            "too_deep",
        )?;
        self.b.build_conditional_branch(too_deep, fault, ok)?;
        self.b.position_at_end(fault);
        self.b.build_call(
            self.ext.depth_fault,
            &[fr.ctx.into(), t.i64.const_int(pc as u64, false).into()],
            "",
        )?;
        self.b.build_return(Some(&t.i64.const_zero()))?;
        Ok(depth)
    }

    fn local_call(&mut self, fr: &mut Frame<'ctx>, pc: usize, target: i64) -> LResult<()> {
        let t = self.t;
        let callee = usize::try_from(target)
            .ok()
            .and_then(|slot| self.funcs.get(&slot).copied())
            .ok_or_else(|| LiftError::Unsupported {
                pc,
                what: format!("call target {target} is not a function entry"),
            })?;
        let call_bb = self.cx.append_basic_block(fr.func, "call");
        let fault_bb = self.cx.append_basic_block(fr.func, "call_depth_fault");
        let depth = self.deeper(fr, pc, call_bb, fault_bb)?;
        self.b.position_at_end(call_bb);
        let mut args: Vec<BasicMetadataValueEnum<'ctx>> = vec![fr.ctx.into(), depth.into()];
        for r in 1..=5 {
            args.push(self.reg(fr, r)?.into());
        }
        let r0 = self
            .b
            .build_call(callee, &args, &function_name(target as usize))?;
        let r0 = basic_result(r0)?.into_int_value();
        self.set_reg(fr, 0, r0)?;
        let status = self.b.build_load(t.i64, fr.ctx, "status")?.into_int_value();
        let ok = self
            .b
            .build_int_compare(IntPredicate::EQ, status, t.i64.const_zero(), "ok")?;
        let cont = self.cx.append_basic_block(fr.func, "after_call");
        let abort = self.cx.append_basic_block(fr.func, "call_aborted");
        self.b.build_conditional_branch(ok, cont, abort)?;
        self.b.position_at_end(abort);
        self.b.build_return(Some(&t.i64.const_zero()))?;
        self.b.position_at_end(cont);
        Ok(())
    }
}
