//! eNetSTL's node-pointer kfuncs compiled in: `ptr_container_get_tmp`,
//! `ptr_get_out`, `ptr_container_set_tmp` and `ptr_release_node` — the
//! four calls of every skip-list search step — become the natives' checks
//! written as IR, in the natives' order (`bpfjet_kfuncs::enetstl_ptr`):
//! the object's space found from its address (spaces are aligned to their
//! size: the address's region indexes the region table, no search), the
//! address a slot's start, the slot's kind; a handle read from a link or
//! tmp resolved through the table of space bases, its slot bounded, the
//! slot's generation and kind compared (a stale handle reads NULL: lazy
//! safety); references counted with the same atomic read-modify-writes.
//! The one thing left to a native is what follows a release that drops
//! the last reference (freeing the slot under the space's lock) or one
//! that held none (undone), both rare: `enetstl_ptr::DROPPED_SYMBOL`.
//!
//! Loads and stores of the bookkeeping words are atomic with the natives'
//! orderings (acquire loads, release stores: plain moves on x86-64), so a
//! compiled program and natives called by another thread see each other
//! as two natives would.

use super::{Frame, LResult, LiftError, Lifter};
use bpfjet_kfuncs::enetstl_ptr::{
    BASES_SYMBOL, CONTAINER, C_TMPS, DROPPED_SYMBOL, LINKS, MAX_SPACES, NODE, NODE_BYTES, OUTS,
    OWNER, REFCNT, REGIONS, REGIONS_SYMBOL, SPACE_SHIFT, SPACE_SLOTS, STATE, TMPS,
};
use bpfjet_kfuncs::PtrOp;
use inkwell::basic_block::BasicBlock;
use inkwell::module::Linkage;
use inkwell::values::{BasicValue, IntValue, PointerValue};
use inkwell::{AtomicOrdering, AtomicRMWBinOp, IntPredicate};

/// Where a failed check goes: the kfunc's end, with NULL (or nothing) as
/// the result.
struct Exit<'ctx> {
    bb: BasicBlock<'ctx>,
    /// The result's incoming values.
    incoming: Vec<(IntValue<'ctx>, BasicBlock<'ctx>)>,
}

/// A slot that passed `at`'s checks.
struct Slot<'ctx> {
    addr: IntValue<'ctx>,
    /// Its state word: `generation << 32 | kind`.
    state: IntValue<'ctx>,
    /// Its space's index and its slot in that space.
    space: IntValue<'ctx>,
    slot: IntValue<'ctx>,
}

impl<'ctx> Lifter<'ctx, '_> {
    fn ptr_c(&self, v: u64) -> IntValue<'ctx> {
        self.t.i64.const_int(v, false)
    }

    fn ptr_block(&self) -> LResult<BasicBlock<'ctx>> {
        self.b
            .get_insert_block()
            .ok_or_else(|| LiftError::Build("no insert block".into()))
    }

    /// Go on in a new block when `ok` holds, else to the exit with 0.
    fn ptr_require(&self, exit: &mut Exit<'ctx>, ok: IntValue<'ctx>, name: &str) -> LResult<()> {
        let here = self.ptr_block()?;
        let next = self.cx.insert_basic_block_after(here, name);
        self.b.build_conditional_branch(ok, next, exit.bb)?;
        exit.incoming.push((self.t.i64.const_zero(), here));
        self.b.position_at_end(next);
        Ok(())
    }

    /// The bookkeeping word `off` bytes into the slot or table at `addr`.
    fn ptr_at(&self, addr: IntValue<'ctx>, off: IntValue<'ctx>) -> LResult<PointerValue<'ctx>> {
        let a = self.b.build_int_add(addr, off, "ptr_field")?;
        Ok(self.b.build_int_to_ptr(a, self.t.ptr, "ptr_fieldp")?)
    }

    fn ptr_load(
        &self,
        p: PointerValue<'ctx>,
        ty: inkwell::types::IntType<'ctx>,
        name: &str,
    ) -> LResult<IntValue<'ctx>> {
        let v = self.b.build_load(ty, p, name)?;
        let i = v
            .as_instruction_value()
            .ok_or_else(|| LiftError::Build("load is no instruction".into()))?;
        i.set_alignment(ty.get_bit_width() / 8)
            .and_then(|()| i.set_atomic_ordering(AtomicOrdering::Acquire))
            .map_err(|e| LiftError::Build(e.to_string()))?;
        Ok(self
            .b
            .build_int_z_extend_or_bit_cast(v.into_int_value(), self.t.i64, name)?)
    }

    /// An external symbol of `enetstl_ptr` (a table) as a pointer.
    fn ptr_table(&self, symbol: &str) -> PointerValue<'ctx> {
        let g = self.module.get_global(symbol).unwrap_or_else(|| {
            let g = self.module.add_global(self.t.i8, None, symbol);
            g.set_linkage(Linkage::External);
            g
        });
        g.as_pointer_value()
    }

    /// `enetstl_ptr::at(addr, kind)`: the address's region is a space's,
    /// the address a slot's start, the slot of `kind`.
    fn ptr_slot(
        &self,
        exit: &mut Exit<'ctx>,
        addr: IntValue<'ctx>,
        kind: u32,
    ) -> LResult<Slot<'ctx>> {
        let t = self.t;
        let c = |v: u64| self.ptr_c(v);
        let region =
            self.b
                .build_right_shift(addr, c(u64::from(SPACE_SHIFT)), false, "ptr_region")?;
        let user =
            self.b
                .build_int_compare(IntPredicate::ULT, region, c(REGIONS as u64), "ptr_user")?;
        self.ptr_require(exit, user, "ptr_region_ok")?;
        let regions = self.ptr_table(REGIONS_SYMBOL);
        // SAFETY (of the generated code): region < REGIONS, the table's length.
        let entry = unsafe { self.b.build_gep(t.i16, regions, &[region], "ptr_regionp")? };
        let space1 = self.ptr_load(entry, t.i16, "ptr_space1")?;
        let is_space = self
            .b
            .build_int_compare(IntPredicate::NE, space1, c(0), "ptr_is_space")?;
        let misaligned = self
            .b
            .build_and(addr, c(NODE_BYTES as u64 - 1), "ptr_misaligned")?;
        let aligned =
            self.b
                .build_int_compare(IntPredicate::EQ, misaligned, c(0), "ptr_aligned")?;
        let ok = self.b.build_and(is_space, aligned, "ptr_slot_start")?;
        self.ptr_require(exit, ok, "ptr_in_space")?;
        let state = self.ptr_load(self.ptr_at(addr, c(STATE as u64))?, t.i64, "ptr_state")?;
        let got = self
            .b
            .build_and(state, c(u64::from(u32::MAX)), "ptr_kind")?;
        let right =
            self.b
                .build_int_compare(IntPredicate::EQ, got, c(u64::from(kind)), "ptr_kind_ok")?;
        self.ptr_require(exit, right, "ptr_slot_ok")?;
        let space = self.b.build_int_sub(space1, c(1), "ptr_space")?;
        let off = self
            .b
            .build_and(addr, c((1 << SPACE_SHIFT) - 1), "ptr_off")?;
        let slot = self.b.build_right_shift(
            off,
            c(u64::from(NODE_BYTES.trailing_zeros())),
            false,
            "ptr_slotno",
        )?;
        Ok(Slot {
            addr,
            state,
            space,
            slot,
        })
    }

    /// `Slot::handle`: generation, space, slot.
    fn ptr_handle(&self, s: &Slot<'ctx>) -> LResult<IntValue<'ctx>> {
        let c = |v: u64| self.ptr_c(v);
        let gen = self
            .b
            .build_and(s.state, c(!u64::from(u32::MAX)), "ptr_gen")?;
        let space = self.b.build_left_shift(s.space, c(20), "ptr_hspace")?;
        let h = self.b.build_or(gen, space, "ptr_h")?;
        Ok(self.b.build_or(h, s.slot, "ptr_handle")?)
    }

    /// `enetstl_ptr::by_handle(h, NODE)`: the address of the live node
    /// handle `h` names.
    fn ptr_by_handle(&self, exit: &mut Exit<'ctx>, h: IntValue<'ctx>) -> LResult<IntValue<'ctx>> {
        let t = self.t;
        let c = |v: u64| self.ptr_c(v);
        let space = self.b.build_right_shift(h, c(20), false, "ptr_hspace")?;
        let space = self.b.build_and(space, c(0xfff), "ptr_hspace")?;
        let slot = self.b.build_and(h, c(0xf_ffff), "ptr_hslot")?;
        let mut ok = self
            .b
            .build_int_compare(IntPredicate::NE, h, c(0), "ptr_nonnull")?;
        for cond in [
            self.b.build_int_compare(
                IntPredicate::ULT,
                space,
                c(MAX_SPACES as u64),
                "ptr_space_ok",
            )?,
            self.b.build_int_compare(
                IntPredicate::ULT,
                slot,
                c(SPACE_SLOTS as u64),
                "ptr_slotno_ok",
            )?,
        ] {
            ok = self.b.build_and(ok, cond, "ptr_hok")?;
        }
        self.ptr_require(exit, ok, "ptr_handle_ok")?;
        let bases = self.ptr_table(BASES_SYMBOL);
        // SAFETY (of the generated code): space < MAX_SPACES, the table's length.
        let entry = unsafe { self.b.build_gep(t.i64, bases, &[space], "ptr_basep")? };
        let base = self.ptr_load(entry, t.i64, "ptr_base")?;
        let live = self
            .b
            .build_int_compare(IntPredicate::NE, base, c(0), "ptr_space_live")?;
        self.ptr_require(exit, live, "ptr_space_found")?;
        let rel =
            self.b
                .build_left_shift(slot, c(u64::from(NODE_BYTES.trailing_zeros())), "ptr_rel")?;
        let addr = self.b.build_int_add(base, rel, "ptr_node")?;
        let state = self.ptr_load(self.ptr_at(addr, c(STATE as u64))?, t.i64, "ptr_hstate")?;
        let gen = self.b.build_and(h, c(!u64::from(u32::MAX)), "ptr_hgen")?;
        let want = self.b.build_or(gen, c(u64::from(NODE)), "ptr_want")?;
        let same = self
            .b
            .build_int_compare(IntPredicate::EQ, state, want, "ptr_same_gen")?;
        self.ptr_require(exit, same, "ptr_live")?;
        Ok(addr)
    }

    /// An atomic add of `delta` to the reference count of the node at
    /// `addr`; the count before.
    fn ptr_count(&self, addr: IntValue<'ctx>, op: AtomicRMWBinOp) -> LResult<IntValue<'ctx>> {
        let t = self.t;
        let p = self.ptr_at(addr, self.ptr_c(REFCNT as u64))?;
        let old = self
            .b
            .build_atomicrmw(
                op,
                p,
                t.i32.const_int(1, false),
                AtomicOrdering::AcquireRelease,
            )
            .map_err(|e| LiftError::Build(e.to_string()))?;
        Ok(self.b.build_int_z_extend(old, t.i64, "ptr_old")?)
    }

    /// The kfunc's `u32` argument in register `r`, as the native wrapper
    /// narrows it.
    fn ptr_u32(&self, fr: &Frame<'ctx>, r: u8) -> LResult<IntValue<'ctx>> {
        let v = self.reg(fr, r)?;
        Ok(self
            .b
            .build_and(v, self.ptr_c(u64::from(u32::MAX)), "ptr_idx")?)
    }

    /// The kfunc `op` compiled in; its r0.
    pub(super) fn inline_enetstl_ptr(
        &mut self,
        fr: &Frame<'ctx>,
        op: PtrOp,
    ) -> LResult<IntValue<'ctx>> {
        let t = self.t;
        let c = |v: u64| self.ptr_c(v);
        let here = self.ptr_block()?;
        let done = self.cx.insert_basic_block_after(here, "ptr_done");
        let mut exit = Exit {
            bb: done,
            incoming: Vec::new(),
        };
        let r1 = self.reg(fr, 1)?;
        match op {
            PtrOp::GetTmp | PtrOp::GetOut => {
                // A new reference to the node a tmp / an out link names.
                let (kind, at, mask) = match op {
                    PtrOp::GetTmp => (CONTAINER, C_TMPS, TMPS - 1),
                    _ => (NODE, OUTS, LINKS - 1),
                };
                let from = self.ptr_slot(&mut exit, r1, kind)?;
                let idx = self.ptr_u32(fr, 2)?;
                let idx = self.b.build_and(idx, c(mask), "ptr_link")?;
                let off = self.b.build_left_shift(idx, c(3), "ptr_link_off")?;
                let off = self.b.build_int_add(off, c(at as u64), "ptr_link_off")?;
                let h = self.ptr_load(self.ptr_at(from.addr, off)?, t.i64, "ptr_link_h")?;
                let to = self.ptr_by_handle(&mut exit, h)?;
                self.ptr_count(to, AtomicRMWBinOp::Add)?;
                let last = self.ptr_block()?;
                self.b.build_unconditional_branch(done)?;
                exit.incoming.push((to, last));
            }
            PtrOp::SetTmp => {
                // Tmp `idx` names the node, which the container must own.
                let cont = self.ptr_slot(&mut exit, r1, CONTAINER)?;
                let r2 = self.reg(fr, 2)?;
                let node = self.ptr_slot(&mut exit, r2, NODE)?;
                let idx = self.ptr_u32(fr, 3)?;
                let in_range =
                    self.b
                        .build_int_compare(IntPredicate::ULT, idx, c(TMPS), "ptr_tmp_ok")?;
                let owner =
                    self.ptr_load(self.ptr_at(node.addr, c(OWNER as u64))?, t.i64, "ptr_owner")?;
                let cont_h = self.ptr_handle(&cont)?;
                let owned =
                    self.b
                        .build_int_compare(IntPredicate::EQ, owner, cont_h, "ptr_owned")?;
                let ok = self.b.build_and(in_range, owned, "ptr_set_ok")?;
                self.ptr_require(&mut exit, ok, "ptr_set")?;
                let off = self.b.build_left_shift(idx, c(3), "ptr_tmp_off")?;
                let off = self.b.build_int_add(off, c(C_TMPS as u64), "ptr_tmp_off")?;
                let node_h = self.ptr_handle(&node)?;
                let st = self.b.build_store(self.ptr_at(cont.addr, off)?, node_h)?;
                st.set_alignment(8)
                    .and_then(|()| st.set_atomic_ordering(AtomicOrdering::Release))
                    .map_err(|e| LiftError::Build(e.to_string()))?;
                let last = self.ptr_block()?;
                self.b.build_unconditional_branch(done)?;
                exit.incoming.push((c(0), last));
            }
            PtrOp::Release => {
                // One reference less; the native frees the node when it
                // was the last (and undoes a drop of none).
                let node = self.ptr_slot(&mut exit, r1, NODE)?;
                let old = self.ptr_count(node.addr, AtomicRMWBinOp::Sub)?;
                let rare = self
                    .b
                    .build_int_compare(IntPredicate::ULE, old, c(1), "ptr_last")?;
                let kept = self.ptr_block()?;
                let slow = self.cx.insert_basic_block_after(kept, "ptr_dropped");
                self.b.build_conditional_branch(rare, slow, done)?;
                exit.incoming.push((c(0), kept));
                self.b.position_at_end(slow);
                let f = self.module.get_function(DROPPED_SYMBOL).unwrap_or_else(|| {
                    let f = self.module.add_function(
                        DROPPED_SYMBOL,
                        t.i64.fn_type(&[t.i64.into(), t.i64.into()], false),
                        Some(Linkage::External),
                    );
                    self.nounwind(f);
                    f
                });
                self.b
                    .build_call(f, &[node.addr.into(), old.into()], "ptr_free")?;
                self.b.build_unconditional_branch(done)?;
                exit.incoming.push((c(0), slow));
            }
        }
        self.b.position_at_end(done);
        let r0 = self.b.build_phi(t.i64, "ptr_r0")?;
        for (v, bb) in &exit.incoming {
            r0.add_incoming(&[(v, *bb)]);
        }
        Ok(r0.as_basic_value().into_int_value())
    }
}
