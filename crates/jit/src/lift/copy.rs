//! Copies: clang lowers `__builtin_memcpy` for BPF to a straight run of
//! load/store pairs (one byte at a time when the types are byte-aligned),
//! which LLVM cannot merge because it cannot tell that the two ranges do not
//! overlap. When the register analysis proves they do not, such a run is
//! exactly a `memcpy` of the covered bytes, and is emitted as one; the
//! temporary registers then get the value of their last load, read back from
//! the (unchanged) source.
//!
//! A run qualifies when, inside one basic block:
//! - every instruction is a zero-extending load `t = *(src + o)` or a store
//!   `*(dst + o + delta) = t` of a value loaded earlier in the run, of the
//!   same size, not yet stored, with one `src`, one `dst` and one `delta`;
//! - the temporaries are neither `src` nor `dst`, and every loaded value is
//!   stored exactly once;
//! - the source intervals are contiguous and do not overlap;
//! - the source and destination ranges are provably disjoint (one base
//!   register, both on this frame's stack, or both a known offset from the
//!   same value). Then the order of the accesses does not matter, and
//!   `memcpy` is exact.

use super::{Frame, LResult, LiftError, Lifter};
use crate::analysis::Prov;
use bpfjet_isa::{Insn, Operand, Reg, Size};
use inkwell::values::BasicValue;

/// Runs shorter than this are left to LLVM as they are.
const MIN_PAIRS: usize = 2;

/// A load of the run: register, offset from the source base, size.
type Loaded = (Reg, i16, Size);

/// A recognised copy: `bytes` bytes from `src + lo` to `dst + lo + delta`.
struct Run {
    src: Reg,
    dst: Reg,
    lo: i64,
    delta: i64,
    bytes: u64,
    /// Each temporary with the offset and size of its last load.
    temps: Vec<Loaded>,
    /// The slot after the run.
    end: usize,
}

impl<'ctx> Lifter<'ctx, '_> {
    /// If a copy run starts at `pc`, emit it as a `memcpy` and return the
    /// slot after it.
    pub(super) fn copy_run(&mut self, fr: &mut Frame<'ctx>, pc: usize) -> LResult<Option<usize>> {
        if pc < fr.copy_scanned {
            return Ok(None);
        }
        let run = match self.find_run(fr, pc) {
            Ok(run) => run,
            Err(scanned_to) => {
                fr.copy_scanned = scanned_to;
                return Ok(None);
            }
        };
        let t = self.t;
        let src_off = i16::try_from(run.lo).map_err(|_| self.bad_offset(pc))?;
        let dst_off = i16::try_from(run.lo + run.delta).map_err(|_| self.bad_offset(pc))?;
        let src = self.address(fr, pc, run.src, src_off, run.bytes)?;
        let dst = self.address(fr, pc, run.dst, dst_off, run.bytes)?;
        self.b
            .build_memcpy(dst, 1, src, 1, t.i64.const_int(run.bytes, false))
            .map_err(|e| LiftError::Build(e.to_string()))?;
        for (reg, off, size) in run.temps {
            let ty = self.sized(size);
            let p = self.address(fr, pc, run.src, off, size.bytes() as u64)?;
            let v = self.b.build_load(ty, p, "copied")?;
            if let Some(i) = v.as_instruction_value() {
                i.set_alignment(1)
                    .map_err(|e| LiftError::Build(e.to_string()))?;
            }
            let v = v.into_int_value();
            let v = if size == Size::DW {
                v
            } else {
                self.b.build_int_z_extend(v, t.i64, "zext")?
            };
            self.set_reg(fr, reg, v)?;
        }
        Ok(Some(run.end))
    }

    fn bad_offset(&self, pc: usize) -> LiftError {
        LiftError::Build(format!("copy run at {pc}: offset out of range"))
    }

    /// The longest qualifying run starting at `pc`, or the slot where the
    /// scan for one stopped.
    fn find_run(&self, fr: &Frame<'ctx>, pc: usize) -> Result<Run, usize> {
        let mut src: Option<Reg> = None;
        let mut dst: Option<Reg> = None;
        let mut delta: Option<i64> = None;
        // Loaded, not yet stored: register -> (offset, size).
        let mut pending: Vec<Loaded> = Vec::new();
        let mut temps: Vec<Loaded> = Vec::new();
        // Source intervals of the stored pairs.
        let mut copied: Vec<(i64, u64)> = Vec::new();
        // The longest prefix whose loads were all stored: (end, pairs, temps).
        let mut best: Option<(usize, usize, Vec<Loaded>)> = None;
        let mut q = pc;
        while q < fr.f.end {
            if q > pc && fr.blocks.contains_key(&q) {
                break;
            }
            match self.insns[q] {
                Insn::Load {
                    size,
                    sign_extend: false,
                    dst: t,
                    src: s,
                    off,
                } => {
                    if *src.get_or_insert(s) != s
                        || t == s
                        || Some(t) == dst
                        || pending.iter().any(|p| p.0 == t)
                    {
                        break;
                    }
                    pending.push((t, off, size));
                    temps.retain(|p| p.0 != t);
                    temps.push((t, off, size));
                }
                Insn::Store {
                    size,
                    dst: d,
                    off,
                    src: Operand::Reg(t),
                } => {
                    if *dst.get_or_insert(d) != d || temps.iter().any(|p| p.0 == d) {
                        break;
                    }
                    let Some(i) = pending.iter().position(|p| p.0 == t && p.2 == size) else {
                        break;
                    };
                    let (_, load_off, _) = pending.remove(i);
                    let d = i64::from(off) - i64::from(load_off);
                    if *delta.get_or_insert(d) != d {
                        break;
                    }
                    copied.push((i64::from(load_off), size.bytes() as u64));
                    if pending.is_empty() {
                        best = Some((q + 1, copied.len(), temps.clone()));
                    }
                }
                _ => break,
            }
            q += 1;
        }
        let scanned = q;
        let Some((end, pairs, temps)) = best.filter(|b| b.1 >= MIN_PAIRS) else {
            return Err(scanned);
        };
        let (Some(src), Some(dst), Some(delta)) = (src, dst, delta) else {
            return Err(scanned);
        };
        let mut intervals = copied[..pairs].to_vec();
        intervals.sort_unstable();
        let lo = intervals[0].0;
        let mut next = lo;
        for &(off, len) in &intervals {
            if off != next {
                return Err(scanned);
            }
            next = off + len as i64;
        }
        let bytes = (next - lo) as u64;
        let disjoint = match (self.prov(fr, pc, src), self.prov(fr, pc, dst)) {
            // One base register: only the offsets differ.
            _ if src == dst => Some((0, 0)),
            (Prov::Stack(a), Prov::Stack(b)) => Some((a, b)),
            (Prov::Rel { root: ra, off: a }, Prov::Rel { root: rb, off: b }) if ra == rb => {
                Some((a, b))
            }
            _ => None,
        }
        .is_some_and(|(a, b)| {
            let s = a + lo;
            let d = b + lo + delta;
            s + bytes as i64 <= d || d + bytes as i64 <= s
        });
        if !disjoint {
            return Err(scanned);
        }
        Ok(Run {
            src,
            dst,
            lo,
            delta,
            bytes,
            temps,
            end,
        })
    }
}
