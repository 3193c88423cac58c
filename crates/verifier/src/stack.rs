//! One call frame's 512-byte stack: per byte whether it was written (and with
//! zeros), per 8-byte slot a spilled register when a whole register (or a
//! narrower scalar at the slot's start) was stored there.
//!
//! Offsets are relative to the frame pointer: valid bytes are `[-512, 0)`.
//! Slot `i` covers `[-8(i+1), -8i)`. Slots are allocated lazily as the
//! program touches deeper stack, which keeps state copies small.

use crate::range::Scalar;
use crate::reg_state::{RegState, RegType};

pub const STACK_SIZE: i64 = 512;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ByteKind {
    /// Never written on this path.
    Invalid,
    /// Written with something unknown.
    Misc,
    /// Known to hold zero.
    Zero,
    /// Part of a spilled register (see [`Slot::spill`]).
    Spill,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Slot {
    /// Byte `b` is at frame offset `-8(i+1) + b`.
    pub bytes: [ByteKind; 8],
    /// The register stored at the slot's first byte, `spill_size` bytes of it.
    pub spill: Option<RegState>,
    pub spill_size: u8,
}

impl Slot {
    const EMPTY: Slot = Slot {
        bytes: [ByteKind::Invalid; 8],
        spill: None,
        spill_size: 0,
    };

    fn spilled_pointer(&self) -> bool {
        self.spill.is_some_and(|r| r.is_pointer())
    }

    /// Whether the slot holds an open-coded iterator.
    pub fn is_iter(&self) -> bool {
        self.spill
            .is_some_and(|r| matches!(r.ty, RegType::IterNum { .. }))
    }

    /// Whether the slot holds half of a `struct bpf_dynptr`.
    pub fn is_dynptr(&self) -> bool {
        self.spill
            .is_some_and(|r| matches!(r.ty, RegType::Dynptr { .. }))
    }

    /// Drop the spilled register, keeping its bytes as "written".
    fn forget_spill(&mut self) {
        if self.spill.take().is_some() {
            for b in &mut self.bytes {
                if *b == ByteKind::Spill {
                    *b = ByteKind::Misc;
                }
            }
        }
        self.spill_size = 0;
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Stack {
    pub slots: Vec<Slot>,
}

/// Why a stack access is refused (the caller words the error).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StackFault {
    /// Reading bytes never written (only with `allow_uninit == false`).
    Uninit { off: i64 },
    /// Overwriting part of a spilled pointer (unprivileged).
    CorruptSpill { off: i64 },
    /// Reading part of a spilled pointer.
    PartialPointer { off: i64 },
    /// A pointer stored with a size other than 8.
    PointerSpillSize,
    /// Reading, writing or handing to a helper the bytes of an open-coded
    /// iterator (only its kfuncs may touch them).
    Iterator { off: i64 },
    /// Reading the bytes of a dynptr, or a helper writing them (only the
    /// dynptr helpers and kfuncs may; a program's own store destroys an
    /// unreferenced dynptr first, `Verifier::destroy_dynptrs`).
    Dynptr { off: i64 },
}

/// The slot and the byte inside it of frame offset `off`.
pub fn locate(off: i64) -> (usize, usize) {
    let pos = (off + STACK_SIZE) as usize; // 0..512 from the bottom
    let slot = (STACK_SIZE as usize - 1 - pos) / 8;
    let byte = pos % 8;
    (slot, byte)
}

/// Truncate a scalar to `size` bytes, zero-extended.
pub fn truncate(val: &Scalar, size: usize) -> Scalar {
    if size >= 8 {
        return *val;
    }
    let max = (1u64 << (size * 8)) - 1;
    if val.umax <= max {
        return *val;
    }
    let mut s = Scalar::from_tnum(val.var_off.cast(size as u32));
    s.umax = s.umax.min(max);
    s.sync();
    s
}

impl Stack {
    fn slot_mut(&mut self, slot: usize) -> &mut Slot {
        if self.slots.len() <= slot {
            self.slots.resize(slot + 1, Slot::EMPTY);
        }
        &mut self.slots[slot]
    }

    pub fn slot(&self, slot: usize) -> &Slot {
        self.slots.get(slot).unwrap_or(&Slot::EMPTY)
    }

    pub fn byte(&self, off: i64) -> ByteKind {
        let (s, b) = locate(off);
        self.slot(s).bytes[b]
    }

    /// Store `size` bytes at fixed offset `off` (in bounds, aligned: checked
    /// by the caller). `value` is the stored register, `None` for an
    /// immediate `imm`.
    pub fn write(
        &mut self,
        off: i64,
        size: usize,
        value: Option<&RegState>,
        imm: i64,
        allow_ptr_corrupt: bool,
    ) -> Result<(), StackFault> {
        let (s, b) = locate(off);
        let is_pointer = value.is_some_and(|r| r.is_pointer());
        if is_pointer && size != 8 {
            return Err(StackFault::PointerSpillSize);
        }
        self.refuse_iter(off, off + size as i64)?;
        // Whole-slot writes replace a spill; partial ones corrupt it.
        for o in off..off + size as i64 {
            let (so, _) = locate(o);
            let slot = self.slot(so).clone();
            if slot.spill.is_some() && !(size == 8 && b == 0 && so == s) {
                if slot.spilled_pointer() && !allow_ptr_corrupt {
                    return Err(StackFault::CorruptSpill { off });
                }
                self.slot_mut(so).forget_spill();
            }
        }
        let zero = match value {
            Some(r) => r.is_null_const(),
            None => imm == 0,
        };
        if b == 0 {
            // A register or an immediate at a slot start is a spill (as in
            // the kernel, zero included: an imprecise spilled zero prunes
            // like any imprecise scalar, where zero bytes compare exactly).
            let spilled = match value {
                Some(r) if size == 8 => Some(*r),
                Some(r) if r.is_scalar() => {
                    // A value that fits stays linked to its register (same
                    // id); a truncated one is a new value.
                    let fits = r.val.umax < 1u64 << (size * 8);
                    let mut t = RegState::scalar(truncate(&r.val, size));
                    t.id = if fits { r.id } else { 0 };
                    Some(t)
                }
                None => Some(RegState::scalar(truncate(
                    &Scalar::constant(imm as u64),
                    size,
                ))),
                _ => None,
            };
            if let Some(reg) = spilled {
                let slot = self.slot_mut(s);
                slot.forget_spill();
                slot.spill = Some(reg);
                slot.spill_size = size as u8;
                for k in 0..size {
                    slot.bytes[k] = ByteKind::Spill;
                }
                return Ok(());
            }
        }
        let kind = if zero { ByteKind::Zero } else { ByteKind::Misc };
        for o in off..off + size as i64 {
            let (so, bo) = locate(o);
            self.slot_mut(so).bytes[bo] = kind;
        }
        Ok(())
    }

    /// The slot whose spilled register a load of `size` bytes at `off`
    /// returns (whole, or a scalar's low bytes); `None` when the load reads
    /// plain bytes.
    pub fn fill_source(&self, off: i64, size: usize) -> Option<usize> {
        let (s, b) = locate(off);
        let slot = self.slot(s);
        let spill = slot.spill?;
        let covered = b == 0 && size <= 8 && (0..size).all(|k| slot.bytes[k] == ByteKind::Spill);
        (covered && (size == slot.spill_size as usize || spill.is_scalar())).then_some(s)
    }

    /// Load `size` bytes from fixed offset `off` (in bounds, aligned).
    pub fn read(&self, off: i64, size: usize, allow_uninit: bool) -> Result<RegState, StackFault> {
        self.refuse_iter(off, off + size as i64)?;
        let (s, b) = locate(off);
        let slot = self.slot(s);
        if let (Some(_), Some(spill)) = (self.fill_source(off, size), slot.spill) {
            if size == slot.spill_size as usize {
                return Ok(spill);
            }
            return Ok(RegState::scalar(truncate(&spill.val, size)));
        }
        // Callers align accesses; an unaligned one (a helper's key) may
        // straddle two slots and is read byte by byte.
        let within = b + size <= 8;
        if let (Some(spill), true) = (slot.spill, within) {
            if spill.is_pointer() && (b..b + size).any(|k| slot.bytes[k] == ByteKind::Spill) {
                return Err(StackFault::PartialPointer { off });
            }
        }
        let mut all_zero = true;
        for o in off..off + size as i64 {
            let (so, _) = locate(o);
            if self.slot(so).spilled_pointer() && self.byte(o) == ByteKind::Spill {
                return Err(StackFault::PartialPointer { off });
            }
            match self.byte(o) {
                ByteKind::Zero => {}
                ByteKind::Invalid if !allow_uninit => return Err(StackFault::Uninit { off: o }),
                _ => all_zero = false,
            }
        }
        if all_zero {
            return Ok(RegState::constant(0));
        }
        Ok(RegState::scalar(truncate(&Scalar::UNKNOWN, size)))
    }

    /// Check that `[lo, hi)` may be read as memory (helper arguments,
    /// variable-offset loads): written, and no spilled pointer unless `allow_ptr`.
    pub fn check_readable(
        &self,
        lo: i64,
        hi: i64,
        allow_uninit: bool,
        allow_ptr: bool,
    ) -> Result<(), StackFault> {
        self.refuse_iter(lo, hi)?;
        for o in lo..hi {
            let (s, bo) = locate(o);
            let slot = self.slot(s);
            // A slot holding a (narrow) spilled scalar counts as written as a
            // whole for helper reads, as in the kernel.
            let scalar_spill = slot.spill.is_some_and(|r| r.is_scalar());
            match slot.bytes[bo] {
                ByteKind::Invalid if !allow_uninit && !scalar_spill => {
                    return Err(StackFault::Uninit { off: o })
                }
                ByteKind::Spill if slot.spilled_pointer() && !allow_ptr => {
                    return Err(StackFault::PartialPointer { off: o })
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Mark `[lo, hi)` as written with unknown bytes (helper output memory,
    /// variable-offset stores), destroying spills it touches.
    pub fn clobber(&mut self, lo: i64, hi: i64, allow_ptr_corrupt: bool) -> Result<(), StackFault> {
        self.refuse_iter(lo, hi)?;
        for o in lo..hi {
            let (s, bo) = locate(o);
            let slot = self.slot_mut(s);
            if slot.spill.is_some() {
                if slot.spilled_pointer() && !allow_ptr_corrupt {
                    return Err(StackFault::CorruptSpill { off: o });
                }
                slot.forget_spill();
            }
            slot.bytes[bo] = ByteKind::Misc;
        }
        Ok(())
    }

    /// An error if bytes `[lo, hi)` touch an open-coded iterator or a
    /// dynptr.
    fn refuse_iter(&self, lo: i64, hi: i64) -> Result<(), StackFault> {
        let mut o = lo;
        while o < hi {
            let (s, b) = locate(o);
            if self.slot(s).is_iter() {
                return Err(StackFault::Iterator { off: o });
            }
            if self.slot(s).is_dynptr() {
                return Err(StackFault::Dynptr { off: o });
            }
            o += 8 - b as i64;
        }
        Ok(())
    }

    /// The dynptrs with a slot in bytes `[lo, hi)`: each one's first-slot
    /// state (its `id` and `ref_id`), once.
    pub fn dynptrs_in(&self, lo: i64, hi: i64) -> Vec<RegState> {
        let mut found: Vec<RegState> = Vec::new();
        let mut o = lo;
        while o < hi {
            let (s, b) = locate(o);
            if let Some(r) = self.slot(s).spill.filter(|_| self.slot(s).is_dynptr()) {
                if !found.iter().any(|f| f.id == r.id) {
                    found.push(r);
                }
            }
            o += 8 - b as i64;
        }
        found
    }

    /// The dynptr starting at `off` (a multiple of 8), if the two slots
    /// `[off, off + 16)` hold one.
    pub fn dynptr_at(&self, off: i64) -> Option<RegState> {
        let (s, _) = locate(off);
        let (first, second) = (self.slot(s), self.slot(s.checked_sub(1)?));
        match (first.spill, second.spill) {
            (Some(a), Some(b))
                if matches!(a.ty, RegType::Dynptr { first: true, .. })
                    && matches!(b.ty, RegType::Dynptr { first: false, .. })
                    && a.id == b.id =>
            {
                Some(a)
            }
            _ => None,
        }
    }

    /// Make `[off, off + 16)` the dynptr `d` (its type's `first` is set
    /// per slot here).
    pub fn set_dynptr(&mut self, off: i64, d: RegState) {
        let (s, _) = locate(off);
        for (slot, first) in [(s, true), (s - 1, false)] {
            let mut r = d;
            if let RegType::Dynptr { kind, .. } = d.ty {
                r.ty = RegType::Dynptr { kind, first };
            }
            let slot = self.slot_mut(slot);
            slot.bytes = [ByteKind::Spill; 8];
            slot.spill = Some(r);
            slot.spill_size = 8;
        }
    }

    /// Forget dynptr `id`: its slots become never written, as the kernel
    /// leaves a destroyed or released dynptr's slots.
    pub fn clear_dynptr(&mut self, id: u32) {
        for slot in &mut self.slots {
            if slot.is_dynptr() && slot.spill.is_some_and(|r| r.id == id) {
                *slot = Slot::EMPTY;
            }
        }
    }

    /// The iterator in the slot at `off` (a multiple of 8), if any.
    pub fn iter_at(&self, off: i64) -> Option<RegState> {
        let (s, _) = locate(off);
        let slot = self.slot(s);
        slot.spill.filter(|_| slot.is_iter())
    }

    /// Put iterator state `it` in the slot at `off` (a multiple of 8).
    pub fn set_iter(&mut self, off: i64, it: RegState) {
        let (s, _) = locate(off);
        let slot = self.slot_mut(s);
        slot.bytes = [ByteKind::Spill; 8];
        slot.spill = Some(it);
        slot.spill_size = 8;
    }

    /// The slot at `off` after `bpf_iter_num_destroy`: never written, as
    /// the kernel leaves a destroyed iterator's slot.
    pub fn clear_iter(&mut self, off: i64) {
        let (s, _) = locate(off);
        *self.slot_mut(s) = Slot::EMPTY;
    }

    /// The deepest byte offset that was written (negative), 0 if none.
    pub fn depth(&self) -> i64 {
        self.slots.len() as i64 * 8
    }

    /// Every spilled register, mutably (for id-based updates).
    pub fn spills_mut(&mut self) -> impl Iterator<Item = &mut RegState> {
        self.slots.iter_mut().filter_map(|s| s.spill.as_mut())
    }

    pub fn spills(&self) -> impl Iterator<Item = &RegState> {
        self.slots.iter().filter_map(|s| s.spill.as_ref())
    }

    /// A short description of the non-empty slots for error messages.
    pub fn describe(&self) -> String {
        let mut out = Vec::new();
        for (i, slot) in self.slots.iter().enumerate() {
            let off = -8 * (i as i64 + 1);
            if let Some(r) = &slot.spill {
                out.push(format!("fp{off}={r}"));
                continue;
            }
            let text: String = slot
                .bytes
                .iter()
                .rev()
                .map(|b| match b {
                    ByteKind::Invalid => '?',
                    ByteKind::Misc => 'm',
                    ByteKind::Zero => '0',
                    ByteKind::Spill => 'r',
                })
                .collect();
            if text != "????????" {
                out.push(format!("fp{off}={text}"));
            }
        }
        out.join(" ")
    }
}

/// Whether a spilled register of this type may be stored into another
/// frame's stack (the kernel refuses stack pointers into a caller's frame).
pub fn is_stack_pointer(r: &RegState) -> bool {
    matches!(r.ty, RegType::Stack { .. })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spill_fill_roundtrip() {
        let mut st = Stack::default();
        let r = RegState::pointer(RegType::Ctx, 0);
        st.write(-8, 8, Some(&r), 0, true).unwrap();
        assert_eq!(st.read(-8, 8, false).unwrap(), r);
        assert!(st.read(-16, 4, false).is_err());
        assert!(st.read(-16, 4, true).unwrap().is_scalar());
    }

    #[test]
    fn zero_and_narrow() {
        let mut st = Stack::default();
        st.write(-4, 4, None, 0, true).unwrap();
        assert_eq!(st.read(-4, 4, false).unwrap().const_value(), Some(0));
        st.write(-16, 4, None, 7, true).unwrap();
        assert_eq!(st.read(-16, 4, false).unwrap().const_value(), Some(7));
        let r = st.read(-12, 2, true).unwrap();
        assert!(r.val.umax <= 0xffff);
    }
}
