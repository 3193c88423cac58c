//! Bucket reductions of the NF library (`bpfjet_min/max/argmin/argmax_*`)
//! compiled in: the bucket loaded as one vector, `llvm.vector.reduce.umin`
//! / `umax`, and for the index a compare of the vector with the result
//! whose mask is scanned (`cttz`: the first occurrence, as the native).
//! A load-balancer's earliest-deadline pick or a top-k table's smallest
//! entry is then a few vector instructions instead of a call.

use super::{Frame, LResult, Lifter};
use crate::analysis::Prov;
use inkwell::intrinsics::Intrinsic;
use inkwell::values::IntValue;
use inkwell::IntPredicate;

/// Largest bucket compiled in, in elements (one mask word).
const MAX_LANES: u64 = 64;

impl<'ctx> Lifter<'ctx, '_> {
    /// The reduction at `pc`, or `None` when the bucket size is not a
    /// constant of 1..=64 elements (the native handles the rest, and the
    /// empty bucket's conventions).
    pub(super) fn inline_reduce(
        &mut self,
        fr: &Frame<'ctx>,
        pc: usize,
        lane_bytes: u32,
        max: bool,
        index: bool,
    ) -> LResult<Option<IntValue<'ctx>>> {
        let t = self.t;
        let Prov::Const(size) = self.prov(fr, pc, 2) else {
            return Ok(None);
        };
        let n = size / u64::from(lane_bytes);
        if n == 0 || n > MAX_LANES {
            return Ok(None);
        }
        let n = n as u32;
        let lane = self.int(lane_bytes * 8)?;
        let vec_ty = lane.vec_type(n);
        let bucket = self.pointer(fr, 1)?;
        let v = self
            .load_unaligned(vec_ty.into(), bucket)?
            .into_vector_value();
        let name = if max {
            "llvm.vector.reduce.umax"
        } else {
            "llvm.vector.reduce.umin"
        };
        let decl = Intrinsic::find(name)
            .and_then(|i| i.get_declaration(self.module, &[vec_ty.into()]))
            .ok_or_else(|| super::LiftError::Build(format!("{name} is unavailable")))?;
        let call = self.b.build_call(decl, &[v.into()], "reduced")?;
        let r = super::calls::basic_result(call)?.into_int_value();
        if !index {
            return Ok(Some(
                self.b.build_int_z_extend_or_bit_cast(r, t.i64, "reduced")?,
            ));
        }
        let splat =
            self.b
                .build_insert_element(vec_ty.get_undef(), r, t.i32.const_zero(), "best")?;
        let splat = self.b.build_shuffle_vector(
            splat,
            vec_ty.get_undef(),
            t.i32.vec_type(n).const_zero(),
            "best",
        )?;
        let eq = self.b.build_int_compare(IntPredicate::EQ, v, splat, "at")?;
        let mask = self
            .b
            .build_bit_cast(eq, self.int(n)?, "at_mask")?
            .into_int_value();
        let cttz = Intrinsic::find("llvm.cttz")
            .and_then(|i| i.get_declaration(self.module, &[mask.get_type().into()]))
            .ok_or_else(|| super::LiftError::Build("llvm.cttz is unavailable".into()))?;
        // The mask has a bit set (the reduced value is an element).
        let poison_if_zero = self.cx.bool_type().const_int(1, false);
        let first = self
            .b
            .build_call(cttz, &[mask.into(), poison_if_zero.into()], "first")?;
        let first = super::calls::basic_result(first)?.into_int_value();
        Ok(Some(
            self.b
                .build_int_z_extend_or_bit_cast(first, t.i64, "first")?,
        ))
    }
}
