//! Tristate numbers: for every bit, known 0, known 1 or unknown.
//!
//! A [`Tnum`] `{ value, mask }` stands for every `x` with `x & !mask == value`:
//! bits set in `mask` are unknown, the others equal the bit in `value`
//! (`value & mask == 0` always holds). Every operation over-approximates: the
//! result contains `op(a, b)` for every `a` in the first and `b` in the second.

use std::fmt;

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tnum {
    pub value: u64,
    pub mask: u64,
}

impl fmt::Debug for Tnum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_const() {
            write!(f, "{:#x}", self.value)
        } else {
            write!(f, "({:#x}; {:#x})", self.value, self.mask)
        }
    }
}

// Named like the ISA operations they abstract; not `std::ops` because the
// shifts take widths and amounts, not tnums.
#[allow(clippy::should_implement_trait)]
impl Tnum {
    pub const UNKNOWN: Tnum = Tnum {
        value: 0,
        mask: u64::MAX,
    };

    pub const fn constant(v: u64) -> Tnum {
        Tnum { value: v, mask: 0 }
    }

    /// The smallest tnum containing every value of `[min, max]`.
    pub fn range(min: u64, max: u64) -> Tnum {
        if min > max {
            return Tnum::UNKNOWN;
        }
        let chi = min ^ max;
        let bits = 64 - chi.leading_zeros();
        if bits > 63 {
            return Tnum::UNKNOWN;
        }
        let delta = (1u64 << bits) - 1;
        Tnum {
            value: min & !delta,
            mask: delta,
        }
    }

    pub fn is_const(self) -> bool {
        self.mask == 0
    }

    pub fn is_unknown(self) -> bool {
        self.mask == u64::MAX
    }

    /// Whether the concrete value `v` is one of this tnum's values.
    pub fn contains(self, v: u64) -> bool {
        v & !self.mask == self.value
    }

    /// Whether every value of `other` is a value of `self`.
    pub fn includes(self, other: Tnum) -> bool {
        if other.mask & !self.mask != 0 {
            return false;
        }
        other.value & !self.mask == self.value
    }

    pub fn lsh(self, shift: u32) -> Tnum {
        if shift >= 64 {
            return Tnum::constant(0);
        }
        Tnum {
            value: self.value << shift,
            mask: self.mask << shift,
        }
    }

    pub fn rsh(self, shift: u32) -> Tnum {
        if shift >= 64 {
            return Tnum::constant(0);
        }
        Tnum {
            value: self.value >> shift,
            mask: self.mask >> shift,
        }
    }

    /// Arithmetic shift right of the low `bits` (32 or 64) bits, the result
    /// zero-extended from `bits`.
    pub fn arsh(self, shift: u32, bits: u32) -> Tnum {
        if bits == 32 {
            let s = shift.min(31);
            let v = ((self.value as u32 as i32) >> s) as u32 as u64;
            let m = ((self.mask as u32 as i32) >> s) as u32 as u64;
            Tnum {
                value: v & !m,
                mask: m,
            }
        } else {
            let s = shift.min(63);
            let v = ((self.value as i64) >> s) as u64;
            let m = ((self.mask as i64) >> s) as u64;
            Tnum {
                value: v & !m,
                mask: m,
            }
        }
    }

    pub fn add(self, other: Tnum) -> Tnum {
        let sm = self.mask.wrapping_add(other.mask);
        let sv = self.value.wrapping_add(other.value);
        let sigma = sm.wrapping_add(sv);
        let chi = sigma ^ sv;
        let mu = chi | self.mask | other.mask;
        Tnum {
            value: sv & !mu,
            mask: mu,
        }
    }

    pub fn sub(self, other: Tnum) -> Tnum {
        let dv = self.value.wrapping_sub(other.value);
        let alpha = dv.wrapping_add(self.mask);
        let beta = dv.wrapping_sub(other.mask);
        let chi = alpha ^ beta;
        let mu = chi | self.mask | other.mask;
        Tnum {
            value: dv & !mu,
            mask: mu,
        }
    }

    pub fn neg(self) -> Tnum {
        Tnum::constant(0).sub(self)
    }

    pub fn and(self, other: Tnum) -> Tnum {
        let alpha = self.value | self.mask;
        let beta = other.value | other.mask;
        let v = self.value & other.value;
        Tnum {
            value: v,
            mask: alpha & beta & !v,
        }
    }

    pub fn or(self, other: Tnum) -> Tnum {
        let v = self.value | other.value;
        let mu = self.mask | other.mask;
        Tnum {
            value: v,
            mask: mu & !v,
        }
    }

    pub fn xor(self, other: Tnum) -> Tnum {
        let v = self.value ^ other.value;
        let mu = self.mask | other.mask;
        Tnum {
            value: v & !mu,
            mask: mu,
        }
    }

    /// Multiplication by shift-and-add over the bits of `self`.
    pub fn mul(self, other: Tnum) -> Tnum {
        let mut a = self;
        let mut b = other;
        let mut acc_v = a.value.wrapping_mul(b.value);
        let mut acc_m = Tnum::constant(0);
        while a.value != 0 || a.mask != 0 {
            if a.value & 1 != 0 {
                acc_m = acc_m.add(Tnum {
                    value: 0,
                    mask: b.mask,
                });
            } else if a.mask & 1 != 0 {
                acc_m = acc_m.add(Tnum {
                    value: 0,
                    mask: b.value | b.mask,
                });
            }
            a = a.rsh(1);
            b = b.lsh(1);
        }
        acc_v &= u64::MAX;
        Tnum::constant(acc_v).add(acc_m)
    }

    /// Values in both (callers make sure they overlap; otherwise the result
    /// is some tnum inside both masks).
    pub fn intersect(self, other: Tnum) -> Tnum {
        let v = self.value | other.value;
        let mu = self.mask & other.mask;
        Tnum {
            value: v & !mu,
            mask: mu,
        }
    }

    /// Whether the two have no value in common.
    pub fn disjoint(self, other: Tnum) -> bool {
        let known_both = !self.mask & !other.mask;
        (self.value ^ other.value) & known_both != 0
    }

    /// The smallest tnum containing both.
    pub fn union(self, other: Tnum) -> Tnum {
        let mu = self.mask | other.mask | (self.value ^ other.value);
        Tnum {
            value: self.value & !mu,
            mask: mu,
        }
    }

    /// Truncate to the low `bytes` bytes (zero-extended).
    pub fn cast(self, bytes: u32) -> Tnum {
        if bytes >= 8 {
            return self;
        }
        let keep = (1u64 << (bytes * 8)) - 1;
        Tnum {
            value: self.value & keep,
            mask: self.mask & keep,
        }
    }

    /// The low 32 bits, zero-extended.
    pub fn subreg(self) -> Tnum {
        self.cast(4)
    }

    /// The high 32 bits kept, low 32 bits replaced by those of `low`.
    pub fn with_subreg(self, low: Tnum) -> Tnum {
        let hi = Tnum {
            value: self.value & 0xffff_ffff_0000_0000,
            mask: self.mask & 0xffff_ffff_0000_0000,
        };
        hi.or(low.subreg())
    }

    /// Whether `self + k` is aligned to `size` for every value.
    pub fn is_aligned(self, size: u64) -> bool {
        if size == 0 {
            return true;
        }
        (self.value | self.mask) & (size - 1) == 0
    }

    pub fn min(self) -> u64 {
        self.value
    }

    pub fn max(self) -> u64 {
        self.value | self.mask
    }

    /// Smallest value as signed: sign bit set if it may be set.
    pub fn smin(self) -> i64 {
        (self.value | (self.mask & (1 << 63))) as i64
    }

    pub fn smax(self) -> i64 {
        (self.value | (self.mask & !(1u64 << 63))) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_contains_bounds() {
        let t = Tnum::range(3, 17);
        for v in 3..=17 {
            assert!(t.contains(v));
        }
        assert_eq!(Tnum::range(5, 5), Tnum::constant(5));
        assert!(Tnum::range(0, u64::MAX).is_unknown());
    }

    #[test]
    fn includes_and_union() {
        let a = Tnum::range(0, 7);
        assert!(a.includes(Tnum::constant(5)));
        assert!(!Tnum::constant(5).includes(a));
        let u = Tnum::constant(4).union(Tnum::constant(6));
        assert!(u.contains(4) && u.contains(6));
    }
}
