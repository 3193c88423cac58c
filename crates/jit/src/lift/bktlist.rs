//! bpfjet's list-buckets (`bpfjet_kfuncs::bktlist`) compiled into the
//! program: push, pop, peek and len as a few loads, compares and stores,
//! where a call to the native costs more than the work (a timing wheel or
//! a priority queue does one or two per packet).
//!
//! Applies when the memory size and the element size are constants (the
//! verifier's facts; `sizeof` of a map value field in practice). The code
//! does what the native does, in the same order: the header is validated
//! (bucket count nonzero, element size the one passed, the node pool inside
//! the memory), the bucket index checked, and every link read from the
//! memory checked against the pool's capacity before it addresses a node —
//! a structure the program scribbled over yields -EINVAL, never an access
//! outside the memory the verifier proved. Elements are read before any
//! link is written and written out after, as the native's stack copy does,
//! so an element buffer inside the structure behaves the same.

use super::{Frame, LResult, LiftError, Lifter};
use crate::analysis::Prov;
use bpfjet_kfuncs::bktlist::{ENOENT, ENOSPC};
use bpfjet_kfuncs::errno::{neg, EINVAL};
use bpfjet_kfuncs::BktOp;
use inkwell::basic_block::BasicBlock;
use inkwell::values::{IntValue, PointerValue};
use inkwell::IntPredicate;

/// Bytes of the header (`nbuckets, elem_size, capacity, free`).
const HEADER: u64 = 16;
/// Bytes of one bucket (`head, tail, len`).
const BUCKET: u64 = 12;
/// Largest element compiled in (loaded and stored as one integer); larger
/// ones call the native.
const INLINE_ELEM_MAX: u64 = 64;

/// The header's facts, as IR values (i64).
struct Layout<'ctx> {
    capacity: IntValue<'ctx>,
    /// Offset of node 0.
    nodes: IntValue<'ctx>,
    stride: IntValue<'ctx>,
    /// Offset of the bucket's `head`.
    bucket: IntValue<'ctx>,
}

/// The join block's incoming results.
struct Exits<'ctx> {
    done: BasicBlock<'ctx>,
    results: Vec<(IntValue<'ctx>, BasicBlock<'ctx>)>,
}

impl<'ctx> Lifter<'ctx, '_> {
    /// The operation at `pc` compiled in, or `None` when a size is not a
    /// constant the inline form handles (the native is called then).
    pub(super) fn inline_bktlist(
        &mut self,
        fr: &Frame<'ctx>,
        pc: usize,
        op: BktOp,
    ) -> LResult<Option<IntValue<'ctx>>> {
        let Prov::Const(mem_size) = self.prov(fr, pc, 2) else {
            return Ok(None);
        };
        // Too small for the header: the native answers -EINVAL.
        if mem_size < HEADER {
            return Ok(None);
        }
        let elem_size = match op {
            BktOp::Len => None,
            _ => match self.prov(fr, pc, 5) {
                Prov::Const(n) if (1..=INLINE_ELEM_MAX).contains(&n) => Some(n),
                _ => return Ok(None),
            },
        };
        let m = self.pointer(fr, 1)?;
        let bucket = self.reg(fr, 3)?;
        let mut exits = Exits {
            done: self.cx.append_basic_block(fr.func, "bkt_done"),
            results: Vec::new(),
        };
        let l = self.bkt_layout(fr, m, mem_size, elem_size, bucket, &mut exits)?;
        match op {
            BktOp::Len => {
                let len = self.bkt_field(m, l.bucket, 8)?;
                self.bkt_exit(&mut exits, len)?;
            }
            BktOp::Push => {
                let size = elem_size.unwrap_or(0);
                self.bkt_push(fr, m, &l, size, &mut exits)?;
            }
            BktOp::Pop | BktOp::Peek => {
                let size = elem_size.unwrap_or(0);
                self.bkt_front(fr, m, &l, size, op == BktOp::Pop, &mut exits)?;
            }
        }
        self.b.position_at_end(exits.done);
        let r0 = self.b.build_phi(self.t.i64, "bkt_r0")?;
        for (v, bb) in &exits.results {
            r0.add_incoming(&[(v, *bb)]);
        }
        Ok(Some(r0.as_basic_value().into_int_value()))
    }

    /// Validates the header and the bucket index (else -EINVAL) and leaves
    /// the builder where they hold.
    fn bkt_layout(
        &mut self,
        fr: &Frame<'ctx>,
        m: PointerValue<'ctx>,
        mem_size: u64,
        elem_size: Option<u64>,
        bucket: IntValue<'ctx>,
        exits: &mut Exits<'ctx>,
    ) -> LResult<Layout<'ctx>> {
        let t = self.t;
        let c = |v: u64| t.i64.const_int(v, false);
        let nbuckets = self.bkt_field(m, c(0), 0)?;
        let stored_size = self.bkt_field(m, c(0), 4)?;
        let capacity = self.bkt_field(m, c(0), 8)?;
        let nodes = self.b.build_int_add(
            c(HEADER),
            self.b.build_int_mul(nbuckets, c(BUCKET), "bkt_bytes")?,
            "bkt_nodes",
        )?;
        // The element size this call passes must be the one laid out (and
        // so in 1..=256); `len` passes none and checks the range itself.
        let (size_ok, stride) = match elem_size {
            Some(n) => (
                self.b
                    .build_int_compare(IntPredicate::EQ, stored_size, c(n), "bkt_size_ok")?,
                c(4 + n.div_ceil(4) * 4),
            ),
            None => {
                let lo =
                    self.b
                        .build_int_compare(IntPredicate::NE, stored_size, c(0), "bkt_size_lo")?;
                let hi = self.b.build_int_compare(
                    IntPredicate::ULE,
                    stored_size,
                    c(u64::from(bpfjet_kfuncs::bktlist::MAX_ELEM)),
                    "bkt_size_hi",
                )?;
                let rounded = self.b.build_and(
                    self.b.build_int_add(stored_size, c(3), "bkt_round")?,
                    c(!3),
                    "bkt_round",
                )?;
                (
                    self.b.build_and(lo, hi, "bkt_size_ok")?,
                    self.b.build_int_add(rounded, c(4), "bkt_stride")?,
                )
            }
        };
        // Header values are u32, so none of this overflows 64 bits.
        let end = self.b.build_int_add(
            nodes,
            self.b.build_int_mul(capacity, stride, "bkt_pool")?,
            "bkt_end",
        )?;
        let fits = self
            .b
            .build_int_compare(IntPredicate::ULE, end, c(mem_size), "bkt_fits")?;
        let some = self
            .b
            .build_int_compare(IntPredicate::NE, nbuckets, c(0), "bkt_some")?;
        let in_range =
            self.b
                .build_int_compare(IntPredicate::ULT, bucket, nbuckets, "bkt_in_range")?;
        let ok = self.b.build_and(fits, some, "bkt_ok")?;
        let ok = self.b.build_and(ok, size_ok, "bkt_ok")?;
        let ok = self.b.build_and(ok, in_range, "bkt_ok")?;
        let bucket = self.b.build_int_add(
            c(HEADER),
            self.b.build_int_mul(bucket, c(BUCKET), "bkt_b")?,
            "bkt_bucket",
        )?;
        self.bkt_guard(fr, ok, c(neg(EINVAL)), exits, "bkt_valid")?;
        Ok(Layout {
            capacity,
            nodes,
            stride,
            bucket,
        })
    }

    /// Continues in a new block when `ok`, else leaves with `err`.
    fn bkt_guard(
        &mut self,
        fr: &Frame<'ctx>,
        ok: IntValue<'ctx>,
        err: IntValue<'ctx>,
        exits: &mut Exits<'ctx>,
        name: &str,
    ) -> LResult<()> {
        let next = self.cx.append_basic_block(fr.func, name);
        let here = self.bkt_block()?;
        self.b.build_conditional_branch(ok, next, exits.done)?;
        exits.results.push((err, here));
        self.b.position_at_end(next);
        Ok(())
    }

    fn bkt_exit(&mut self, exits: &mut Exits<'ctx>, v: IntValue<'ctx>) -> LResult<()> {
        let here = self.bkt_block()?;
        self.b.build_unconditional_branch(exits.done)?;
        exits.results.push((v, here));
        Ok(())
    }

    fn bkt_block(&self) -> LResult<BasicBlock<'ctx>> {
        self.b
            .get_insert_block()
            .ok_or_else(|| LiftError::Build("no insert block".into()))
    }

    /// Offset of node `link - 1` (links are node + 1; checked by the caller).
    fn bkt_node(&self, l: &Layout<'ctx>, link: IntValue<'ctx>) -> LResult<IntValue<'ctx>> {
        let index = self
            .b
            .build_int_sub(link, self.t.i64.const_int(1, false), "bkt_index")?;
        let at = self.b.build_int_mul(index, l.stride, "bkt_at")?;
        Ok(self.b.build_int_add(l.nodes, at, "bkt_node")?)
    }

    /// `link` names a node of the pool (1..=capacity).
    fn bkt_link_ok(&self, l: &Layout<'ctx>, link: IntValue<'ctx>) -> LResult<IntValue<'ctx>> {
        let nonzero = self.b.build_int_compare(
            IntPredicate::NE,
            link,
            self.t.i64.const_zero(),
            "bkt_link",
        )?;
        let inside =
            self.b
                .build_int_compare(IntPredicate::ULE, link, l.capacity, "bkt_link_in")?;
        Ok(self.b.build_and(nonzero, inside, "bkt_link_ok")?)
    }

    fn bkt_addr(
        &self,
        m: PointerValue<'ctx>,
        base: IntValue<'ctx>,
        field: u64,
    ) -> LResult<PointerValue<'ctx>> {
        let off = self
            .b
            .build_int_add(base, self.t.i64.const_int(field, false), "bkt_off")?;
        // SAFETY (for LLVM): offsets are used only where the checks above
        // put them inside the memory the verifier proved.
        Ok(unsafe { self.b.build_gep(self.t.i8, m, &[off], "bkt_p")? })
    }

    /// The u32 at `base + field`, zero-extended.
    fn bkt_field(
        &self,
        m: PointerValue<'ctx>,
        base: IntValue<'ctx>,
        field: u64,
    ) -> LResult<IntValue<'ctx>> {
        let p = self.bkt_addr(m, base, field)?;
        let v = self.load_unaligned(self.t.i32.into(), p)?.into_int_value();
        Ok(self.b.build_int_z_extend(v, self.t.i64, "bkt_u32")?)
    }

    /// Stores the low 32 bits of `v` at `base + field`.
    fn bkt_set(
        &self,
        m: PointerValue<'ctx>,
        base: IntValue<'ctx>,
        field: u64,
        v: IntValue<'ctx>,
    ) -> LResult<()> {
        let p = self.bkt_addr(m, base, field)?;
        let v = self.b.build_int_truncate(v, self.t.i32, "bkt_u32")?;
        self.bkt_store(p, v)
    }

    fn bkt_store(&self, p: PointerValue<'ctx>, v: IntValue<'ctx>) -> LResult<()> {
        self.b
            .build_store(p, v)?
            .set_alignment(1)
            .map_err(|e| LiftError::Build(e.to_string()))
    }

    /// An element of `size` bytes at `p`, as one integer.
    fn bkt_load_elem(&self, p: PointerValue<'ctx>, size: u64) -> LResult<IntValue<'ctx>> {
        let ty = self.int((size * 8) as u32)?;
        Ok(self.load_unaligned(ty.into(), p)?.into_int_value())
    }

    fn bkt_push(
        &mut self,
        fr: &Frame<'ctx>,
        m: PointerValue<'ctx>,
        l: &Layout<'ctx>,
        size: u64,
        exits: &mut Exits<'ctx>,
    ) -> LResult<()> {
        let t = self.t;
        let zero = t.i64.const_zero();
        // The element first: it may lie inside the structure.
        let elem = self.pointer(fr, 4)?;
        let elem = self.bkt_load_elem(elem, size)?;
        let free = self.bkt_field(m, zero, 12)?;
        let tail = self.bkt_field(m, l.bucket, 4)?;
        let len = self.bkt_field(m, l.bucket, 8)?;
        let no_free = self
            .b
            .build_int_compare(IntPredicate::EQ, free, zero, "bkt_full")?;
        let free_ok = self.bkt_link_ok(l, free)?;
        let no_tail = self
            .b
            .build_int_compare(IntPredicate::EQ, tail, zero, "bkt_no_tail")?;
        let tail_ok = self.bkt_link_ok(l, tail)?;
        let tail_ok = self.b.build_or(no_tail, tail_ok, "bkt_tail_ok")?;
        let ok = self.b.build_and(free_ok, tail_ok, "bkt_push_ok")?;
        // An empty free list is -ENOSPC whatever the tail holds.
        let err = self
            .b
            .build_select(
                no_free,
                t.i64.const_int(neg(ENOSPC), false),
                t.i64.const_int(neg(EINVAL), false),
                "bkt_err",
            )?
            .into_int_value();
        self.bkt_guard(fr, ok, err, exits, "bkt_push")?;

        let n = self.bkt_node(l, free)?;
        let next_free = self.bkt_field(m, n, 0)?;
        self.bkt_set(m, zero, 12, next_free)?;
        self.bkt_set(m, n, 0, zero)?;
        let slot = self.bkt_addr(m, n, 4)?;
        self.bkt_store(slot, elem)?;
        // Link from the old tail, or from the bucket's head when empty.
        let tail_node = self.bkt_node(l, tail)?;
        let link_at = self
            .b
            .build_select(no_tail, l.bucket, tail_node, "bkt_link_at")?
            .into_int_value();
        self.bkt_set(m, link_at, 0, free)?;
        self.bkt_set(m, l.bucket, 4, free)?;
        let len = self
            .b
            .build_int_add(len, t.i64.const_int(1, false), "bkt_len")?;
        self.bkt_set(m, l.bucket, 8, len)?;
        self.bkt_exit(exits, zero)
    }

    /// Peek (`pop` false) or pop the bucket's front element into r4.
    fn bkt_front(
        &mut self,
        fr: &Frame<'ctx>,
        m: PointerValue<'ctx>,
        l: &Layout<'ctx>,
        size: u64,
        pop: bool,
        exits: &mut Exits<'ctx>,
    ) -> LResult<()> {
        let t = self.t;
        let zero = t.i64.const_zero();
        let head = self.bkt_field(m, l.bucket, 0)?;
        let empty = self
            .b
            .build_int_compare(IntPredicate::EQ, head, zero, "bkt_empty")?;
        let head_ok = self.bkt_link_ok(l, head)?;
        let err = self
            .b
            .build_select(
                empty,
                t.i64.const_int(neg(ENOENT), false),
                t.i64.const_int(neg(EINVAL), false),
                "bkt_err",
            )?
            .into_int_value();
        self.bkt_guard(fr, head_ok, err, exits, "bkt_front")?;
        let n = self.bkt_node(l, head)?;
        let out = self.pointer(fr, 4)?;
        if !pop {
            let slot = self.bkt_addr(m, n, 4)?;
            let elem = self.bkt_load_elem(slot, size)?;
            self.bkt_store(out, elem)?;
            return self.bkt_exit(exits, zero);
        }
        let next = self.bkt_field(m, n, 0)?;
        let last = self
            .b
            .build_int_compare(IntPredicate::EQ, next, zero, "bkt_last")?;
        let next_ok = self.bkt_link_ok(l, next)?;
        let next_ok = self.b.build_or(last, next_ok, "bkt_next_ok")?;
        self.bkt_guard(
            fr,
            next_ok,
            t.i64.const_int(neg(EINVAL), false),
            exits,
            "bkt_pop",
        )?;
        let slot = self.bkt_addr(m, n, 4)?;
        let elem = self.bkt_load_elem(slot, size)?;
        self.bkt_set(m, l.bucket, 0, next)?;
        // The tail is cleared when the last element leaves.
        let tail = self.bkt_field(m, l.bucket, 4)?;
        let tail = self
            .b
            .build_select(last, zero, tail, "bkt_tail")?
            .into_int_value();
        self.bkt_set(m, l.bucket, 4, tail)?;
        let len = self.bkt_field(m, l.bucket, 8)?;
        let nonzero = self
            .b
            .build_int_compare(IntPredicate::NE, len, zero, "bkt_len_nz")?;
        let less = self
            .b
            .build_int_sub(len, t.i64.const_int(1, false), "bkt_len")?;
        let len = self
            .b
            .build_select(nonzero, less, zero, "bkt_len")?
            .into_int_value();
        self.bkt_set(m, l.bucket, 8, len)?;
        let free = self.bkt_field(m, zero, 12)?;
        self.bkt_set(m, n, 0, free)?;
        self.bkt_set(m, zero, 12, head)?;
        self.bkt_store(out, elem)?;
        self.bkt_exit(exits, zero)
    }
}
