//! The reference interpreter.
//!
//! One `match` per instruction over the typed program, registers in a fixed
//! array, bpf-to-bpf calls on an explicit frame array (no host recursion, no
//! allocation). Host recursion happens only when a helper re-enters the
//! interpreter for a callback, and that is bounded by the call-depth limit.

mod alu;
mod atomic;
mod jump;
pub(crate) mod memory;

use crate::error::{Access, Fault};
use crate::helper_ctx::HelperCtx;
use crate::helpers::Helper;
use crate::program::ProgramInner;
use crate::state::{RunState, MAX_CALL_DEPTH};
use bpfjet_isa::{AtomicOp, CallTarget, Insn, Operand, Reg, Width, MAY_GOTO_BUDGET};
use memory::{BoundsChecked, MemMode, Verified};
use std::any::Any;
use std::sync::Arc;

/// What a run borrows for its duration: scratch state and the caller's context.
pub(crate) struct Core<'a> {
    pub state: &'a mut RunState,
    pub user: &'a mut (dyn Any + 'static),
}

/// A suspended caller of a bpf-to-bpf call.
#[derive(Clone, Copy, Default)]
struct Frame {
    return_pc: usize,
    /// r6–r9, restored on return so the callee cannot clobber them.
    callee_saved: [u64; 4],
    frame_pointer: u64,
    /// Which program of the run's tail-call chain to return into.
    program: usize,
    /// The caller's `may_goto` budget, restored on return.
    may_goto_left: u64,
}

struct Machine {
    /// r0–r10; indices are masked with 15 so that indexing can never panic
    /// (the loader guarantees r0–r10, the upper slots are never used).
    regs: [u64; 16],
    pc: usize,
    /// Absolute call depth of the running frame (0 = entry frame of the run).
    depth: usize,
    frames: [Frame; MAX_CALL_DEPTH],
    live_frames: usize,
    /// 0 = the program this execution started in; i > 0 = the i-th tail-call
    /// target.
    program: usize,
    /// The running frame's `may_goto` budget (`MAY_GOTO_BUDGET` at every
    /// frame's entry, as the kernel's per-subprogram hidden counter).
    may_goto_left: u64,
}

/// Why the inner loop stopped.
enum Stop {
    Exit(u64),
    /// A helper requested a tail call that was granted.
    TailCall(Arc<ProgramInner>),
    /// A return into a caller frame that runs a different program.
    Switch,
}

/// Run a whole program from slot 0 at depth 0.
pub(crate) fn run_entry(
    prog: &ProgramInner,
    state: &mut RunState,
    user: &mut (dyn Any + 'static),
    args: [u64; 5],
) -> Result<u64, Fault> {
    let mut core = Core { state, user };
    execute_in_mode(&mut core, prog, 0, args, 0, prog.bounds_checked)
}

/// Run the subprogram at `entry_pc` in a fresh frame at `depth` until it exits.
pub(crate) fn execute_in_mode(
    core: &mut Core<'_>,
    prog: &ProgramInner,
    entry_pc: usize,
    args: [u64; 5],
    depth: usize,
    bounds_checked: bool,
) -> Result<u64, Fault> {
    if bounds_checked {
        execute::<BoundsChecked>(core, prog, entry_pc, args, depth)
    } else {
        execute::<Verified>(core, prog, entry_pc, args, depth)
    }
}

fn execute<M: MemMode>(
    core: &mut Core<'_>,
    entry: &ProgramInner,
    entry_pc: usize,
    args: [u64; 5],
    depth: usize,
) -> Result<u64, Fault> {
    let mut regs = [0u64; 16];
    regs[1..6].copy_from_slice(&args);
    regs[10] = core.state.frame_pointer(depth);
    let mut m = Machine {
        regs,
        pc: entry_pc,
        depth,
        frames: [Frame::default(); MAX_CALL_DEPTH],
        live_frames: 0,
        program: 0,
        may_goto_left: MAY_GOTO_BUDGET,
    };
    // Tail-call targets entered during this execution; kept alive here so
    // that frames can return into them by index.
    let mut chain: Vec<Arc<ProgramInner>> = Vec::new();
    loop {
        let prog = match m.program {
            0 => entry,
            i => match chain.get(i - 1) {
                Some(p) => p,
                None => return Err(Fault::BadPc { pc: m.pc }),
            },
        };
        match run_segment::<M>(core, prog, &mut m)? {
            Stop::Exit(r0) => return Ok(r0),
            Stop::TailCall(target) => {
                chain.push(target);
                m.program = chain.len();
                m.pc = 0;
                // The target's prologue sets its own counter, as the kernel's.
                m.may_goto_left = MAY_GOTO_BUDGET;
            }
            Stop::Switch => {}
        }
    }
}

#[inline(always)]
fn reg_index(r: Reg) -> usize {
    usize::from(r) & 15
}

/// An operand's value; immediates are sign-extended to 64 bits (32-bit
/// operations then use the low half, which is the imm itself).
#[inline(always)]
fn operand(regs: &[u64; 16], src: Operand) -> u64 {
    match src {
        Operand::Reg(r) => regs[reg_index(r)],
        Operand::Imm(imm) => imm as i64 as u64,
    }
}

/// The slot a branch at `pc` with offset `off` lands on. An impossible target
/// (the loader rejects them) becomes an index the next fetch rejects.
#[inline(always)]
fn branch(pc: usize, off: i64) -> usize {
    (pc as i64).wrapping_add(1).wrapping_add(off) as usize
}

/// Execute `prog` from `m.pc` until exit, a tail call, or a return into
/// another program of the chain.
fn run_segment<M: MemMode>(
    core: &mut Core<'_>,
    prog: &ProgramInner,
    m: &mut Machine,
) -> Result<Stop, Fault> {
    let insns = prog.insns.as_slice();
    let mut pc = m.pc;
    loop {
        let Some(&insn) = insns.get(pc) else {
            return Err(Fault::BadPc { pc });
        };
        if core.state.steps_left == 0 {
            return Err(Fault::BudgetExceeded {
                pc,
                budget: core.state.insn_budget().unwrap_or(u64::MAX),
            });
        }
        core.state.steps_left -= 1;
        match insn {
            Insn::Alu {
                width,
                op,
                dst,
                src,
            } => {
                let s = operand(&m.regs, src);
                let d = &mut m.regs[reg_index(dst)];
                *d = match width {
                    Width::W64 => alu::alu64(op, *d, s),
                    Width::W32 => u64::from(alu::alu32(op, *d as u32, s as u32)),
                };
            }
            Insn::Endian { order, bits, dst } => {
                let d = &mut m.regs[reg_index(dst)];
                *d = alu::byte_order(order, bits, *d);
            }
            Insn::LdDw { dst, imm, .. } => {
                // The loader resolved every kind to an immediate.
                m.regs[reg_index(dst)] = imm;
                pc += 2;
                continue;
            }
            Insn::Load {
                size,
                sign_extend,
                dst,
                src,
                off,
            } => {
                let addr = m.regs[reg_index(src)].wrapping_add(off as i64 as u64);
                M::check(
                    core.state,
                    prog,
                    m.depth,
                    pc,
                    addr,
                    size.bytes() as u64,
                    Access::Read,
                )?;
                // SAFETY: the access was checked above, or the verifier proved it.
                let value = unsafe { memory::load(addr, size) };
                m.regs[reg_index(dst)] = if sign_extend {
                    memory::sign_extend(value, size)
                } else {
                    value
                };
            }
            Insn::Store {
                size,
                dst,
                off,
                src,
            } => {
                let addr = m.regs[reg_index(dst)].wrapping_add(off as i64 as u64);
                let value = operand(&m.regs, src);
                M::check(
                    core.state,
                    prog,
                    m.depth,
                    pc,
                    addr,
                    size.bytes() as u64,
                    Access::Write,
                )?;
                // SAFETY: the access was checked above, or the verifier proved it.
                unsafe { memory::store(addr, size, value) };
            }
            Insn::Atomic {
                width,
                op,
                fetch,
                dst,
                src,
                off,
            } => {
                let size: u64 = match width {
                    Width::W32 => 4,
                    Width::W64 => 8,
                };
                let addr = atomic_address(pc, m.regs[reg_index(dst)], off, size)?;
                M::check(core.state, prog, m.depth, pc, addr, size, Access::Atomic)?;
                let operand = m.regs[reg_index(src)];
                // SAFETY: checked (or proven) in bounds and writable; aligned above.
                let old = unsafe { atomic::rmw(width, op, addr, operand, m.regs[0]) };
                match op {
                    AtomicOp::CmpXchg => m.regs[0] = old,
                    AtomicOp::Xchg => m.regs[reg_index(src)] = old,
                    _ if fetch => m.regs[reg_index(src)] = old,
                    _ => {}
                }
            }
            Insn::LoadAcquire {
                size,
                dst,
                src,
                off,
            } => {
                let bytes = size.bytes() as u64;
                let addr = atomic_address(pc, m.regs[reg_index(src)], off, bytes)?;
                M::check(core.state, prog, m.depth, pc, addr, bytes, Access::Read)?;
                // SAFETY: checked (or proven) in bounds; aligned above.
                m.regs[reg_index(dst)] = unsafe { atomic::load_acquire(addr, size) };
            }
            Insn::StoreRelease {
                size,
                dst,
                off,
                src,
            } => {
                let bytes = size.bytes() as u64;
                let addr = atomic_address(pc, m.regs[reg_index(dst)], off, bytes)?;
                M::check(core.state, prog, m.depth, pc, addr, bytes, Access::Write)?;
                // SAFETY: checked (or proven) in bounds and writable; aligned above.
                unsafe { atomic::store_release(addr, size, m.regs[reg_index(src)]) };
            }
            Insn::Ja { off } => {
                pc = branch(pc, off.into());
                continue;
            }
            Insn::MayGoto { off } => {
                if m.may_goto_left == 0 {
                    pc = branch(pc, off.into());
                    continue;
                }
                m.may_goto_left -= 1;
            }
            Insn::Jmp {
                width,
                op,
                dst,
                src,
                off,
            } => {
                let a = m.regs[reg_index(dst)];
                let b = operand(&m.regs, src);
                let taken = match width {
                    Width::W64 => jump::taken64(op, a, b),
                    Width::W32 => jump::taken32(op, a, b),
                };
                if taken {
                    pc = branch(pc, off.into());
                    continue;
                }
            }
            Insn::Call(CallTarget::Local(off)) => {
                let depth = m.depth + 1;
                let Some(frame) = m
                    .frames
                    .get_mut(m.live_frames)
                    .filter(|_| depth < MAX_CALL_DEPTH)
                else {
                    return Err(Fault::CallDepthExceeded {
                        pc,
                        max: MAX_CALL_DEPTH,
                    });
                };
                *frame = Frame {
                    return_pc: pc + 1,
                    callee_saved: [m.regs[6], m.regs[7], m.regs[8], m.regs[9]],
                    frame_pointer: m.regs[10],
                    program: m.program,
                    may_goto_left: m.may_goto_left,
                };
                m.may_goto_left = MAY_GOTO_BUDGET;
                m.live_frames += 1;
                m.depth = depth;
                m.regs[10] = core.state.frame_pointer(depth);
                pc = branch(pc, off.into());
                continue;
            }
            Insn::Call(CallTarget::Helper(id)) => {
                let Some(helper) = prog.helpers.get_signed(id) else {
                    return Err(Fault::UnknownHelper {
                        pc,
                        id: id as i64 as u64,
                    });
                };
                if let Some(target) = call_helper::<M>(core, prog, m, pc, helper)? {
                    return Ok(Stop::TailCall(target));
                }
            }
            Insn::Call(CallTarget::Kfunc(id)) => {
                let Some(kfunc) = prog.kfuncs.get_signed(id) else {
                    return Err(Fault::UnknownHelper {
                        pc,
                        id: id as i64 as u64,
                    });
                };
                if let Some(target) = call_helper::<M>(core, prog, m, pc, kfunc)? {
                    return Ok(Stop::TailCall(target));
                }
            }
            Insn::CallReg { reg } => {
                // callx: the register holds a *helper id*, not a code address.
                // No kernel feature gives callx another meaning bpfjet could
                // follow, and the conformance suite's callx test calls helper 5
                // this way (`mov r2, 5; call r2`).
                let id = m.regs[reg_index(reg)];
                let Some(helper) = prog.helpers.get(id) else {
                    return Err(Fault::UnknownHelper { pc, id });
                };
                if let Some(target) = call_helper::<M>(core, prog, m, pc, helper)? {
                    return Ok(Stop::TailCall(target));
                }
            }
            Insn::Exit => {
                if m.live_frames == 0 {
                    m.pc = pc;
                    return Ok(Stop::Exit(m.regs[0]));
                }
                m.live_frames -= 1;
                let frame = m.frames[m.live_frames % MAX_CALL_DEPTH];
                m.regs[6..10].copy_from_slice(&frame.callee_saved);
                m.regs[10] = frame.frame_pointer;
                m.may_goto_left = frame.may_goto_left;
                m.depth -= 1;
                pc = frame.return_pc;
                if frame.program != m.program {
                    m.program = frame.program;
                    m.pc = pc;
                    return Ok(Stop::Switch);
                }
                continue;
            }
            Insn::LdDwTail | Insn::LdPacket { .. } => return Err(Fault::BadPc { pc }),
        }
        pc += 1;
    }
}

/// Call a helper or kfunc with r1–r5, put its result in r0, and return the
/// tail-call target it requested, if any. A granted tail call keeps the
/// registers (r1 still holds the context, the kernel's convention) and the
/// frame; the target starts at its slot 0 and never returns here.
#[inline(never)]
fn call_helper<M: MemMode>(
    core: &mut Core<'_>,
    prog: &ProgramInner,
    m: &mut Machine,
    pc: usize,
    helper: &Helper,
) -> Result<Option<Arc<ProgramInner>>, Fault> {
    let args = [m.regs[1], m.regs[2], m.regs[3], m.regs[4], m.regs[5]];
    let mut ctx = HelperCtx::new(
        &mut *core.state,
        &mut *core.user,
        prog,
        pc,
        m.depth,
        M::BOUNDS_CHECKED,
        helper.name(),
    );
    m.regs[0] = helper.call(&mut ctx, args)?;
    Ok(ctx.take_tail_call())
}

/// The address of an atomic access (read-modify-write, load-acquire,
/// store-release): host atomics need natural alignment, and the verifier
/// refuses misaligned atomics too, so both modes check it.
fn atomic_address(pc: usize, base: u64, off: i16, size: u64) -> Result<u64, Fault> {
    let addr = base.wrapping_add(off as i64 as u64);
    if addr & (size - 1) != 0 {
        return Err(Fault::Misaligned { pc, addr, size });
    }
    Ok(addr)
}
