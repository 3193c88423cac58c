//! eNetSTL's node-pointer kfuncs compiled in: `ptr_container_get_tmp`,
//! `ptr_get_out`, `ptr_container_set_tmp` and `ptr_release_node` — the
//! four calls of every skip-list search step — and `ptr_connect`,
//! `ptr_unconnect` (an insert's and a delete's links) and
//! `ptr_write_data1/2` (a range check and a move) become the checks of the
//! natives (`bpfjet_kfuncs::enetstl_ptr`) that eNetSTL's semantics need,
//! written as IR: a handle read from a link or tmp resolved through the
//! table of space bases and compared with the slot's state word (a node
//! freed, reused or taken out of its container reads NULL: lazy safety),
//! a tmp number in range, a node set in a tmp owned by that container,
//! two nodes linked owned by one container with link numbers in range;
//! references counted with the same atomic read-modify-writes.
//!
//! The natives also check that every object argument is a live slot of
//! the right kind, for the interpreter's `--unverified` runs. The JIT
//! compiles only verified programs, whose object arguments are referenced,
//! non-NULL pointers the library handed out, of the argument's type
//! (`bpfjet_verifier::module_kptr`): such a slot is live and of that kind
//! for as long as the program holds it, so the compiled forms use it as
//! it is (its handle is its state word without the kind).
//!
//! The one thing left to a native is what follows a release that drops
//! the last reference (freeing the slot under the space's lock), rare:
//! `enetstl_ptr::DROPPED_SYMBOL`.
//!
//! Loads and stores of the bookkeeping words are atomic with the natives'
//! orderings (acquire loads, release stores: plain moves on x86-64), so a
//! compiled program and natives called by another thread see each other
//! as two natives would. The table of space bases is read with plain
//! invariant loads: an entry is written once, before any handle naming
//! its space exists, so LLVM may share one load between calls.

use super::{Frame, LResult, LiftError, Lifter};
use bpfjet_kfuncs::enetstl_ptr::{
    BASES_SYMBOL, C_TMPS, DATA1, DATA1_BYTES, DATA2, DATA2_BYTES, DROPPED_SYMBOL,
    HANDLE_SLOT_SHIFT, HANDLE_SPACE_SHIFT, INS, KIND_MASK, LINKS, MAX_SPACES, NODE, NODE_BYTES,
    OUTS, OWNER, REFCNT, SPACE_SLOTS, STATE, TMPS,
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

    /// The handle of the live object at `addr` (an argument the verifier
    /// checked): its state word without the kind (`Slot::handle`).
    fn ptr_handle_of(&self, addr: IntValue<'ctx>) -> LResult<IntValue<'ctx>> {
        let state = self.ptr_load(
            self.ptr_at(addr, self.ptr_c(STATE as u64))?,
            self.t.i64,
            "ptr_state",
        )?;
        Ok(self
            .b
            .build_and(state, self.ptr_c(!KIND_MASK), "ptr_handle")?)
    }

    /// The base of the space handle `h` names, 0 for none (the table of
    /// space bases, read with an invariant load).
    fn ptr_space_base(&self, h: IntValue<'ctx>) -> LResult<IntValue<'ctx>> {
        let t = self.t;
        let c = |v: u64| self.ptr_c(v);
        let space =
            self.b
                .build_right_shift(h, c(u64::from(HANDLE_SPACE_SHIFT)), false, "ptr_hspace")?;
        let space = self
            .b
            .build_and(space, c(MAX_SPACES as u64 - 1), "ptr_hspace")?;
        let bases = self.ptr_table(BASES_SYMBOL);
        // SAFETY (of the generated code): space < MAX_SPACES, the table's length.
        let entry = unsafe { self.b.build_gep(t.i64, bases, &[space], "ptr_basep")? };
        let base = self.b.build_load(t.i64, entry, "ptr_base")?;
        let i = base
            .as_instruction_value()
            .ok_or_else(|| LiftError::Build("load is no instruction".into()))?;
        i.set_alignment(8)
            .and_then(|()| {
                i.set_metadata(
                    self.cx.metadata_node(&[]),
                    self.cx.get_kind_id("invariant.load"),
                )
            })
            .map_err(|e| LiftError::Build(e.to_string()))?;
        Ok(base.into_int_value())
    }

    /// The slot handle `h` names in the space at `base` (nonzero), and
    /// whether it is a live node of that generation: its state word is
    /// `h | NODE` (0 names no slot: no state has generation 0).
    fn ptr_named(
        &self,
        base: IntValue<'ctx>,
        h: IntValue<'ctx>,
    ) -> LResult<(IntValue<'ctx>, IntValue<'ctx>)> {
        let c = |v: u64| self.ptr_c(v);
        // The slot's offset in its space, straight from the handle's bits.
        let rel = self.b.build_left_shift(
            h,
            c(u64::from(NODE_BYTES.trailing_zeros() - HANDLE_SLOT_SHIFT)),
            "ptr_rel",
        )?;
        let rel = self.b.build_and(
            rel,
            c((SPACE_SLOTS as u64 - 1) << NODE_BYTES.trailing_zeros()),
            "ptr_rel",
        )?;
        let addr = self.b.build_int_add(base, rel, "ptr_node")?;
        let state = self.ptr_load(
            self.ptr_at(addr, c(STATE as u64))?,
            self.t.i64,
            "ptr_hstate",
        )?;
        let want = self.b.build_or(h, c(u64::from(NODE)), "ptr_want")?;
        let same = self
            .b
            .build_int_compare(IntPredicate::EQ, state, want, "ptr_same_gen")?;
        Ok((addr, same))
    }

    /// `enetstl_ptr::by_handle(h, NODE)`: the address of the live node
    /// handle `h` names.
    fn ptr_by_handle(&self, exit: &mut Exit<'ctx>, h: IntValue<'ctx>) -> LResult<IntValue<'ctx>> {
        let base = self.ptr_space_base(h)?;
        let live =
            self.b
                .build_int_compare(IntPredicate::NE, base, self.ptr_c(0), "ptr_space_live")?;
        self.ptr_require(exit, live, "ptr_space_found")?;
        let (addr, same) = self.ptr_named(base, h)?;
        self.ptr_require(exit, same, "ptr_live")?;
        Ok(addr)
    }

    /// `by_handle(h, NODE).is_some()` as a flag.
    fn ptr_is_live(&self, h: IntValue<'ctx>) -> LResult<IntValue<'ctx>> {
        let base = self.ptr_space_base(h)?;
        let found =
            self.b
                .build_int_compare(IntPredicate::NE, base, self.ptr_c(0), "ptr_space_live")?;
        let here = self.ptr_block()?;
        let check = self.cx.insert_basic_block_after(here, "ptr_check_live");
        let join = self.cx.insert_basic_block_after(check, "ptr_checked");
        self.b.build_conditional_branch(found, check, join)?;
        self.b.position_at_end(check);
        let (_, same) = self.ptr_named(base, h)?;
        let checked = self.ptr_block()?;
        self.b.build_unconditional_branch(join)?;
        self.b.position_at_end(join);
        let live = self.b.build_phi(self.cx.bool_type(), "ptr_is_live")?;
        live.add_incoming(&[(&found, here), (&same, checked)]);
        Ok(live.as_basic_value().into_int_value())
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
                let (at, mask) = match op {
                    PtrOp::GetTmp => (C_TMPS, TMPS - 1),
                    _ => (OUTS, LINKS - 1),
                };
                let idx = self.ptr_u32(fr, 2)?;
                let idx = self.b.build_and(idx, c(mask), "ptr_link")?;
                let off = self.b.build_left_shift(idx, c(3), "ptr_link_off")?;
                let off = self.b.build_int_add(off, c(at as u64), "ptr_link_off")?;
                let h = self.ptr_load(self.ptr_at(r1, off)?, t.i64, "ptr_link_h")?;
                let to = self.ptr_by_handle(&mut exit, h)?;
                self.ptr_count(to, AtomicRMWBinOp::Add)?;
                let last = self.ptr_block()?;
                self.b.build_unconditional_branch(done)?;
                exit.incoming.push((to, last));
            }
            PtrOp::SetTmp => {
                // Tmp `idx` names the node, which the container must own.
                let node = self.reg(fr, 2)?;
                let idx = self.ptr_u32(fr, 3)?;
                let in_range =
                    self.b
                        .build_int_compare(IntPredicate::ULT, idx, c(TMPS), "ptr_tmp_ok")?;
                let owner =
                    self.ptr_load(self.ptr_at(node, c(OWNER as u64))?, t.i64, "ptr_owner")?;
                let cont_h = self.ptr_handle_of(r1)?;
                let owned =
                    self.b
                        .build_int_compare(IntPredicate::EQ, owner, cont_h, "ptr_owned")?;
                let ok = self.b.build_and(in_range, owned, "ptr_set_ok")?;
                self.ptr_require(&mut exit, ok, "ptr_set")?;
                let off = self.b.build_left_shift(idx, c(3), "ptr_tmp_off")?;
                let off = self.b.build_int_add(off, c(C_TMPS as u64), "ptr_tmp_off")?;
                let node_h = self.ptr_handle_of(node)?;
                let st = self.b.build_store(self.ptr_at(r1, off)?, node_h)?;
                st.set_alignment(8)
                    .and_then(|()| st.set_atomic_ordering(AtomicOrdering::Release))
                    .map_err(|e| LiftError::Build(e.to_string()))?;
                let last = self.ptr_block()?;
                self.b.build_unconditional_branch(done)?;
                exit.incoming.push((c(0), last));
            }
            PtrOp::WriteData1 | PtrOp::WriteData2 => {
                // `write_data`: the bytes go to the node when they lie in
                // the data area (`off >= lo`, `off + size <= lo + len`
                // without overflow): 0, else -1.
                let (lo, len) = match op {
                    PtrOp::WriteData1 => (DATA1 as u64, DATA1_BYTES as u64),
                    _ => (DATA2 as u64, DATA2_BYTES as u64),
                };
                let (off, data, size) = (self.reg(fr, 2)?, self.reg(fr, 3)?, self.reg(fr, 4)?);
                let from_lo =
                    self.b
                        .build_int_compare(IntPredicate::UGE, off, c(lo), "ptr_wr_lo")?;
                let below_end =
                    self.b
                        .build_int_compare(IntPredicate::ULE, off, c(lo + len), "ptr_wr_hi")?;
                let room = self.b.build_int_sub(c(lo + len), off, "ptr_wr_room")?;
                let fits =
                    self.b
                        .build_int_compare(IntPredicate::ULE, size, room, "ptr_wr_fits")?;
                let ok = self.b.build_and(from_lo, below_end, "ptr_wr_in")?;
                let ok = self.b.build_and(ok, fits, "ptr_wr_ok")?;
                let here = self.ptr_block()?;
                let copy = self.cx.insert_basic_block_after(here, "ptr_wr_copy");
                self.b.build_conditional_branch(ok, copy, done)?;
                exit.incoming.push((c(u64::MAX), here));
                self.b.position_at_end(copy);
                let dst = self.ptr_at(r1, off)?;
                let src = self.b.build_int_to_ptr(data, t.ptr, "ptr_wr_src")?;
                // A move, as the native's `ptr::copy`.
                self.b
                    .build_memmove(dst, 1, src, 1, size)
                    .map_err(|e| LiftError::Build(e.to_string()))?;
                self.b.build_unconditional_branch(done)?;
                exit.incoming.push((c(0), copy));
            }
            PtrOp::Connect | PtrOp::Unconnect => {
                // `linkable`: both nodes owned by one container (an owner
                // word is nonzero only while its container holds the node:
                // cleared eagerly when it leaves or the container goes), the
                // link numbers in range; else -EINVAL.
                let p2 = self.reg(fr, 3)?;
                let (idx1, idx2) = (self.ptr_u32(fr, 2)?, self.ptr_u32(fr, 4)?);
                let owner1 =
                    self.ptr_load(self.ptr_at(r1, c(OWNER as u64))?, t.i64, "ptr_owner1")?;
                let owner2 =
                    self.ptr_load(self.ptr_at(p2, c(OWNER as u64))?, t.i64, "ptr_owner2")?;
                let mut ok =
                    self.b
                        .build_int_compare(IntPredicate::EQ, owner1, owner2, "ptr_same_owner")?;
                for cond in [
                    self.b
                        .build_int_compare(IntPredicate::NE, owner1, c(0), "ptr_owned")?,
                    self.b
                        .build_int_compare(IntPredicate::ULT, idx1, c(LINKS), "ptr_idx1_ok")?,
                    self.b
                        .build_int_compare(IntPredicate::ULT, idx2, c(LINKS), "ptr_idx2_ok")?,
                ] {
                    ok = self.b.build_and(ok, cond, "ptr_linkable")?;
                }
                let here = self.ptr_block()?;
                let linkable = self.cx.insert_basic_block_after(here, "ptr_linkable");
                self.b.build_conditional_branch(ok, linkable, done)?;
                exit.incoming.push((
                    c(bpfjet_kfuncs::errno::neg(bpfjet_kfuncs::errno::EINVAL)),
                    here,
                ));
                self.b.position_at_end(linkable);
                let out_off = self.b.build_left_shift(idx1, c(3), "ptr_out_off")?;
                let out_off = self
                    .b
                    .build_int_add(out_off, c(OUTS as u64), "ptr_out_off")?;
                let in_off = self.b.build_left_shift(idx2, c(3), "ptr_in_off")?;
                let in_off = self.b.build_int_add(in_off, c(INS as u64), "ptr_in_off")?;
                let (out_p, in_p) = (self.ptr_at(r1, out_off)?, self.ptr_at(p2, in_off)?);
                let out = self.ptr_load(out_p, t.i64, "ptr_out")?;
                let inn = self.ptr_load(in_p, t.i64, "ptr_in")?;
                let (h1, h2) = (self.ptr_handle_of(r1)?, self.ptr_handle_of(p2)?);
                // connect: both links free (a link naming a node no longer
                // live is free); unconnect: they join these two. Else -1.
                let free_or_joined = if op == PtrOp::Connect {
                    let out_live = self.ptr_is_live(out)?;
                    let in_live = self.ptr_is_live(inn)?;
                    let taken = self.b.build_or(out_live, in_live, "ptr_taken")?;
                    self.b.build_not(taken, "ptr_free")?
                } else {
                    let a = self
                        .b
                        .build_int_compare(IntPredicate::EQ, out, h2, "ptr_out_joins")?;
                    let b = self
                        .b
                        .build_int_compare(IntPredicate::EQ, inn, h1, "ptr_in_joins")?;
                    self.b.build_and(a, b, "ptr_joined")?
                };
                let here = self.ptr_block()?;
                let link = self.cx.insert_basic_block_after(here, "ptr_link");
                self.b
                    .build_conditional_branch(free_or_joined, link, done)?;
                exit.incoming.push((c(u64::MAX), here));
                self.b.position_at_end(link);
                let (new_out, new_in) = if op == PtrOp::Connect {
                    (h2, h1)
                } else {
                    (c(0), c(0))
                };
                for (p, v) in [(out_p, new_out), (in_p, new_in)] {
                    let st = self.b.build_store(p, v)?;
                    st.set_alignment(8)
                        .and_then(|()| st.set_atomic_ordering(AtomicOrdering::Release))
                        .map_err(|e| LiftError::Build(e.to_string()))?;
                }
                self.b.build_unconditional_branch(done)?;
                exit.incoming.push((c(0), link));
            }
            PtrOp::Release => {
                // One reference less; the native frees the node when it
                // was the last (and undoes a drop of none).
                let old = self.ptr_count(r1, AtomicRMWBinOp::Sub)?;
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
                self.b.build_call(f, &[r1.into(), old.into()], "ptr_free")?;
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
