//! Lookup, update and delete of a map a tracing object keeps per thread
//! (pairwise fusion's state internalisation,
//! `bpfjet_runtime::tracing::thread_maps`) compiled as loads and stores on
//! the calling thread's slot: no call, no handle search, no run-context
//! downcast. The run context holds the thread's slot table
//! (`RUNCTX_THREAD_SLOTS_OFFSET`); the map's index in it is known at
//! compile time ([`crate::Bindings::thread_maps`]). The code does what
//! `ThreadMap::lookup/update/delete` do, in the same order of checks, on
//! the same fields (`slot_layout`), with the same atomic orderings, so a
//! slot written by native code and one written by the runtime (the
//! interpreter, the write-back) are the same thing.
//!
//! A run without a slot table (null: not a run of a `TracingObject`) is
//! aborted with a fault by a cold native call
//! (`crate::thread_maps::NO_SLOTS`); runs of the object always have one.

use super::direct;
use super::{Frame, LResult, LiftError, Lifter};
use crate::analysis::Prov;
use crate::bindings::ThreadMapBinding;
use bpfjet_runtime::errno;
use bpfjet_runtime::tracing::{
    slot_layout, THREAD_MAP_DELETE, THREAD_MAP_LOOKUP, THREAD_MAP_UPDATE,
};
use inkwell::values::{BasicValue, IntValue, PointerValue};
use inkwell::{AtomicOrdering, AtomicRMWBinOp, IntPredicate};

/// Byte offset of the per-thread slot table in the run context
/// (`trampoline::RunCtx`).
pub(crate) const RUNCTX_THREAD_SLOTS_OFFSET: u64 = 16;

/// `BPF_NOEXIST`, `BPF_EXIST`: the update flags besides `BPF_ANY`.
const NOEXIST: u64 = 1;
const EXIST: u64 = 2;

#[derive(Clone, Copy, PartialEq, Eq)]
enum SlotOp {
    Lookup,
    Update,
    Delete,
}

impl<'ctx> Lifter<'ctx, '_> {
    /// A rewritten per-thread map call (`THREAD_MAP_*`) at `pc`: inline on
    /// the slot when the map is known, else the direct call. `false` when
    /// `id` is not such a call.
    pub(super) fn thread_map_op(
        &mut self,
        fr: &mut Frame<'ctx>,
        pc: usize,
        id: u32,
    ) -> LResult<bool> {
        let (op, call) = match (id, direct::thread_map_call(id)) {
            (THREAD_MAP_LOOKUP, Some(c)) => (SlotOp::Lookup, c),
            (THREAD_MAP_UPDATE, Some(c)) => (SlotOp::Update, c),
            (THREAD_MAP_DELETE, Some(c)) => (SlotOp::Delete, c),
            _ => return Ok(false),
        };
        let known = match self.prov(fr, pc, 1) {
            Prov::Const(handle) => self.bind.thread_maps.get(&handle).copied(),
            _ => None,
        };
        let Some((index, map)) = known else {
            return self.direct_call(fr, pc, call);
        };
        self.inline_slot_op(fr, pc, op, index, map)?;
        Ok(true)
    }

    fn inline_slot_op(
        &mut self,
        fr: &mut Frame<'ctx>,
        pc: usize,
        op: SlotOp,
        index: usize,
        map: ThreadMapBinding,
    ) -> LResult<()> {
        let t = self.t;
        let done = self.cx.append_basic_block(fr.func, "slot_done");
        let fast = self.cx.append_basic_block(fr.func, "slot_fast");
        let no_table = self.cx.append_basic_block(fr.func, "slot_no_table");
        // SAFETY (for LLVM): the run context is larger than 24 bytes.
        let table_at = unsafe {
            self.b.build_in_bounds_gep(
                t.i8,
                fr.ctx,
                &[t.i64.const_int(RUNCTX_THREAD_SLOTS_OFFSET, false)],
                "slot_tablep",
            )?
        };
        let table = self
            .b
            .build_load(t.ptr, table_at, "slot_table")?
            .into_pointer_value();
        let null = self.b.build_is_null(table, "slot_table_null")?;
        self.b.build_conditional_branch(null, no_table, fast)?;

        self.b.position_at_end(no_table);
        self.call_checked(
            fr,
            pc,
            crate::thread_maps::NO_SLOTS,
            &[direct::Arg::Ctx, direct::Arg::Pc],
        )?;
        self.b.build_unconditional_branch(done)?;

        self.b.position_at_end(fast);
        // SAFETY (for LLVM): the table has an entry per map kept per thread.
        let entry = unsafe {
            self.b.build_in_bounds_gep(
                t.ptr,
                table,
                &[t.i64.const_int(index as u64, false)],
                "slotp",
            )?
        };
        let slot = self
            .b
            .build_load(t.ptr, entry, "slot")?
            .into_pointer_value();
        match op {
            SlotOp::Lookup => self.slot_lookup(fr, pc, slot, map, done)?,
            SlotOp::Update => self.slot_update(fr, pc, slot, map, done)?,
            SlotOp::Delete => self.slot_delete(fr, pc, slot, map, done)?,
        }
        self.b.position_at_end(done);
        Ok(())
    }

    /// Address of field `offset` of the slot.
    fn slot_field(&self, slot: PointerValue<'ctx>, offset: u64) -> LResult<PointerValue<'ctx>> {
        // SAFETY (for LLVM): inside the slot (`slot_layout`).
        Ok(unsafe {
            self.b.build_in_bounds_gep(
                self.t.i8,
                slot,
                &[self.t.i64.const_int(offset, false)],
                "slot_field",
            )?
        })
    }

    fn atomic_load(
        &self,
        at: PointerValue<'ctx>,
        ordering: AtomicOrdering,
        name: &str,
    ) -> LResult<IntValue<'ctx>> {
        let v = self.b.build_load(self.t.i64, at, name)?;
        if let Some(i) = v.as_instruction_value() {
            i.set_alignment(8)
                .map_err(|e| LiftError::Build(e.to_string()))?;
            i.set_atomic_ordering(ordering)
                .map_err(|e| LiftError::Build(e.to_string()))?;
        }
        Ok(v.into_int_value())
    }

    fn atomic_store(
        &self,
        at: PointerValue<'ctx>,
        v: IntValue<'ctx>,
        ordering: AtomicOrdering,
    ) -> LResult<()> {
        let s = self.b.build_store(at, v)?;
        s.set_alignment(8)
            .map_err(|e| LiftError::Build(e.to_string()))?;
        s.set_atomic_ordering(ordering)
            .map_err(|e| LiftError::Build(e.to_string()))?;
        Ok(())
    }

    /// The key at r2 as the slot stores it: zero-extended to 64 bits.
    fn slot_key(
        &self,
        fr: &Frame<'ctx>,
        pc: usize,
        map: ThreadMapBinding,
    ) -> LResult<IntValue<'ctx>> {
        let t = self.t;
        let at = self.address(fr, pc, 2, 0, u64::from(map.key_size))?;
        let width = if map.key_size == 4 { t.i32 } else { t.i64 };
        let key = self.b.build_load(width, at, "slot_key_arg")?;
        if let Some(i) = key.as_instruction_value() {
            // The key may sit at any byte offset of the stack or a value.
            i.set_alignment(1)
                .map_err(|e| LiftError::Build(e.to_string()))?;
        }
        Ok(self
            .b
            .build_int_z_extend_or_bit_cast(key.into_int_value(), t.i64, "slot_key64")?)
    }

    /// Whether the slot holds `key` (`ThreadSlot::holds`), and whether it
    /// is occupied at all.
    fn slot_holds(
        &self,
        slot: PointerValue<'ctx>,
        key: IntValue<'ctx>,
    ) -> LResult<(IntValue<'ctx>, IntValue<'ctx>)> {
        let t = self.t;
        let occ_at = self.slot_field(slot, slot_layout::OCCUPIED)?;
        let occ = self.atomic_load(occ_at, AtomicOrdering::Acquire, "slot_occupied")?;
        let key_at = self.slot_field(slot, slot_layout::KEY)?;
        let held = self.atomic_load(key_at, AtomicOrdering::Monotonic, "slot_key")?;
        let occupied = self.b.build_int_compare(
            IntPredicate::NE,
            occ,
            t.i64.const_zero(),
            "slot_is_occupied",
        )?;
        let same = self
            .b
            .build_int_compare(IntPredicate::EQ, held, key, "slot_same_key")?;
        let holds = self.b.build_and(occupied, same, "slot_holds")?;
        Ok((holds, occupied))
    }

    /// r0 = `v`, then to `done`.
    fn slot_result(
        &self,
        fr: &Frame<'ctx>,
        v: IntValue<'ctx>,
        done: inkwell::basic_block::BasicBlock<'ctx>,
    ) -> LResult<()> {
        self.set_reg(fr, 0, v)?;
        self.b.build_unconditional_branch(done)?;
        Ok(())
    }

    fn errno_const(&self, e: u64) -> IntValue<'ctx> {
        self.t.i64.const_int(errno::neg(e), false)
    }

    /// `ThreadMap::lookup`: the value's address or 0.
    fn slot_lookup(
        &mut self,
        fr: &Frame<'ctx>,
        pc: usize,
        slot: PointerValue<'ctx>,
        map: ThreadMapBinding,
        done: inkwell::basic_block::BasicBlock<'ctx>,
    ) -> LResult<()> {
        let t = self.t;
        let key = self.slot_key(fr, pc, map)?;
        let (holds, _) = self.slot_holds(slot, key)?;
        let value_at = self.slot_field(slot, slot_layout::VALUE)?;
        let value = self
            .b
            .build_load(t.i64, value_at, "slot_value")?
            .into_int_value();
        let r0 = self
            .b
            .build_select(holds, value, t.i64.const_zero(), "slot_lookup")?
            .into_int_value();
        self.slot_result(fr, r0, done)
    }

    /// `ThreadMap::delete`: empty the slot, or -ENOENT.
    fn slot_delete(
        &mut self,
        fr: &Frame<'ctx>,
        pc: usize,
        slot: PointerValue<'ctx>,
        map: ThreadMapBinding,
        done: inkwell::basic_block::BasicBlock<'ctx>,
    ) -> LResult<()> {
        let t = self.t;
        let key = self.slot_key(fr, pc, map)?;
        let (holds, _) = self.slot_holds(slot, key)?;
        let hit = self.cx.append_basic_block(fr.func, "slot_delete_hit");
        let miss = self.cx.append_basic_block(fr.func, "slot_delete_miss");
        self.b.build_conditional_branch(holds, hit, miss)?;

        self.b.position_at_end(miss);
        self.slot_result(fr, self.errno_const(errno::ENOENT), done)?;

        self.b.position_at_end(hit);
        let occ_at = self.slot_field(slot, slot_layout::OCCUPIED)?;
        self.atomic_store(occ_at, t.i64.const_zero(), AtomicOrdering::Release)?;
        self.count_add(slot, -1)?;
        self.slot_result(fr, t.i64.const_zero(), done)
    }

    /// Atomically add `delta` to the map's occupied-slot count; the count
    /// before.
    fn count_add(&self, slot: PointerValue<'ctx>, delta: i32) -> LResult<IntValue<'ctx>> {
        let t = self.t;
        let count_at = self.slot_field(slot, slot_layout::COUNT)?;
        let count = self
            .b
            .build_load(t.ptr, count_at, "slot_count")?
            .into_pointer_value();
        let (op, n) = if delta < 0 {
            (AtomicRMWBinOp::Sub, (-delta) as u64)
        } else {
            (AtomicRMWBinOp::Add, delta as u64)
        };
        Ok(self.b.build_atomicrmw(
            op,
            count,
            t.i32.const_int(n, false),
            AtomicOrdering::AcquireRelease,
        )?)
    }

    /// `ThreadMap::update`: flags, then existence, then room, as the hash
    /// map checks them.
    fn slot_update(
        &mut self,
        fr: &Frame<'ctx>,
        pc: usize,
        slot: PointerValue<'ctx>,
        map: ThreadMapBinding,
        done: inkwell::basic_block::BasicBlock<'ctx>,
    ) -> LResult<()> {
        let t = self.t;
        let bb = |name: &str| self.cx.append_basic_block(fr.func, name);
        let (bad_flags, flags_ok) = (bb("slot_bad_flags"), bb("slot_flags_ok"));
        let (exists_bb, absent_bb) = (bb("slot_exists"), bb("slot_absent"));
        let (eexist, enoent) = (bb("slot_eexist"), bb("slot_enoent"));
        let (insert, give_up, take) = (bb("slot_insert"), bb("slot_give_up"), bb("slot_take"));
        let (full, room, write) = (bb("slot_full"), bb("slot_room"), bb("slot_write"));

        let flags = self.reg(fr, 4)?;
        let value_src = self.reg(fr, 3)?;
        let key = self.slot_key(fr, pc, map)?;
        let bad = self.b.build_int_compare(
            IntPredicate::UGT,
            flags,
            t.i64.const_int(EXIST, false),
            "slot_flags_bad",
        )?;
        self.b.build_conditional_branch(bad, bad_flags, flags_ok)?;
        self.b.position_at_end(bad_flags);
        self.slot_result(fr, self.errno_const(errno::EINVAL), done)?;

        self.b.position_at_end(flags_ok);
        let (holds, occupied) = self.slot_holds(slot, key)?;
        self.b
            .build_conditional_branch(holds, exists_bb, absent_bb)?;

        // Exists: BPF_NOEXIST fails, anything else overwrites.
        self.b.position_at_end(exists_bb);
        let noexist = self.b.build_int_compare(
            IntPredicate::EQ,
            flags,
            t.i64.const_int(NOEXIST, false),
            "slot_noexist",
        )?;
        self.b.build_conditional_branch(noexist, eexist, write)?;
        self.b.position_at_end(eexist);
        self.slot_result(fr, self.errno_const(errno::EEXIST), done)?;

        // Absent: BPF_EXIST fails, anything else inserts.
        self.b.position_at_end(absent_bb);
        let exist = self.b.build_int_compare(
            IntPredicate::EQ,
            flags,
            t.i64.const_int(EXIST, false),
            "slot_exist",
        )?;
        self.b.build_conditional_branch(exist, enoent, insert)?;
        self.b.position_at_end(enoent);
        self.slot_result(fr, self.errno_const(errno::ENOENT), done)?;

        // Occupied under another key (a forked child's new thread id): the
        // old entry is given up.
        self.b.position_at_end(insert);
        self.b.build_conditional_branch(occupied, give_up, take)?;
        self.b.position_at_end(give_up);
        self.count_add(slot, -1)?;
        let occ_at = self.slot_field(slot, slot_layout::OCCUPIED)?;
        self.atomic_store(occ_at, t.i64.const_zero(), AtomicOrdering::Release)?;
        self.b.build_unconditional_branch(take)?;

        self.b.position_at_end(take);
        let before = self.count_add(slot, 1)?;
        let max_at = self.slot_field(slot, slot_layout::MAX_ENTRIES)?;
        let max = self
            .b
            .build_load(t.i64, max_at, "slot_max")?
            .into_int_value();
        let before = self.b.build_int_z_extend(before, t.i64, "slot_count64")?;
        let is_full = self
            .b
            .build_int_compare(IntPredicate::UGE, before, max, "slot_is_full")?;
        self.b.build_conditional_branch(is_full, full, room)?;
        self.b.position_at_end(full);
        self.count_add(slot, -1)?;
        self.slot_result(fr, self.errno_const(errno::E2BIG), done)?;

        self.b.position_at_end(room);
        let key_at = self.slot_field(slot, slot_layout::KEY)?;
        self.atomic_store(key_at, key, AtomicOrdering::Monotonic)?;
        self.b.build_unconditional_branch(write)?;

        self.b.position_at_end(write);
        let value_at = self.slot_field(slot, slot_layout::VALUE)?;
        let dst = self
            .b
            .build_load(t.ptr, value_at, "slot_value")?
            .into_pointer_value();
        let src = self.b.build_int_to_ptr(value_src, t.ptr, "slot_src")?;
        self.b
            .build_memcpy(
                dst,
                8,
                src,
                1,
                t.i64.const_int(u64::from(map.value_size), false),
            )
            .map_err(|e| LiftError::Build(e.to_string()))?;
        let occ_at = self.slot_field(slot, slot_layout::OCCUPIED)?;
        self.atomic_store(occ_at, t.i64.const_int(1, false), AtomicOrdering::Release)?;
        self.slot_result(fr, t.i64.const_zero(), done)
    }
}
