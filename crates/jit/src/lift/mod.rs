//! Lifting verified bytecode to LLVM IR.
//!
//! One LLVM function per BPF function (`bpf_fn_<slot>`, internal, so LLVM
//! may inline it or change its calling convention) with the signature
//! `i64 (ptr ctx, i64 depth, i64 r1, .., i64 r5)`, plus a C-ABI entry wrapper
//! `bpfjet_entry_<slot>(ptr ctx, i64 depth, ptr args) -> i64` that native
//! callers (the runner, callbacks, tail calls) use. Registers r0–r9 are
//! allocas and each function owns a 512-byte stack alloca; `mem2reg`/SROA
//! turn both into SSA values. r10 is never stored: it is the stack
//! allocation's end, and accesses through registers that the
//! [`crate::analysis::stack_pointers`] pass proved frame-relative address the
//! allocation directly, so the stack does not escape unless the program
//! really lets its address out (e.g. to a helper).

mod alu;
mod bktlist;
pub(crate) mod calls;
mod control;
mod copy;
mod direct;
mod graph;
mod inline;
mod kfunc;
mod mem;
mod node_kfunc;
mod ptr_kfunc;
mod reduce;
mod thread_slots;

pub(crate) use graph::RUNCTX_HELD_LOCK_OFFSET;
pub(crate) use inline::RUNCTX_CPU_OFFSET;
pub(crate) use thread_slots::RUNCTX_THREAD_SLOTS_OFFSET;

use crate::analysis::{self, Function, Prov, RegFacts};
use crate::bindings::Resolved;
use crate::error::JitError;
use crate::options::JitOptions;
use bpfjet_isa::{Insn, Operand, Reg, MAY_GOTO_BUDGET};
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::basic_block::BasicBlock;
use inkwell::builder::{Builder, BuilderError};
use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::types::{IntType, PointerType};
use inkwell::values::{BasicMetadataValueEnum, FunctionValue, GlobalValue, IntValue, PointerValue};
use inkwell::AddressSpace;
use std::collections::{BTreeMap, HashMap};

/// Bytes of stack per frame.
pub(crate) const STACK_SIZE: u64 = bpfjet_runtime::STACK_SIZE as u64;

/// Why lifting one function failed.
pub(crate) enum LiftError {
    Build(String),
    Unsupported { pc: usize, what: String },
}

impl From<BuilderError> for LiftError {
    fn from(e: BuilderError) -> Self {
        LiftError::Build(e.to_string())
    }
}

pub(crate) type LResult<T> = Result<T, LiftError>;

/// Name of the internal LLVM function of the BPF function at `slot`.
pub(crate) fn function_name(slot: usize) -> String {
    format!("bpf_fn_{slot}")
}

/// Name of the C-ABI entry wrapper of the BPF function at `slot`.
pub(crate) fn entry_name(slot: usize) -> String {
    format!("bpfjet_entry_{slot}")
}

#[derive(Clone, Copy)]
pub(crate) struct Types<'ctx> {
    pub i8: IntType<'ctx>,
    pub i16: IntType<'ctx>,
    pub i32: IntType<'ctx>,
    pub i64: IntType<'ctx>,
    pub ptr: PointerType<'ctx>,
}

/// The function being lifted.
pub(crate) struct Frame<'ctx> {
    pub func: FunctionValue<'ctx>,
    pub f: Function,
    /// r0–r9.
    pub regs: [PointerValue<'ctx>; 10],
    /// The 512-byte stack; r10 is its end.
    pub stack: PointerValue<'ctx>,
    /// r1–r5 as handed to helper trampolines.
    pub args: PointerValue<'ctx>,
    pub ctx: PointerValue<'ctx>,
    pub depth: IntValue<'ctx>,
    pub blocks: BTreeMap<usize, BasicBlock<'ctx>>,
    pub facts: Vec<RegFacts>,
    /// Slots before this were already scanned for a copy run that did not
    /// qualify (see `copy`); not scanning them again keeps lifting linear.
    pub copy_scanned: usize,
    /// The slot of the kfunc call being lifted: its pointer arguments'
    /// provenance is looked up there (`Lifter::pointer`).
    pub call_pc: usize,
    /// This invocation's `may_goto` budget (`MAY_GOTO_BUDGET` at entry, as
    /// the kernel's hidden per-subprogram counter); None in a function
    /// without a `may_goto`.
    pub may_goto: Option<PointerValue<'ctx>>,
}

pub(crate) struct Lifter<'ctx, 'a> {
    pub cx: &'ctx Context,
    pub module: &'a Module<'ctx>,
    pub b: Builder<'ctx>,
    pub t: Types<'ctx>,
    pub insns: &'a [Insn],
    pub opts: &'a JitOptions,
    pub funcs: BTreeMap<usize, FunctionValue<'ctx>>,
    pub ext: calls::Externs<'ctx>,
    /// Maps, constant keys and helper semantics the code may assume.
    pub bind: &'a Resolved,
    /// Constant copies of frozen map values, by index in `bind.frozen`.
    pub frozen: Vec<PointerValue<'ctx>>,
    /// Array lookups compiled in (`inline::inline_array_lookup`): the slot
    /// of the call and the value storage its result points into. Accesses
    /// through that result address the storage's symbol (see
    /// `mem::value_base`), so LLVM tells apart accesses to different maps.
    pub array_values: HashMap<usize, GlobalValue<'ctx>>,
}

/// Lift a loaded program (`insns` with every `lddw` resolved to an
/// immediate) whose functions are `functions` into a new module.
pub(crate) fn lift_module<'ctx>(
    cx: &'ctx Context,
    insns: &[Insn],
    functions: &[Function],
    opts: &JitOptions,
    bind: &Resolved,
) -> Result<Module<'ctx>, JitError> {
    // The module starts from the declarations of the map symbols (see
    // `crate::bindings::map_declarations_ir`).
    let declarations = crate::bindings::map_declarations_ir(bind.map_count);
    let buffer = inkwell::memory_buffer::MemoryBuffer::create_from_memory_range_copy(
        declarations.as_bytes(),
        "bpfjet",
    );
    let module = cx
        .create_module_from_ir(buffer)
        .map_err(|e| JitError::Codegen(format!("map symbol declarations: {e}")))?;
    let t = Types {
        i8: cx.i8_type(),
        i16: cx.i16_type(),
        i32: cx.i32_type(),
        i64: cx.i64_type(),
        ptr: cx.ptr_type(AddressSpace::default()),
    };
    let ext = calls::Externs::declare(cx, &module, t);
    let mut frozen = Vec::with_capacity(bind.frozen.len());
    for (i, value) in bind.frozen.iter().enumerate() {
        let bytes = cx.const_string(&value.bytes, false);
        let global = module.add_global(bytes.get_type(), None, &format!("bpfjet_frozen_{i}"));
        global.set_initializer(&bytes);
        global.set_constant(true);
        global.set_linkage(Linkage::Private);
        global.set_alignment(8);
        frozen.push(global.as_pointer_value());
    }
    let mut lifter = Lifter {
        cx,
        module: &module,
        b: cx.create_builder(),
        t,
        insns,
        opts,
        funcs: BTreeMap::new(),
        ext,
        bind,
        frozen,
        array_values: HashMap::new(),
    };
    let fn_type = t.i64.fn_type(
        &[
            t.ptr.into(),
            t.i64.into(),
            t.i64.into(),
            t.i64.into(),
            t.i64.into(),
            t.i64.into(),
            t.i64.into(),
        ],
        false,
    );
    for f in functions {
        let func = module.add_function(&function_name(f.entry), fn_type, Some(Linkage::Internal));
        lifter.nounwind(func);
        lifter.funcs.insert(f.entry, func);
    }
    for f in functions {
        let name = function_name(f.entry);
        let to_jit = |e: LiftError| match e {
            LiftError::Build(message) => JitError::Build {
                function: name.clone(),
                message,
            },
            LiftError::Unsupported { pc, what } => JitError::Unsupported { pc, what },
        };
        lifter.lift_function(*f).map_err(to_jit)?;
        lifter.entry_wrapper(f.entry).map_err(to_jit)?;
    }
    Ok(module)
}

impl<'ctx> Lifter<'ctx, '_> {
    pub(crate) fn nounwind(&self, func: FunctionValue<'ctx>) {
        let kind = Attribute::get_named_enum_kind_id("nounwind");
        func.add_attribute(
            AttributeLoc::Function,
            self.cx.create_enum_attribute(kind, 0),
        );
    }

    fn lift_function(&mut self, f: Function) -> LResult<()> {
        let func = self.funcs[&f.entry];
        let t = self.t;
        let entry_bb = self.cx.append_basic_block(func, "entry");
        self.b.position_at_end(entry_bb);
        let param = |i: u32| {
            func.get_nth_param(i)
                .ok_or(LiftError::Build("missing parameter".into()))
        };
        let ctx = param(0)?.into_pointer_value();
        let depth = param(1)?.into_int_value();
        let mut regs = Vec::with_capacity(10);
        for r in 0..10 {
            regs.push(self.b.build_alloca(t.i64, &format!("r{r}"))?);
        }
        let stack = self
            .b
            .build_array_alloca(t.i8, t.i64.const_int(STACK_SIZE, false), "stack")?;
        if let Some(i) = stack.as_instruction() {
            i.set_alignment(16)
                .map_err(|e| LiftError::Build(e.to_string()))?;
        }
        let args = self
            .b
            .build_array_alloca(t.i64, t.i64.const_int(5, false), "args")?;
        // Only a function that has a `may_goto` keeps a budget.
        let may_goto = match self.insns[f.entry..f.end]
            .iter()
            .any(|i| matches!(i, Insn::MayGoto { .. }))
        {
            true => {
                let left = self.b.build_alloca(t.i64, "may_goto_left")?;
                self.b
                    .build_store(left, t.i64.const_int(MAY_GOTO_BUDGET, false))?;
                Some(left)
            }
            false => None,
        };
        let regs: [PointerValue<'ctx>; 10] = regs
            .try_into()
            .map_err(|_| LiftError::Build("register allocas".into()))?;
        for (r, slot) in regs.iter().enumerate() {
            let value = if (1..=5).contains(&r) {
                param(r as u32 + 1)?.into_int_value()
            } else {
                t.i64.const_zero()
            };
            self.b.build_store(*slot, value)?;
        }
        if self.opts.zero_stack {
            self.b.build_memset(
                stack,
                16,
                t.i8.const_zero(),
                t.i64.const_int(STACK_SIZE, false),
            )?;
        }
        let mut blocks = BTreeMap::new();
        for leader in analysis::block_leaders(self.insns, f) {
            blocks.insert(
                leader,
                self.cx.append_basic_block(func, &format!("pc{leader}")),
            );
        }
        let first = blocks[&f.entry];
        self.b.build_unconditional_branch(first)?;
        let mut fr = Frame {
            func,
            f,
            regs,
            stack,
            args,
            ctx,
            depth,
            blocks,
            facts: analysis::stack_pointers(self.insns, f),
            copy_scanned: f.entry,
            call_pc: f.entry,
            may_goto,
        };
        let mut pc = f.entry;
        while pc < f.end {
            let insn = self.insns[pc];
            if let Some(&bb) = fr.blocks.get(&pc) {
                if !self.terminated() {
                    self.b.build_unconditional_branch(bb)?;
                }
                self.b.position_at_end(bb);
            } else if self.terminated() {
                // Unreachable code after a jump or exit.
                let bb = self.cx.append_basic_block(func, &format!("dead{pc}"));
                self.b.position_at_end(bb);
            }
            if fr.facts[pc - f.entry].is_none() {
                // Never reached: keep the block well-formed and move on.
                if !self.terminated() {
                    self.b.build_unreachable()?;
                }
                pc += insn.slots();
                continue;
            }
            if let Some(next) = self.copy_run(&mut fr, pc)? {
                pc = next;
                continue;
            }
            self.lift_insn(&mut fr, pc, insn)?;
            pc += insn.slots();
        }
        if !self.terminated() {
            return Err(LiftError::Unsupported {
                pc: f.end.saturating_sub(1),
                what: "execution falls through into the next function".into(),
            });
        }
        Ok(())
    }

    fn entry_wrapper(&mut self, slot: usize) -> LResult<()> {
        let t = self.t;
        let ty = t
            .i64
            .fn_type(&[t.ptr.into(), t.i64.into(), t.ptr.into()], false);
        let wrapper = self
            .module
            .add_function(&entry_name(slot), ty, Some(Linkage::External));
        self.nounwind(wrapper);
        let bb = self.cx.append_basic_block(wrapper, "entry");
        self.b.position_at_end(bb);
        let param = |i: u32| {
            wrapper
                .get_nth_param(i)
                .ok_or(LiftError::Build("missing parameter".into()))
        };
        let ctx = param(0)?;
        let depth = param(1)?;
        let args = param(2)?.into_pointer_value();
        let mut call_args: Vec<BasicMetadataValueEnum<'ctx>> = vec![ctx.into(), depth.into()];
        for i in 0..5 {
            // SAFETY (for LLVM): `args` points to five i64s.
            let p = unsafe {
                self.b
                    .build_in_bounds_gep(t.i64, args, &[t.i64.const_int(i, false)], "argp")?
            };
            let v = self.b.build_load(t.i64, p, &format!("a{}", i + 1))?;
            call_args.push(v.into());
        }
        let r0 = self.b.build_call(self.funcs[&slot], &call_args, "r0")?;
        let r0 = calls::basic_result(r0)?;
        self.b.build_return(Some(&r0))?;
        Ok(())
    }

    pub(crate) fn terminated(&self) -> bool {
        self.b
            .get_insert_block()
            .is_none_or(|bb| bb.get_terminator().is_some())
    }

    fn lift_insn(&mut self, fr: &mut Frame<'ctx>, pc: usize, insn: Insn) -> LResult<()> {
        match insn {
            Insn::Alu {
                width,
                op,
                dst,
                src,
            } => self.alu(fr, pc, width, op, dst, src),
            Insn::Endian { order, bits, dst } => self.endian(fr, order, bits, dst),
            Insn::LdDw { dst, imm, .. } => {
                let v = self.lddw_value(pc, imm)?;
                self.set_reg(fr, dst, v)
            }
            Insn::LdDwTail => Ok(()),
            Insn::LdPacket { .. } => Err(LiftError::Unsupported {
                pc,
                what: "legacy packet loads are not supported".into(),
            }),
            Insn::Load {
                size,
                sign_extend,
                dst,
                src,
                off,
            } => self.load(fr, pc, size, sign_extend, dst, src, off),
            Insn::Store {
                size,
                dst,
                off,
                src,
            } => self.store(fr, pc, size, dst, off, src),
            Insn::Atomic {
                width,
                op,
                fetch,
                dst,
                src,
                off,
            } => self.atomic(fr, pc, width, op, fetch, dst, src, off),
            Insn::LoadAcquire {
                size,
                dst,
                src,
                off,
            } => self.load_acquire(fr, pc, size, dst, src, off),
            Insn::StoreRelease {
                size,
                dst,
                off,
                src,
            } => self.store_release(fr, pc, size, dst, off, src),
            Insn::Ja { .. } => self.ja(fr, pc, insn),
            Insn::MayGoto { .. } => self.may_goto(fr, pc, insn),
            Insn::Jmp {
                width,
                op,
                dst,
                src,
                ..
            } => self.jmp(fr, pc, insn, width, op, dst, src),
            Insn::Call(target) => self.call(fr, pc, target),
            Insn::CallReg { reg } => self.call_reg(fr, pc, reg),
            Insn::Exit => self.exit(fr),
        }
    }

    /// The value of an `lddw`: an address inside a frozen map value becomes
    /// an address inside the module's constant copy of it, so that loads
    /// through it fold to constants; other map handles and value addresses
    /// become their symbols (plus the offset), never the address itself.
    fn lddw_value(&self, pc: usize, imm: u64) -> LResult<IntValue<'ctx>> {
        let t = self.t;
        let Some((i, off)) = self.bind.frozen_at(imm) else {
            return match self.bind.lddw.get(&pc) {
                Some(crate::bindings::MapRef::Handle(index)) => {
                    self.map_address(&crate::bindings::map_symbol(*index), 0)
                }
                Some(crate::bindings::MapRef::Direct { index, offset }) => {
                    self.map_address(&crate::bindings::map_direct_symbol(*index), *offset)
                }
                None => Ok(t.i64.const_int(imm, false)),
            };
        };
        let global = self.frozen[i];
        // SAFETY (for LLVM): `off` is inside the global (checked by frozen_at).
        let p = unsafe {
            self.b
                .build_in_bounds_gep(t.i8, global, &[t.i64.const_int(off, false)], "frozen")?
        };
        Ok(self.b.build_ptr_to_int(p, t.i64, "frozen_addr")?)
    }

    /// The address of map symbol `name` plus `offset`, as an integer.
    pub(crate) fn map_address(&self, name: &str, offset: u64) -> LResult<IntValue<'ctx>> {
        let offset = self.t.i64.const_int(offset, false);
        self.map_address_plus(name, offset)
    }

    /// The address of map symbol `name` plus `offset`, as an integer. The
    /// `inbounds` GEP from the symbol tells LLVM the result is not null (a
    /// plain integer add would not), so checks of a lookup's result fold as
    /// they did when the address was a constant. (The symbols have an
    /// opaque type: LLVM knows nothing of the object's size.)
    pub(crate) fn map_address_plus(
        &self,
        name: &str,
        offset: IntValue<'ctx>,
    ) -> LResult<IntValue<'ctx>> {
        let t = self.t;
        let global = self
            .module
            .get_global(name)
            .ok_or_else(|| LiftError::Build(format!("map symbol {name} is not declared")))?;
        // SAFETY (for LLVM): the offset stays inside the map's memory, which
        // the symbol resolves to (the verifier proved the access in range;
        // an array lookup's out-of-range address is discarded by its select).
        let p = unsafe {
            self.b
                .build_in_bounds_gep(t.i8, global.as_pointer_value(), &[offset], name)?
        };
        Ok(self.b.build_ptr_to_int(p, t.i64, "map_addr")?)
    }

    /// What the analysis knows about `r` before slot `pc`.
    pub(crate) fn prov(&self, fr: &Frame<'ctx>, pc: usize, r: Reg) -> Prov {
        if r == bpfjet_isa::FRAME_POINTER {
            return Prov::Stack(0);
        }
        fr.facts
            .get(pc - fr.f.entry)
            .copied()
            .flatten()
            .and_then(|regs| regs.get(usize::from(r)).copied())
            .unwrap_or(Prov::Unknown)
    }

    /// The frame pointer as an integer (exposes the stack's address).
    pub(crate) fn frame_pointer(&self, fr: &Frame<'ctx>) -> LResult<IntValue<'ctx>> {
        let base = self.b.build_ptr_to_int(fr.stack, self.t.i64, "stack")?;
        Ok(self
            .b
            .build_int_add(base, self.t.i64.const_int(STACK_SIZE, false), "r10")?)
    }

    pub(crate) fn reg(&self, fr: &Frame<'ctx>, r: Reg) -> LResult<IntValue<'ctx>> {
        match fr.regs.get(usize::from(r)) {
            Some(slot) => Ok(self
                .b
                .build_load(self.t.i64, *slot, &format!("r{r}"))?
                .into_int_value()),
            None => self.frame_pointer(fr),
        }
    }

    pub(crate) fn set_reg(&self, fr: &Frame<'ctx>, r: Reg, v: IntValue<'ctx>) -> LResult<()> {
        let slot = fr
            .regs
            .get(usize::from(r))
            .ok_or(LiftError::Build(format!("write to r{r}")))?;
        self.b.build_store(*slot, v)?;
        Ok(())
    }

    /// A 64-bit operand: registers as they are, immediates sign-extended.
    pub(crate) fn operand(&self, fr: &Frame<'ctx>, src: Operand) -> LResult<IntValue<'ctx>> {
        match src {
            Operand::Reg(r) => self.reg(fr, r),
            Operand::Imm(k) => Ok(self.t.i64.const_int(k as i64 as u64, true)),
        }
    }

    /// The LLVM block of a jump target inside the current function.
    pub(crate) fn target_block(
        &self,
        fr: &Frame<'ctx>,
        pc: usize,
        target: Option<i64>,
    ) -> LResult<BasicBlock<'ctx>> {
        target
            .and_then(|t| usize::try_from(t).ok())
            .and_then(|t| fr.blocks.get(&t).copied())
            .ok_or_else(|| LiftError::Unsupported {
                pc,
                what: format!(
                    "jump target {target:?} is outside function {}..{}",
                    fr.f.entry, fr.f.end
                ),
            })
    }
}
