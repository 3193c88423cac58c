//! Node memory's hot accessors compiled in: `bpfjet_node_next` and
//! `bpfjet_node_data` become the native's checks written as IR — the pool
//! header validated, the handle's slot bounded by the slots handed out,
//! its generation compared — and a load or an address, with no call.
//! Every check of `bpfjet_kfuncs::nodes` is kept, in the same order, so
//! the result is the native's for any bytes in the pool (the program may
//! write them all). Loads are unaligned: the pool may sit at any offset.

use super::{Frame, LResult, Lifter};
use bpfjet_kfuncs::nodes::{HEADER, MAGIC, MAX_DATA, MAX_LINKS};
use bpfjet_kfuncs::Inline;
use inkwell::values::{IntValue, PointerValue};
use inkwell::IntPredicate;

impl<'ctx> Lifter<'ctx, '_> {
    /// The u32 at byte `off` of `p`, zero-extended.
    fn node_u32(&self, p: PointerValue<'ctx>, off: IntValue<'ctx>) -> LResult<IntValue<'ctx>> {
        let t = self.t;
        // SAFETY (of the generated code): callers branch here only once the
        // offset is proven inside the pool.
        let at = unsafe { self.b.build_gep(t.i8, p, &[off], "node_at")? };
        let v = self.load_unaligned(t.i32.into(), at)?.into_int_value();
        Ok(self.b.build_int_z_extend(v, t.i64, "node_u32")?)
    }

    /// `slot + 1` in the handle's low half minus one, and whether that slot
    /// was handed out (`slot < min(fresh, capacity)`).
    fn node_slot(
        &self,
        h: IntValue<'ctx>,
        handed_out: IntValue<'ctx>,
    ) -> LResult<(IntValue<'ctx>, IntValue<'ctx>)> {
        let t = self.t;
        let low = self
            .b
            .build_and(h, t.i64.const_int(u64::from(u32::MAX), false), "slot1")?;
        let slot = self
            .b
            .build_int_sub(low, t.i64.const_int(1, false), "slot")?;
        // slot + 1 == 0 wraps to 2^64 - 1: never below the bound.
        let ok = self
            .b
            .build_int_compare(IntPredicate::ULT, slot, handed_out, "handed_out")?;
        Ok((slot, ok))
    }

    /// Whether the slot at `at` holds generation `h >> 32`, which is odd.
    fn node_gen_ok(
        &self,
        p: PointerValue<'ctx>,
        at: IntValue<'ctx>,
        h: IntValue<'ctx>,
    ) -> LResult<IntValue<'ctx>> {
        let t = self.t;
        let gen = self.node_u32(p, at)?;
        let want = self
            .b
            .build_right_shift(h, t.i64.const_int(32, false), false, "gen")?;
        let same = self
            .b
            .build_int_compare(IntPredicate::EQ, gen, want, "same_gen")?;
        let odd = self
            .b
            .build_and(want, t.i64.const_int(1, false), "gen_odd")?;
        let odd = self
            .b
            .build_int_compare(IntPredicate::NE, odd, t.i64.const_zero(), "live")?;
        Ok(self.b.build_and(same, odd, "gen_ok")?)
    }

    /// `bpfjet_node_next(pool r1, size r2, node r3, link r4)` or
    /// `bpfjet_node_data(pool r1, size r2, node r3, bytes r4)` in place.
    pub(super) fn inline_node(
        &mut self,
        fr: &Frame<'ctx>,
        form: Inline,
    ) -> LResult<IntValue<'ctx>> {
        let t = self.t;
        let c = |v: u64| t.i64.const_int(v, false);
        let p = self.pointer(fr, 1)?;
        let size = self.reg(fr, 2)?;
        let h = self.reg(fr, 3)?;
        let arg = self.reg(fr, 4)?;
        let data = matches!(form, Inline::NodeData);

        let entry = self
            .b
            .get_insert_block()
            .ok_or_else(|| super::LiftError::Build("no insert block".into()))?;
        let header = self.cx.append_basic_block(fr.func, "node_header");
        let slot_bb = self.cx.append_basic_block(fr.func, "node_slot");
        let link_bb = self.cx.append_basic_block(fr.func, "node_link");
        let done = self.cx.append_basic_block(fr.func, "node_done");

        // The header is inside the pool.
        let big =
            self.b
                .build_int_compare(IntPredicate::UGE, size, c(HEADER as u64), "has_header")?;
        self.b.build_conditional_branch(big, header, done)?;

        self.b.position_at_end(header);
        let magic = self.node_u32(p, c(0))?;
        let data_size = self.node_u32(p, c(4))?;
        let nlinks = self.node_u32(p, c(8))?;
        let capacity = self.node_u32(p, c(12))?;
        let fresh = self.node_u32(p, c(16))?;
        let links_bytes = self.b.build_int_mul(nlinks, c(8), "links_bytes")?;
        let data_at = self.b.build_int_add(links_bytes, c(8), "data_at")?;
        let padded = self.b.build_int_add(data_size, c(7), "padded")?;
        let padded = self.b.build_and(padded, c(!7), "padded")?;
        let stride = self.b.build_int_add(data_at, padded, "stride")?;
        let slots = self.b.build_int_mul(capacity, stride, "slots")?;
        let end = self.b.build_int_add(slots, c(HEADER as u64), "end")?;
        let mut ok =
            self.b
                .build_int_compare(IntPredicate::EQ, magic, c(u64::from(MAGIC)), "magic")?;
        let ds1 = self.b.build_int_sub(data_size, c(1), "ds1")?;
        for cond in [
            self.b
                .build_int_compare(IntPredicate::ULT, ds1, c(u64::from(MAX_DATA)), "ds")?,
            self.b
                .build_int_compare(IntPredicate::ULE, nlinks, c(u64::from(MAX_LINKS)), "nl")?,
            self.b
                .build_int_compare(IntPredicate::ULE, end, size, "fits")?,
        ] {
            ok = self.b.build_and(ok, cond, "shape")?;
        }
        let fewer = self
            .b
            .build_int_compare(IntPredicate::ULT, fresh, capacity, "fewer")?;
        let handed_out = self
            .b
            .build_select(fewer, fresh, capacity, "handed_out")?
            .into_int_value();
        let (slot, slot_ok) = self.node_slot(h, handed_out)?;
        ok = self.b.build_and(ok, slot_ok, "slot_ok")?;
        let arg_ok = if data {
            let a1 = self.b.build_int_sub(arg, c(1), "bytes1")?;
            self.b
                .build_int_compare(IntPredicate::ULT, a1, data_size, "bytes_ok")?
        } else {
            self.b
                .build_int_compare(IntPredicate::ULT, arg, nlinks, "link_ok")?
        };
        ok = self.b.build_and(ok, arg_ok, "args_ok")?;
        self.b.build_conditional_branch(ok, slot_bb, done)?;

        self.b.position_at_end(slot_bb);
        let rel = self.b.build_int_mul(slot, stride, "slot_rel")?;
        let at = self.b.build_int_add(rel, c(HEADER as u64), "slot_at")?;
        let live = self.node_gen_ok(p, at, h)?;
        let base = self.reg(fr, 1)?;
        let data_addr = if data {
            let off = self.b.build_int_add(at, data_at, "data_off")?;
            Some(self.b.build_int_add(base, off, "data_addr")?)
        } else {
            None
        };
        self.b.build_conditional_branch(live, link_bb, done)?;

        // node_data: the address; node_next: the link, if it is live.
        self.b.position_at_end(link_bb);
        let mut to_val = None;
        if data {
            self.b.build_unconditional_branch(done)?;
        } else {
            let link_off = self.b.build_int_mul(arg, c(8), "link_off")?;
            let link_off = self.b.build_int_add(link_off, c(8), "link_off")?;
            let link_at = self.b.build_int_add(at, link_off, "link_at")?;
            // SAFETY (of the generated code): link < nlinks inside a slot
            // proven inside the pool.
            let lp = unsafe { self.b.build_gep(t.i8, p, &[link_at], "linkp")? };
            let to = self.load_unaligned(t.i64.into(), lp)?.into_int_value();
            let (to_slot, to_ok) = self.node_slot(to, handed_out)?;
            let to_bb = self.cx.insert_basic_block_after(link_bb, "node_to");
            self.b.build_conditional_branch(to_ok, to_bb, done)?;

            self.b.position_at_end(to_bb);
            let rel = self.b.build_int_mul(to_slot, stride, "to_rel")?;
            let to_at = self.b.build_int_add(rel, c(HEADER as u64), "to_at")?;
            let to_live = self.node_gen_ok(p, to_at, to)?;
            let v = self
                .b
                .build_select(to_live, to, c(0), "next")?
                .into_int_value();
            to_val = Some((v, to_bb));
            self.b.build_unconditional_branch(done)?;
        }

        self.b.position_at_end(done);
        let r0 = self.b.build_phi(t.i64, "node")?;
        r0.add_incoming(&[(&c(0), entry), (&c(0), header), (&c(0), slot_bb)]);
        if let Some(addr) = data_addr {
            r0.add_incoming(&[(&addr, link_bb)]);
        } else if let Some((v, to_bb)) = to_val {
            r0.add_incoming(&[(&c(0), link_bb), (&v, to_bb)]);
        }
        Ok(r0.as_basic_value().into_int_value())
    }
}
