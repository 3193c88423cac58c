//! Kfuncs of bpfjet's NF library (`bpfjet_kfuncs`): compiled in from their
//! inline form where they have one (bit scans as `llvm.cttz`/`ctlz`/
//! `ctpop`, CRC32C as `llvm.x86.sse42.crc32.*` when the target has SSE4.2,
//! bucket searches as a vector compare whose mask is bit-cast to an integer
//! and scanned), otherwise called directly as natives (no trampoline).
//! Programs bound without helper inlining keep the trampoline.

use super::calls::basic_result;
use super::{Frame, LResult, LiftError, Lifter};
use crate::analysis::Prov;
use bpfjet_kfuncs::{Inline, Kfunc, Lanes};
use inkwell::intrinsics::Intrinsic;
use inkwell::module::Linkage;
use inkwell::types::{BasicTypeEnum, IntType};
use inkwell::values::{BasicMetadataValueEnum, BasicValue, IntValue, PointerValue};
use inkwell::IntPredicate;

impl<'ctx> Lifter<'ctx, '_> {
    /// The kfunc call at `pc` compiled in or called directly; false leaves
    /// it to the trampoline.
    pub(super) fn try_kfunc(&mut self, fr: &mut Frame<'ctx>, pc: usize, id: i32) -> LResult<bool> {
        let Some(&k) = self.bind.kfuncs.get(&id) else {
            return Ok(false);
        };
        fr.call_pc = pc;
        if k.inline == Some(Inline::GeoCountdown) {
            let r0 = self.inline_geo_countdown(fr, k)?;
            self.set_reg(fr, 0, r0)?;
            return Ok(true);
        }
        if let Some(Inline::EnetPtr(op)) = k.inline {
            let r0 = self.inline_enetstl_ptr(fr, op)?;
            self.set_reg(fr, 0, r0)?;
            return Ok(true);
        }
        if let Some(form @ (Inline::NodeNext | Inline::NodeData)) = k.inline {
            let r0 = self.inline_node(fr, form)?;
            self.set_reg(fr, 0, r0)?;
            return Ok(true);
        }
        if let Some(form) = k.inline {
            if let Some(r0) = self.inline_kfunc(fr, pc, form)? {
                self.set_reg(fr, 0, r0)?;
                return Ok(true);
            }
        }
        self.native_kfunc(fr, k)?;
        Ok(true)
    }

    /// The kernel's `bpf_dynptr_from_xdp` / `bpf_dynptr_slice(_rdwr)` on a
    /// verified XDP program: a direct call on the run's frame (no registry,
    /// no `HelperCtx`); `bpf_dynptr_adjust`, `_is_null`, `_is_rdonly` and
    /// `_size` on any verified program: a direct call on the dynptr alone.
    /// False leaves the call to the trampoline.
    pub(super) fn try_dynptr_kfunc(
        &mut self,
        fr: &mut Frame<'ctx>,
        pc: usize,
        id: i32,
    ) -> LResult<bool> {
        use super::direct::Arg::{Const, Ctx, Pc, Reg};
        use bpfjet_verifier::dynptr_kfunc::DynptrKfunc;
        let Some(&k) = self.bind.dynptr_kfuncs.get(&id) else {
            return Ok(false);
        };
        if let Some(which) = crate::natives::DYNPTR_QUERIES.iter().position(|&q| q == k) {
            fr.call_pc = pc;
            self.call_checked(
                fr,
                pc,
                crate::natives::DYNPTR_QUERY,
                &[Reg(1), Const(which as u64), Reg(2), Reg(3)],
            )?;
            return Ok(true);
        }
        if !self.bind.xdp {
            return Ok(false);
        }
        fr.call_pc = pc;
        match k {
            DynptrKfunc::FromXdp => self.call_checked(
                fr,
                pc,
                crate::natives::DYNPTR_FROM_XDP,
                &[Ctx, Reg(1), Reg(2), Reg(3), Pc],
            )?,
            DynptrKfunc::Slice | DynptrKfunc::SliceRdwr => {
                let rdwr = u64::from(k == DynptrKfunc::SliceRdwr);
                self.call_checked(
                    fr,
                    pc,
                    crate::natives::DYNPTR_SLICE,
                    &[Ctx, Reg(1), Reg(2), Reg(3), Reg(4), Const(rdwr), Pc],
                )?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn native_kfunc(&mut self, fr: &Frame<'ctx>, k: &Kfunc) -> LResult<()> {
        let r0 = self.call_native(fr, k)?;
        self.set_reg(fr, 0, r0)
    }

    /// The sampler compiled in: while the countdown (the pool's first u32)
    /// is nonzero, decrement it and yield 0; a sampled event (countdown 0)
    /// takes the next pre-generated count from the pool in place and
    /// yields 1. The native runs only for what it alone does: refill a
    /// used-up pool (once per `POOL` samples), and answer for a pool never
    /// initialised (scale 0: 0, nothing changed). Layout: `random::GeoPool`.
    fn inline_geo_countdown(&mut self, fr: &Frame<'ctx>, k: &Kfunc) -> LResult<IntValue<'ctx>> {
        use bpfjet_kfuncs::random::{GeoPool, POOL};
        use std::mem::offset_of;
        let t = self.t;
        let pool = self.pointer(fr, 1)?;
        let field = |this: &Self, off: usize, name: &str| -> LResult<PointerValue<'ctx>> {
            // SAFETY (for LLVM): inside the GeoPool the verifier proved.
            Ok(unsafe {
                this.b
                    .build_gep(t.i8, pool, &[t.i64.const_int(off as u64, false)], name)?
            })
        };
        let store = |this: &Self, p: PointerValue<'ctx>, v: IntValue<'ctx>| -> LResult<()> {
            this.b
                .build_store(p, v)?
                .set_alignment(1)
                .map_err(|e| LiftError::Build(e.to_string()))
        };
        let scale_p = field(self, offset_of!(GeoPool, scale), "geo_scalep")?;
        let scale = self.load_unaligned(t.i32.into(), scale_p)?.into_int_value();
        let c = self.load_unaligned(t.i32.into(), pool)?.into_int_value();
        let idle =
            self.b
                .build_int_compare(IntPredicate::EQ, scale, t.i32.const_zero(), "geo_idle")?;
        let live = self.cx.append_basic_block(fr.func, "geo_live");
        let skip = self.cx.append_basic_block(fr.func, "geo_skip");
        let take = self.cx.append_basic_block(fr.func, "geo_take");
        let hit = self.cx.append_basic_block(fr.func, "geo_hit");
        let draw = self.cx.append_basic_block(fr.func, "geo_draw");
        let done = self.cx.append_basic_block(fr.func, "geo_done");
        self.b.build_conditional_branch(idle, draw, live)?;

        self.b.position_at_end(live);
        let sampled =
            self.b
                .build_int_compare(IntPredicate::EQ, c, t.i32.const_zero(), "geo_due")?;
        self.b.build_conditional_branch(sampled, take, skip)?;

        self.b.position_at_end(skip);
        let left = self
            .b
            .build_int_sub(c, t.i32.const_int(1, false), "geo_left")?;
        store(self, pool, left)?;
        self.b.build_unconditional_branch(done)?;

        // The next count, if the pool has one left (`next` is the
        // program's memory: checked, never trusted).
        self.b.position_at_end(take);
        let next_p = field(self, offset_of!(GeoPool, next), "geo_nextp")?;
        let next = self.load_unaligned(t.i32.into(), next_p)?.into_int_value();
        let left_in_pool = self.b.build_int_compare(
            IntPredicate::ULT,
            next,
            t.i32.const_int(POOL as u64, false),
            "geo_left_in_pool",
        )?;
        self.b.build_conditional_branch(left_in_pool, hit, draw)?;

        self.b.position_at_end(hit);
        let at = self.b.build_int_z_extend(next, t.i64, "geo_at")?;
        let off = self.b.build_int_add(
            self.b
                .build_left_shift(at, t.i64.const_int(2, false), "geo_off")?,
            t.i64.const_int(offset_of!(GeoPool, counts) as u64, false),
            "geo_off",
        )?;
        // SAFETY (for LLVM): next < POOL, inside the pool's counts.
        let count_p = unsafe { self.b.build_gep(t.i8, pool, &[off], "geo_countp")? };
        let count = self.load_unaligned(t.i32.into(), count_p)?.into_int_value();
        store(self, pool, count)?;
        let next1 = self
            .b
            .build_int_add(next, t.i32.const_int(1, false), "geo_next")?;
        store(self, next_p, next1)?;
        self.b.build_unconditional_branch(done)?;

        self.b.position_at_end(draw);
        let drawn = self.call_native(fr, k)?;
        let draw_end = self
            .b
            .get_insert_block()
            .ok_or_else(|| LiftError::Build("no insert block".into()))?;
        self.b.build_unconditional_branch(done)?;

        self.b.position_at_end(done);
        let r0 = self.b.build_phi(t.i64, "geo")?;
        r0.add_incoming(&[
            (&t.i64.const_zero(), skip),
            (&t.i64.const_int(1, false), hit),
            (&drawn, draw_end),
        ]);
        Ok(r0.as_basic_value().into_int_value())
    }

    fn call_native(&mut self, fr: &Frame<'ctx>, k: &Kfunc) -> LResult<IntValue<'ctx>> {
        let t = self.t;
        let symbol = k.symbol();
        let f = match self.module.get_function(&symbol) {
            Some(f) => f,
            None => {
                let f = self.module.add_function(
                    &symbol,
                    t.i64.fn_type(&[t.i64.into(); 5], false),
                    Some(Linkage::External),
                );
                self.nounwind(f);
                f
            }
        };
        let mut args: Vec<BasicMetadataValueEnum<'ctx>> = Vec::with_capacity(5);
        for r in 1..=5 {
            args.push(self.reg(fr, r)?.into());
        }
        let r0 = self.b.build_call(f, &args, k.name)?;
        Ok(basic_result(r0)?.into_int_value())
    }

    fn intrinsic(
        &self,
        name: &str,
        types: &[BasicTypeEnum<'ctx>],
        args: &[BasicMetadataValueEnum<'ctx>],
    ) -> LResult<IntValue<'ctx>> {
        let decl = Intrinsic::find(name)
            .and_then(|i| i.get_declaration(self.module, types))
            .ok_or_else(|| LiftError::Build(format!("{name} is unavailable")))?;
        let call = self.b.build_call(decl, args, name)?;
        Ok(basic_result(call)?.into_int_value())
    }

    fn narrow(&self, fr: &Frame<'ctx>, r: u8, ty: IntType<'ctx>) -> LResult<IntValue<'ctx>> {
        let v = self.reg(fr, r)?;
        Ok(if ty.get_bit_width() == 64 {
            v
        } else {
            self.b.build_int_truncate(v, ty, "narrow")?
        })
    }

    fn widen(&self, v: IntValue<'ctx>) -> LResult<IntValue<'ctx>> {
        Ok(if v.get_type().get_bit_width() == 64 {
            v
        } else {
            self.b.build_int_z_extend(v, self.t.i64, "widen")?
        })
    }

    /// Pointer argument `r` of the kfunc call being lifted. One into the
    /// stack is a GEP on the frame (`address`), not an `inttoptr` of the
    /// register: the frame's address then never escapes through an inline
    /// form, so LLVM keeps a key the program just wrote to its stack in
    /// registers (a CRC32C of a 5-tuple reads the stores' values, no
    /// store-forwarding stall of a wide load over narrow stores).
    pub(super) fn pointer(&self, fr: &Frame<'ctx>, r: u8) -> LResult<PointerValue<'ctx>> {
        self.address(fr, fr.call_pc, r, 0, 1)
    }

    /// An unaligned load of `ty` from `p`.
    pub(super) fn load_unaligned(
        &self,
        ty: BasicTypeEnum<'ctx>,
        p: PointerValue<'ctx>,
    ) -> LResult<inkwell::values::BasicValueEnum<'ctx>> {
        let v = self.b.build_load(ty, p, "kfunc_load")?;
        if let Some(i) = v.as_instruction_value() {
            i.set_alignment(1)
                .map_err(|e| LiftError::Build(e.to_string()))?;
        }
        Ok(v)
    }

    /// The value of the inline form, or `None` when it does not apply here
    /// (a size unknown at compile time, no SSE4.2 on the target).
    fn inline_kfunc(
        &mut self,
        fr: &Frame<'ctx>,
        pc: usize,
        form: Inline,
    ) -> LResult<Option<IntValue<'ctx>>> {
        let t = self.t;
        let f = self.cx.bool_type().const_zero();
        Ok(Some(match form {
            Inline::Ctz { bits } | Inline::Clz { bits } | Inline::Popcount { bits } => {
                let x = self.narrow(fr, 1, self.int(bits)?)?;
                let ty = [x.get_type().into()];
                let v = match form {
                    Inline::Ctz { .. } => {
                        self.intrinsic("llvm.cttz", &ty, &[x.into(), f.into()])?
                    }
                    Inline::Clz { .. } => {
                        self.intrinsic("llvm.ctlz", &ty, &[x.into(), f.into()])?
                    }
                    _ => self.intrinsic("llvm.ctpop", &ty, &[x.into()])?,
                };
                self.widen(v)?
            }
            Inline::Ffs { bits } => {
                let x = self.narrow(fr, 1, self.int(bits)?)?;
                let tz =
                    self.intrinsic("llvm.cttz", &[x.get_type().into()], &[x.into(), f.into()])?;
                let tz = self.widen(tz)?;
                let one = self.b.build_int_add(tz, t.i64.const_int(1, false), "ffs")?;
                let zero = self.b.build_int_compare(
                    IntPredicate::EQ,
                    x,
                    x.get_type().const_zero(),
                    "is_zero",
                )?;
                self.b
                    .build_select(zero, t.i64.const_zero(), one, "ffs")?
                    .into_int_value()
            }
            Inline::Crc32c => {
                if !self.target_has("+sse4.2") {
                    return Ok(None);
                }
                match self.prov(fr, pc, 2) {
                    // A known length: straight-line code, no loop.
                    Prov::Const(n) if n <= 256 => {
                        let data = self.pointer(fr, 1)?;
                        let seed = self.narrow(fr, 3, t.i32)?;
                        let c = self.crc32c_fixed(data, n, seed)?;
                        self.widen(c)?
                    }
                    _ => self.inline_crc32c(fr)?,
                }
            }
            Inline::CountMin { increment } => match self.inline_count_min(fr, pc, increment)? {
                Some(v) => v,
                None => return Ok(None),
            },
            Inline::FindEq {
                lane_bytes,
                lanes,
                key,
            }
            | Inline::MaskEq {
                lane_bytes,
                lanes,
                key,
                ..
            } => {
                let n = match lanes {
                    Lanes::Fixed(n) => n,
                    Lanes::SizeReg(r) => match self.prov(fr, pc, r) {
                        Prov::Const(size) if size / u64::from(lane_bytes) <= 64 => {
                            (size / u64::from(lane_bytes)) as u32
                        }
                        _ => return Ok(None),
                    },
                };
                if n == 0 {
                    return Ok(None);
                }
                let lane = self.int(lane_bytes * 8)?;
                let vec_ty = lane.vec_type(n);
                let bucket = self.pointer(fr, 1)?;
                let v = self
                    .load_unaligned(vec_ty.into(), bucket)?
                    .into_vector_value();
                let k = self.narrow(fr, key, lane)?;
                let splat = self.b.build_insert_element(
                    vec_ty.get_undef(),
                    k,
                    t.i32.const_zero(),
                    "key",
                )?;
                let splat = self.b.build_shuffle_vector(
                    splat,
                    vec_ty.get_undef(),
                    t.i32.vec_type(n).const_zero(),
                    "splat",
                )?;
                let eq = self.b.build_int_compare(IntPredicate::EQ, v, splat, "eq")?;
                match form {
                    Inline::MaskEq {
                        byte_mask: true, ..
                    } => {
                        // Two bits per element, as a byte-wise movemask
                        // of a 16-bit compare gives them.
                        let wide = self.b.build_int_s_extend(eq, vec_ty, "lanes")?;
                        let bytes = self.int(8)?.vec_type(n * lane_bytes);
                        let bytes = self
                            .b
                            .build_bit_cast(wide, bytes, "bytes")?
                            .into_vector_value();
                        let set = self.b.build_int_compare(
                            IntPredicate::NE,
                            bytes,
                            bytes.get_type().const_zero(),
                            "byte_eq",
                        )?;
                        let m = self
                            .b
                            .build_bit_cast(set, self.int(n * lane_bytes)?, "mask")?
                            .into_int_value();
                        self.widen(m)?
                    }
                    _ => {
                        let m = self
                            .b
                            .build_bit_cast(eq, self.int(n)?, "mask")?
                            .into_int_value();
                        if matches!(form, Inline::FindEq { .. }) {
                            // cttz of an all-clear mask is n: "not found".
                            let i = self.intrinsic(
                                "llvm.cttz",
                                &[m.get_type().into()],
                                &[m.into(), f.into()],
                            )?;
                            self.widen(i)?
                        } else {
                            self.widen(m)?
                        }
                    }
                }
            }
            Inline::Reduce {
                lane_bytes,
                max,
                index,
            } => match self.inline_reduce(fr, pc, lane_bytes, max, index)? {
                Some(v) => v,
                None => return Ok(None),
            },
            Inline::BktList(op) => match self.inline_bktlist(fr, pc, op)? {
                Some(v) => v,
                None => return Ok(None),
            },
            // Lowered by `inline_geo_countdown` (it needs the native).
            Inline::GeoCountdown => return Ok(None),
            Inline::NodePut => t.i64.const_zero(),
            Inline::NodeNext | Inline::NodeData | Inline::EnetPtr(_) => return Ok(None),
            Inline::KeyEq {
                bytes,
                one_if_differ,
            } => {
                let ty = self.int(bytes * 8)?;
                let a = self.pointer(fr, 1)?;
                let b = self.pointer(fr, 2)?;
                let a = self.load_unaligned(ty.into(), a)?.into_int_value();
                let b = self.load_unaligned(ty.into(), b)?.into_int_value();
                let pred = if one_if_differ {
                    IntPredicate::NE
                } else {
                    IntPredicate::EQ
                };
                let r = self.b.build_int_compare(pred, a, b, "key_eq")?;
                self.b.build_int_z_extend(r, t.i64, "key_eq")?
            }
        }))
    }

    /// CRC32C of the `n` bytes at `data` from `seed` (an i32): 8 bytes per
    /// `crc32q`, the rest (under 8 bytes) in at most one 4-, one 2- and one
    /// 1-byte step.
    fn crc32c_fixed(
        &self,
        data: PointerValue<'ctx>,
        n: u64,
        seed: IntValue<'ctx>,
    ) -> LResult<IntValue<'ctx>> {
        let t = self.t;
        let mut c = self.b.build_int_z_extend(seed, t.i64, "crc")?;
        let mut at = 0;
        while at + 8 <= n {
            // SAFETY (for LLVM): inside the n bytes the verifier proved.
            let p = unsafe {
                self.b
                    .build_gep(t.i8, data, &[t.i64.const_int(at, false)], "wp")?
            };
            let w = self.load_unaligned(t.i64.into(), p)?;
            c = self.intrinsic("llvm.x86.sse42.crc32.64.64", &[], &[c.into(), w.into()])?;
            at += 8;
        }
        let mut c = self.b.build_int_truncate(c, t.i32, "crc32")?;
        // The rest in as few dependent steps as the widths allow (the
        // instruction on a wider operand is its bytes, lowest first).
        for (width, intrinsic) in [
            (4, "llvm.x86.sse42.crc32.32.32"),
            (2, "llvm.x86.sse42.crc32.32.16"),
            (1, "llvm.x86.sse42.crc32.32.8"),
        ] {
            if at + width > n {
                continue;
            }
            // SAFETY (for LLVM): inside the n bytes the verifier proved.
            let p = unsafe {
                self.b
                    .build_gep(t.i8, data, &[t.i64.const_int(at, false)], "bp")?
            };
            let v = self.load_unaligned(self.int(width as u32 * 8)?.into(), p)?;
            c = self.intrinsic(intrinsic, &[], &[c.into(), v.into()])?;
            at += width;
        }
        debug_assert_eq!(at, n);
        Ok(c)
    }

    /// `bpfjet_cm_inc` / `bpfjet_cm_min` with constant sizes and k: the k
    /// hashes, counter updates and minimum in the program's own code.
    fn inline_count_min(
        &mut self,
        fr: &Frame<'ctx>,
        pc: usize,
        increment: bool,
    ) -> LResult<Option<IntValue<'ctx>>> {
        let t = self.t;
        let (Prov::Const(key_len), Prov::Const(rows_len), Prov::Const(k)) = (
            self.prov(fr, pc, 2),
            self.prov(fr, pc, 4),
            self.prov(fr, pc, 5),
        ) else {
            return Ok(None);
        };
        if !self.target_has("+sse4.2") || key_len > 256 {
            return Ok(None);
        }
        // Outside 1..=8 or too small a table: the native returns -EINVAL.
        if !(1..=bpfjet_kfuncs::multihash::MAX_HASHES).contains(&k) || rows_len / 4 / k == 0 {
            return Ok(None);
        }
        let width = rows_len / 4 / k;
        let key = self.pointer(fr, 1)?;
        let rows = self.pointer(fr, 3)?;
        let mut estimate = t.i32.const_all_ones();
        for (row, &seed) in bpfjet_kfuncs::multihash::SEEDS[..k as usize]
            .iter()
            .enumerate()
        {
            let h = self.crc32c_fixed(key, key_len, t.i32.const_int(u64::from(seed), false))?;
            let col = self
                .b
                .build_int_unsigned_rem(h, t.i32.const_int(width, false), "col")?;
            let col = self.b.build_int_z_extend(col, t.i64, "col")?;
            let index =
                self.b
                    .build_int_add(col, t.i64.const_int(row as u64 * width, false), "counter")?;
            let off = self
                .b
                .build_left_shift(index, t.i64.const_int(2, false), "off")?;
            // SAFETY (for LLVM): index < k * width, inside rows__sz bytes.
            let p = unsafe { self.b.build_gep(t.i8, rows, &[off], "counterp")? };
            let mut v = self.load_unaligned(t.i32.into(), p)?.into_int_value();
            if increment {
                v = self.b.build_int_add(v, t.i32.const_int(1, false), "inc")?;
                let st = self.b.build_store(p, v)?;
                st.set_alignment(1)
                    .map_err(|e| LiftError::Build(e.to_string()))?;
            }
            let less = self
                .b
                .build_int_compare(IntPredicate::ULT, v, estimate, "less")?;
            estimate = self
                .b
                .build_select(less, v, estimate, "estimate")?
                .into_int_value();
        }
        Ok(Some(
            self.b.build_int_z_extend(estimate, t.i64, "estimate")?,
        ))
    }

    pub(super) fn int(&self, bits: u32) -> LResult<IntType<'ctx>> {
        std::num::NonZeroU32::new(bits)
            .and_then(|b| self.cx.custom_width_int_type(b).ok())
            .ok_or_else(|| LiftError::Build(format!("no {bits}-bit integer type")))
    }

    fn target_has(&self, feature: &str) -> bool {
        crate::pipeline::target_spec(&self.opts.cpu)
            .map(|s| s.features.split(',').any(|f| f == feature))
            .unwrap_or(false)
    }

    /// CRC32C of r2 bytes at r1 from seed r3: 8 bytes per `crc32q`, then
    /// one byte per `crc32b`.
    fn inline_crc32c(&mut self, fr: &Frame<'ctx>) -> LResult<IntValue<'ctx>> {
        let t = self.t;
        let data = self.pointer(fr, 1)?;
        let len = self.reg(fr, 2)?;
        let seed = self.reg(fr, 3)?;
        let seed = self
            .b
            .build_and(seed, t.i64.const_int(0xffff_ffff, false), "seed")?;
        let words = self
            .b
            .build_right_shift(len, t.i64.const_int(3, false), false, "words")?;
        let words_end = self
            .b
            .build_left_shift(words, t.i64.const_int(3, false), "words_end")?;
        let entry = self
            .b
            .get_insert_block()
            .ok_or_else(|| LiftError::Build("no insert block".into()))?;
        let word_head = self.cx.append_basic_block(fr.func, "crc_words");
        let word_body = self.cx.append_basic_block(fr.func, "crc_word");
        let byte_head = self.cx.append_basic_block(fr.func, "crc_bytes");
        let byte_body = self.cx.append_basic_block(fr.func, "crc_byte");
        let done = self.cx.append_basic_block(fr.func, "crc_done");
        self.b.build_unconditional_branch(word_head)?;

        self.b.position_at_end(word_head);
        let i = self.b.build_phi(t.i64, "i")?;
        let c = self.b.build_phi(t.i64, "c")?;
        let iv = i.as_basic_value().into_int_value();
        let cv = c.as_basic_value().into_int_value();
        let c_words = self.b.build_int_truncate(cv, t.i32, "c_words")?;
        let more = self
            .b
            .build_int_compare(IntPredicate::ULT, iv, words, "more")?;
        self.b
            .build_conditional_branch(more, word_body, byte_head)?;

        self.b.position_at_end(word_body);
        let off = self
            .b
            .build_left_shift(iv, t.i64.const_int(3, false), "off")?;
        // SAFETY (for LLVM): inside the data__sz bytes the verifier proved.
        let p = unsafe { self.b.build_gep(t.i8, data, &[off], "wp")? };
        let w = self.load_unaligned(t.i64.into(), p)?;
        let c_next = self.intrinsic("llvm.x86.sse42.crc32.64.64", &[], &[cv.into(), w.into()])?;
        let i_next = self.b.build_int_add(iv, t.i64.const_int(1, false), "i1")?;
        self.b.build_unconditional_branch(word_head)?;
        i.add_incoming(&[(&t.i64.const_zero(), entry), (&i_next, word_body)]);
        c.add_incoming(&[(&seed, entry), (&c_next, word_body)]);

        self.b.position_at_end(byte_head);
        let j = self.b.build_phi(t.i64, "j")?;
        let c32 = self.b.build_phi(t.i32, "c32")?;
        let jv = j.as_basic_value().into_int_value();
        let c32v = c32.as_basic_value().into_int_value();
        let more = self
            .b
            .build_int_compare(IntPredicate::ULT, jv, len, "more_bytes")?;
        self.b.build_conditional_branch(more, byte_body, done)?;

        self.b.position_at_end(byte_body);
        // SAFETY (for LLVM): inside the data__sz bytes the verifier proved.
        let p = unsafe { self.b.build_gep(t.i8, data, &[jv], "bp")? };
        let byte = self.b.build_load(t.i8, p, "byte")?;
        let c32_next = self.intrinsic(
            "llvm.x86.sse42.crc32.32.8",
            &[],
            &[c32v.into(), byte.into()],
        )?;
        let j_next = self.b.build_int_add(jv, t.i64.const_int(1, false), "j1")?;
        self.b.build_unconditional_branch(byte_head)?;
        // The byte loop starts where the word loop ended (its exit edge).
        j.add_incoming(&[(&words_end, word_head), (&j_next, byte_body)]);
        c32.add_incoming(&[(&c_words, word_head), (&c32_next, byte_body)]);

        self.b.position_at_end(done);
        self.b
            .build_int_z_extend(c32v, t.i64, "crc")
            .map_err(Into::into)
    }
}
