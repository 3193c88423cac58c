//! The kernel's object and graph kfuncs, `bpf_spin_lock`/`unlock` and
//! `bpf_kptr_xchg` without the helper trampoline.
//!
//! Compiled in (layouts: `bpfjet_kfuncs::graph::{list, rbtree}`):
//! - `bpf_rbtree_first` / `bpf_rbtree_root`: a load of the root's cached
//!   leftmost / top node;
//! - `bpf_rbtree_left` / `bpf_rbtree_right`: the child, if the node's
//!   owner word names this root (else 0, as the kernel's);
//! - `bpf_list_front` / `bpf_list_back`: the head's next / prev, 0 for an
//!   empty list (a zeroed head, never initialised, is empty: every kfunc
//!   that links or unlinks initialises it first);
//! - `bpf_kptr_xchg`: an atomic exchange of the kptr field;
//! - `bpf_spin_lock`: a compare-exchange 0 -> 1 (acquire), the contended
//!   case a call to a native that spins; `bpf_spin_unlock`: a release
//!   store of 0. Still a real lock: worker threads share a program's maps
//!   (a global `.data` lock is one lock for every CPU slot, as in the
//!   kernel). The held lock is recorded in the run context, so a run that
//!   aborts while holding it releases it (`trampoline::finish_slow`).
//!
//! Called directly (`crate::graph_natives`): `bpf_obj_new`, `bpf_obj_drop`,
//! `bpf_refcount_acquire`, list push/pop, `bpf_rbtree_add` (its `less`
//! callback passed as the compiled function, called from the native one
//! frame deeper) and `bpf_rbtree_remove`.
//!
//! Every argument is as the verifier proved it (`bpfjet_verifier::graph`):
//! these lowerings apply only to verified code, which is all the JIT runs.

use super::calls::basic_result;
use super::{Frame, LResult, LiftError, Lifter};
use crate::analysis::Prov;
use crate::graph_natives as natives;
use bpfjet_verifier::graph::GraphKfunc;
use inkwell::module::Linkage;
use inkwell::types::BasicMetadataTypeEnum;
use inkwell::values::{BasicMetadataValueEnum, IntValue, PointerValue};
use inkwell::{AtomicOrdering, AtomicRMWBinOp, IntPredicate};

/// Where generated code records the held `bpf_spin_lock` in the run
/// context (`trampoline::RunCtx::held_lock`).
pub(crate) const RUNCTX_HELD_LOCK_OFFSET: u64 = 24;

/// `bpf_kptr_xchg`'s helper number.
pub(super) const KPTR_XCHG: u32 = 194;

/// An argument of a graph native.
#[derive(Clone, Copy)]
enum Arg {
    Ctx,
    Reg(u8),
    Const(u64),
}

impl<'ctx> Lifter<'ctx, '_> {
    /// The graph kfunc call at `pc` compiled in or called directly; false
    /// leaves it to the trampoline (not a graph kfunc, or a push/add whose
    /// node offset or callback is not known here).
    pub(super) fn try_graph_kfunc(
        &mut self,
        fr: &mut Frame<'ctx>,
        pc: usize,
        id: i32,
    ) -> LResult<bool> {
        let Some(&k) = self.bind.graph_kfuncs.get(&id) else {
            return Ok(false);
        };
        use GraphKfunc::*;
        let node_off = self.bind.graph_node_offs.get(&pc).copied();
        let r0 = match k {
            RbFirst => self.load_at(fr, 1, 8)?,
            RbRoot => self.load_at(fr, 1, 0)?,
            RbLeft | RbRight => {
                let owner = self.load_at(fr, 2, 24)?;
                let root = self.reg(fr, 1)?;
                let child = self.load_at(fr, 2, if k == RbLeft { 16 } else { 8 })?;
                let mine = self
                    .b
                    .build_int_compare(IntPredicate::EQ, owner, root, "rb_mine")?;
                self.b
                    .build_select(mine, child, self.t.i64.const_zero(), "rb_child")?
                    .into_int_value()
            }
            ListFront | ListBack => {
                let head = self.reg(fr, 1)?;
                let n = self.load_at(fr, 1, if k == ListBack { 8 } else { 0 })?;
                let zero = self.t.i64.const_zero();
                let unset = self
                    .b
                    .build_int_compare(IntPredicate::EQ, n, zero, "list_unset")?;
                let itself = self
                    .b
                    .build_int_compare(IntPredicate::EQ, n, head, "list_empty")?;
                let empty = self.b.build_or(unset, itself, "list_none")?;
                self.b
                    .build_select(empty, zero, n, "list_peek")?
                    .into_int_value()
            }
            ObjNew => self.graph_native(fr, natives::OBJ_NEW, &[Arg::Ctx, Arg::Reg(1)])?,
            ObjDrop => self.graph_native(fr, natives::OBJ_DROP, &[Arg::Reg(1)])?,
            RefcountAcquire => self.graph_native(fr, natives::REFCOUNT_ACQUIRE, &[Arg::Reg(1)])?,
            ListPopFront | ListPopBack => self.graph_native(
                fr,
                natives::LIST_POP,
                &[Arg::Reg(1), Arg::Const(u64::from(k == ListPopBack))],
            )?,
            RbRemove => self.graph_native(fr, natives::RB_REMOVE, &[Arg::Reg(1), Arg::Reg(2)])?,
            ListPushFront | ListPushBack => {
                let Some(off) = node_off else {
                    return Ok(false);
                };
                self.graph_native(
                    fr,
                    natives::LIST_PUSH,
                    &[
                        Arg::Reg(1),
                        Arg::Reg(2),
                        Arg::Const(u64::from(off)),
                        Arg::Const(u64::from(k == ListPushBack)),
                    ],
                )?
            }
            RbAdd => {
                let Some(off) = node_off else {
                    return Ok(false);
                };
                return self.rb_add(fr, pc, off);
            }
        };
        self.set_reg(fr, 0, r0)?;
        Ok(true)
    }

    /// `bpf_rbtree_add_impl(root, node, less)` with a constant `less`: the
    /// native walks the tree and calls the callback's compiled function at
    /// the next call depth; an abort in the callback returns at once.
    fn rb_add(&mut self, fr: &mut Frame<'ctx>, pc: usize, node_off: u32) -> LResult<bool> {
        let Prov::Const(slot) = self.prov(fr, pc, 3) else {
            return Ok(false);
        };
        let Some(less) = usize::try_from(slot)
            .ok()
            .and_then(|s| self.funcs.get(&s).copied())
        else {
            return Ok(false);
        };
        let t = self.t;
        let call_bb = self.cx.append_basic_block(fr.func, "rb_add");
        let fault_bb = self.cx.append_basic_block(fr.func, "rb_add_depth_fault");
        let depth = self.deeper(fr, pc, call_bb, fault_bb)?;
        self.b.position_at_end(call_bb);
        let f = self.graph_decl(
            natives::RB_ADD,
            &[
                t.ptr.into(),
                t.i64.into(),
                t.i64.into(),
                t.i64.into(),
                t.i64.into(),
                t.ptr.into(),
            ],
        );
        let args: [BasicMetadataValueEnum<'ctx>; 6] = [
            fr.ctx.into(),
            depth.into(),
            self.reg(fr, 1)?.into(),
            self.reg(fr, 2)?.into(),
            t.i64.const_int(u64::from(node_off), false).into(),
            less.as_global_value().as_pointer_value().into(),
        ];
        let r0 = self.b.build_call(f, &args, "rb_add")?;
        let r0 = basic_result(r0)?.into_int_value();
        self.set_reg(fr, 0, r0)?;
        let status = self.b.build_load(t.i64, fr.ctx, "status")?.into_int_value();
        let ok = self
            .b
            .build_int_compare(IntPredicate::EQ, status, t.i64.const_zero(), "ok")?;
        let cont = self.cx.append_basic_block(fr.func, "after_rb_add");
        let abort = self.cx.append_basic_block(fr.func, "rb_add_aborted");
        self.b.build_conditional_branch(ok, cont, abort)?;
        self.b.position_at_end(abort);
        self.b.build_return(Some(&t.i64.const_zero()))?;
        self.b.position_at_end(cont);
        Ok(true)
    }

    /// `bpf_spin_lock(lock)` compiled in (see the module docs).
    pub(super) fn inline_spin_lock(&mut self, fr: &mut Frame<'ctx>) -> LResult<bool> {
        let t = self.t;
        let addr = self.reg(fr, 1)?;
        let lock = self.b.build_int_to_ptr(addr, t.ptr, "lockp")?;
        let taken = self
            .b
            .build_cmpxchg(
                lock,
                t.i32.const_zero(),
                t.i32.const_int(1, false),
                AtomicOrdering::Acquire,
                AtomicOrdering::Monotonic,
            )
            .map_err(|e| LiftError::Build(e.to_string()))?;
        let got = self
            .b
            .build_extract_value(taken, 1, "lock_taken")?
            .into_int_value();
        let slow = self.cx.append_basic_block(fr.func, "spin_lock_contended");
        let held = self.cx.append_basic_block(fr.func, "spin_lock_held");
        self.b.build_conditional_branch(got, held, slow)?;
        self.b.position_at_end(slow);
        let f = self.graph_decl(natives::SPIN_LOCK_SLOW, &[t.i64.into()]);
        self.b.build_call(f, &[addr.into()], "spin_lock_slow")?;
        self.b.build_unconditional_branch(held)?;
        self.b.position_at_end(held);
        self.b.build_store(self.held_lock_slot(fr)?, addr)?;
        self.set_reg(fr, 0, t.i64.const_zero())?;
        Ok(true)
    }

    /// `bpf_spin_unlock(lock)` compiled in (see the module docs).
    pub(super) fn inline_spin_unlock(&mut self, fr: &mut Frame<'ctx>) -> LResult<bool> {
        let t = self.t;
        let addr = self.reg(fr, 1)?;
        self.b
            .build_store(self.held_lock_slot(fr)?, t.i64.const_zero())?;
        let lock = self.b.build_int_to_ptr(addr, t.ptr, "lockp")?;
        let st = self.b.build_store(lock, t.i32.const_zero())?;
        st.set_atomic_ordering(AtomicOrdering::Release)
            .and_then(|()| st.set_alignment(4))
            .map_err(|e| LiftError::Build(e.to_string()))?;
        self.set_reg(fr, 0, t.i64.const_zero())?;
        Ok(true)
    }

    /// `bpf_kptr_xchg(field, new)`: an atomic exchange (acquire-release,
    /// as the runtime's).
    pub(super) fn inline_kptr_xchg(&mut self, fr: &mut Frame<'ctx>) -> LResult<bool> {
        let t = self.t;
        let field = self.reg(fr, 1)?;
        let field = self.b.build_int_to_ptr(field, t.ptr, "kptrp")?;
        let new = self.reg(fr, 2)?;
        let old = self
            .b
            .build_atomicrmw(
                AtomicRMWBinOp::Xchg,
                field,
                new,
                AtomicOrdering::AcquireRelease,
            )
            .map_err(|e| LiftError::Build(e.to_string()))?;
        self.set_reg(fr, 0, old)?;
        Ok(true)
    }

    fn held_lock_slot(&self, fr: &Frame<'ctx>) -> LResult<PointerValue<'ctx>> {
        let t = self.t;
        // SAFETY (for LLVM): inside the run context (`RunCtx::held_lock`).
        Ok(unsafe {
            self.b.build_in_bounds_gep(
                t.i8,
                fr.ctx,
                &[t.i64.const_int(RUNCTX_HELD_LOCK_OFFSET, false)],
                "held_lockp",
            )?
        })
    }

    /// The i64 at `reg + off`.
    fn load_at(&self, fr: &Frame<'ctx>, reg: u8, off: u64) -> LResult<IntValue<'ctx>> {
        let t = self.t;
        let base = self.reg(fr, reg)?;
        let at = self
            .b
            .build_int_add(base, t.i64.const_int(off, false), "graph_at")?;
        let p = self.b.build_int_to_ptr(at, t.ptr, "graph_p")?;
        Ok(self.b.build_load(t.i64, p, "graph_word")?.into_int_value())
    }

    fn graph_decl(
        &self,
        name: &str,
        params: &[BasicMetadataTypeEnum<'ctx>],
    ) -> inkwell::values::FunctionValue<'ctx> {
        if let Some(f) = self.module.get_function(name) {
            return f;
        }
        let f = self.module.add_function(
            name,
            self.t.i64.fn_type(params, false),
            Some(Linkage::External),
        );
        self.nounwind(f);
        f
    }

    /// A call of graph native `name` (none of them can abort the run).
    fn graph_native(
        &mut self,
        fr: &Frame<'ctx>,
        name: &str,
        args: &[Arg],
    ) -> LResult<IntValue<'ctx>> {
        let t = self.t;
        let params: Vec<BasicMetadataTypeEnum<'ctx>> = args
            .iter()
            .map(|a| match a {
                Arg::Ctx => t.ptr.into(),
                _ => t.i64.into(),
            })
            .collect();
        let f = self.graph_decl(name, &params);
        let mut values: Vec<BasicMetadataValueEnum<'ctx>> = Vec::with_capacity(args.len());
        for a in args {
            values.push(match *a {
                Arg::Ctx => fr.ctx.into(),
                Arg::Reg(r) => self.reg(fr, r)?.into(),
                Arg::Const(c) => t.i64.const_int(c, false).into(),
            });
        }
        let r0 = self.b.build_call(f, &values, name)?;
        Ok(basic_result(r0)?.into_int_value())
    }
}
