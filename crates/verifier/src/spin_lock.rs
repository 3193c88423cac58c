//! `bpf_spin_lock` / `bpf_spin_unlock` on a lock inside a map value, with the
//! kernel's rules: the argument points exactly at the value's
//! `struct bpf_spin_lock` (known from the map's BTF, see
//! `VerifyEnv::spin_locks`), one lock at a time, unlock of the same lock,
//! no helper calls while it is held (static subprograms may be called: the
//! kernel allows that since 6.9), no program exit while it is held, and no
//! direct loads or stores of the lock word.

use crate::driver::Verifier;
use crate::error::{err, VResult};
use crate::frame::{LockInfo, State};
use crate::reg_state::RegState;

/// Kernel helper ids.
pub(crate) const SPIN_LOCK: i32 = 93;
pub(crate) const SPIN_UNLOCK: i32 = 94;
/// `sizeof(struct bpf_spin_lock)`.
const LOCK_SIZE: i64 = 4;

impl Verifier<'_> {
    /// Offset of the lock in the values of map `map`, if its BTF has one.
    /// Inner-map templates (indices past the program's maps) carry no BTF here.
    pub(crate) fn spin_lock_off(&self, map: u32) -> Option<u32> {
        self.env.spin_locks.get(map as usize).copied().flatten()
    }

    /// Refuse a helper call while a lock is held (only the unlock is allowed).
    pub(crate) fn check_call_under_lock(&self, st: &State, helper: i32, name: &str) -> VResult<()> {
        if st.lock.is_some() && helper != SPIN_UNLOCK {
            return err(
                "spin_lock",
                format!("function calls are not allowed while holding a lock ({name}#{helper})"),
            );
        }
        Ok(())
    }

    /// The lock argument (r1) of `bpf_spin_lock`/`bpf_spin_unlock`, and the
    /// call's effect on the held lock.
    pub(crate) fn check_spin_lock_arg(
        &mut self,
        st: &mut State,
        helper: i32,
        reg: &RegState,
        name: &str,
    ) -> VResult<()> {
        let (map, off) =
            crate::timer::special_field_ptr(reg, 1, name, "spin_lock", "bpf_spin_lock")?;
        let map_name = self.map(map).map_or(String::new(), |m| m.name.clone());
        let Some(lock_off) = self.spin_lock_off(map) else {
            return err(
                "spin_lock",
                format!("map '{map_name}' has no valid bpf_spin_lock (no `struct bpf_spin_lock` in its BTF value type)"),
            );
        };
        if off != lock_off as i64 {
            return err(
                "spin_lock",
                format!("off {off} doesn't point to 'struct bpf_spin_lock' that is at {lock_off}"),
            );
        }
        let this = LockInfo { map, id: reg.id };
        if helper == SPIN_LOCK {
            if st.lock.is_some() {
                return err("spin_lock", "Locking two bpf_spin_locks are not allowed");
            }
            st.lock = Some(this);
        } else {
            match st.lock {
                None => return err("spin_lock", "bpf_spin_unlock without taking a lock"),
                Some(held) if held != this => {
                    return err("spin_lock", "bpf_spin_unlock of different lock")
                }
                Some(_) => {
                    st.lock = None;
                    Self::invalidate_non_owning(st);
                }
            }
        }
        Ok(())
    }

    /// Loads, stores and helper accesses of `[off, off + size)` bytes past
    /// `reg` (a value of map `map`) must not touch the lock word.
    pub(crate) fn check_lock_overlap(
        &self,
        map: u32,
        reg: &RegState,
        off: i64,
        size: i64,
    ) -> VResult<()> {
        let Some(lock) = self.spin_lock_off(map) else {
            return Ok(());
        };
        let lock = lock as i64;
        let base = reg.off as i64 + off;
        let lo = base.saturating_add(reg.val.smin);
        let hi = base.saturating_add(reg.val.umax.min(i64::MAX as u64) as i64);
        if lo < lock + LOCK_SIZE && lock < hi + size {
            return err(
                "spin_lock",
                "bpf_spin_lock cannot be accessed directly by load/store",
            );
        }
        Ok(())
    }
}
