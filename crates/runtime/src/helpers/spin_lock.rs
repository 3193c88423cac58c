//! `bpf_spin_lock` / `bpf_spin_unlock` on the `struct bpf_spin_lock` inside a
//! map value: the same lock word the control plane's `BPF_F_LOCK` uses.

use super::common::env;
use super::ids;
use crate::error::{Access, Fault};
use crate::helper_ctx::HelperCtx;
use crate::helpers::{Helper, HelperRegistry};

pub(crate) fn register(r: &mut HelperRegistry) {
    r.register(Helper::new(ids::SPIN_LOCK, "spin_lock", |ctx, a| {
        let addr = lock_arg(ctx, a[0])?;
        // The kernel verifier allows one lock at a time; a second lock
        // would deadlock against itself here.
        if !env(ctx)?.held_locks.is_empty() {
            return Err(ctx.fault("a bpf_spin_lock is already held"));
        }
        // SAFETY: checked writable, 4-byte aligned program memory.
        unsafe { bpfjet_maps::sync::bpf_spin_lock(addr as *mut u8) };
        env(ctx)?.held_locks.push(addr);
        Ok(0)
    }));
    r.register(Helper::new(ids::SPIN_UNLOCK, "spin_unlock", |ctx, a| {
        let addr = lock_arg(ctx, a[0])?;
        let not_held = ctx.fault(format!(
            "unlock of {addr:#x}, which the program does not hold"
        ));
        let held = &mut env(ctx)?.held_locks;
        let Some(i) = held.iter().position(|&l| l == addr) else {
            return Err(not_held);
        };
        held.swap_remove(i);
        // SAFETY: the program holds this lock (taken by spin_lock above).
        unsafe { bpfjet_maps::sync::bpf_spin_unlock(addr as *mut u8) };
        Ok(0)
    }));
}

fn lock_arg(ctx: &mut HelperCtx<'_>, addr: u64) -> Result<u64, Fault> {
    ctx.check_mem(addr, 4, Access::Atomic)?;
    if !addr.is_multiple_of(4) || addr == 0 {
        return Err(Fault::Misaligned {
            pc: ctx.pc(),
            addr,
            size: 4,
        });
    }
    Ok(addr)
}
