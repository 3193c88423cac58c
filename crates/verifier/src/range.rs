//! The scalar domain: a [`Tnum`] plus signed and unsigned ranges for the whole
//! 64-bit value and for its low 32-bit subregister. The five views constrain
//! each other; [`Scalar::sync`] propagates what one knows to the others.
//!
//! The same type is the variable part of a pointer's offset.

use crate::tnum::Tnum;
use std::fmt;

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Scalar {
    pub var_off: Tnum,
    pub smin: i64,
    pub smax: i64,
    pub umin: u64,
    pub umax: u64,
    pub s32_min: i32,
    pub s32_max: i32,
    pub u32_min: u32,
    pub u32_max: u32,
}

impl fmt::Debug for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(c) = self.as_const() {
            return write!(f, "{}", c as i64);
        }
        let mut parts = Vec::new();
        if self.smin != i64::MIN {
            parts.push(format!("smin={}", self.smin));
        }
        if self.smax != i64::MAX {
            parts.push(format!("smax={}", self.smax));
        }
        if self.umin != 0 {
            parts.push(format!("umin={}", self.umin));
        }
        if self.umax != u64::MAX {
            parts.push(format!("umax={}", self.umax));
        }
        if self.s32_min != i32::MIN {
            parts.push(format!("smin32={}", self.s32_min));
        }
        if self.s32_max != i32::MAX {
            parts.push(format!("smax32={}", self.s32_max));
        }
        if self.u32_min != 0 {
            parts.push(format!("umin32={}", self.u32_min));
        }
        if self.u32_max != u32::MAX {
            parts.push(format!("umax32={}", self.u32_max));
        }
        if !self.var_off.is_unknown() {
            parts.push(format!("var_off={:?}", self.var_off));
        }
        if parts.is_empty() {
            f.write_str("unknown")
        } else {
            f.write_str(&parts.join(","))
        }
    }
}

impl Scalar {
    pub const UNKNOWN: Scalar = Scalar {
        var_off: Tnum::UNKNOWN,
        smin: i64::MIN,
        smax: i64::MAX,
        umin: 0,
        umax: u64::MAX,
        s32_min: i32::MIN,
        s32_max: i32::MAX,
        u32_min: 0,
        u32_max: u32::MAX,
    };

    pub fn constant(v: u64) -> Scalar {
        Scalar {
            var_off: Tnum::constant(v),
            smin: v as i64,
            smax: v as i64,
            umin: v,
            umax: v,
            s32_min: v as u32 as i32,
            s32_max: v as u32 as i32,
            u32_min: v as u32,
            u32_max: v as u32,
        }
    }

    /// Unknown value in `[0, max]`.
    pub fn unsigned_upto(max: u64) -> Scalar {
        Scalar::from_urange(0, max)
    }

    pub fn from_urange(min: u64, max: u64) -> Scalar {
        let mut s = Scalar::UNKNOWN;
        s.umin = min;
        s.umax = max;
        s.sync();
        s
    }

    pub fn from_srange(min: i64, max: i64) -> Scalar {
        let mut s = Scalar::UNKNOWN;
        s.smin = min;
        s.smax = max;
        s.sync();
        s
    }

    pub fn from_tnum(t: Tnum) -> Scalar {
        let mut s = Scalar::UNKNOWN;
        s.var_off = t;
        s.sync();
        s
    }

    pub fn as_const(&self) -> Option<u64> {
        self.var_off.is_const().then_some(self.var_off.value)
    }

    pub fn is_const(&self) -> bool {
        self.var_off.is_const()
    }

    pub fn is_zero(&self) -> bool {
        self.as_const() == Some(0)
    }

    /// The low 32 bits are a known constant.
    pub fn as_const32(&self) -> Option<u32> {
        let t = self.var_off.subreg();
        t.is_const().then_some(t.value as u32)
    }

    /// Whether `v` may be this scalar's value.
    pub fn contains(&self, v: u64) -> bool {
        self.var_off.contains(v)
            && self.umin <= v
            && v <= self.umax
            && self.smin <= v as i64
            && v as i64 <= self.smax
            && self.u32_min <= v as u32
            && v as u32 <= self.u32_max
            && self.s32_min <= v as u32 as i32
            && v as u32 as i32 <= self.s32_max
    }

    /// No value satisfies all views (a contradiction: dead branch).
    pub fn is_empty(&self) -> bool {
        self.smin > self.smax
            || self.umin > self.umax
            || self.s32_min > self.s32_max
            || self.u32_min > self.u32_max
            || !self.var_off.contains(self.var_off.value)
    }

    /// Every value of `other` is a value of `self`.
    pub fn includes(&self, other: &Scalar) -> bool {
        self.smin <= other.smin
            && other.smax <= self.smax
            && self.umin <= other.umin
            && other.umax <= self.umax
            && self.s32_min <= other.s32_min
            && other.s32_max <= self.s32_max
            && self.u32_min <= other.u32_min
            && other.u32_max <= self.u32_max
            && self.var_off.includes(other.var_off)
    }

    /// Forget the 32-bit views (to be recomputed by `sync`).
    pub fn reset32(&mut self) {
        self.s32_min = i32::MIN;
        self.s32_max = i32::MAX;
        self.u32_min = 0;
        self.u32_max = u32::MAX;
    }

    /// Forget the 64-bit range views.
    pub fn reset64(&mut self) {
        self.smin = i64::MIN;
        self.smax = i64::MAX;
        self.umin = 0;
        self.umax = u64::MAX;
    }

    /// Zero-extend the 32-bit subregister into the whole value (the result of
    /// every 32-bit ALU op).
    pub fn zext32(&mut self) {
        self.var_off = self.var_off.subreg();
        // The 32-bit views stay; the 64-bit value is now in [u32_min, u32_max].
        self.umin = self.u32_min as u64;
        self.umax = self.u32_max as u64;
        self.smin = self.u32_min as i64;
        self.smax = self.u32_max as i64;
        self.sync();
    }

    /// Make all views agree (repeated narrowing, as far as it goes).
    pub fn sync(&mut self) {
        for _ in 0..3 {
            let before = *self;
            self.bounds_from_tnum();
            self.deduce32();
            self.deduce64();
            self.mixed();
            self.tnum_from_bounds();
            if *self == before {
                break;
            }
        }
    }

    fn bounds_from_tnum(&mut self) {
        let t32 = self.var_off.subreg();
        let v32 = t32.value as u32;
        let m32 = t32.mask as u32;
        self.s32_min = self.s32_min.max((v32 | (m32 & 0x8000_0000)) as i32);
        self.s32_max = self.s32_max.min((v32 | (m32 & 0x7fff_ffff)) as i32);
        self.u32_min = self.u32_min.max(v32);
        self.u32_max = self.u32_max.min(v32 | m32);
        self.smin = self.smin.max(self.var_off.smin());
        self.smax = self.smax.min(self.var_off.smax());
        self.umin = self.umin.max(self.var_off.min());
        self.umax = self.umax.min(self.var_off.max());
    }

    fn deduce32(&mut self) {
        // A signed range that does not cross the sign boundary is also an
        // unsigned one, and vice versa.
        if (self.s32_min >= 0) == (self.s32_max >= 0) && self.s32_min <= self.s32_max {
            self.u32_min = self.u32_min.max(self.s32_min as u32);
            self.u32_max = self.u32_max.min(self.s32_max as u32);
        }
        if (self.u32_min as i32) <= (self.u32_max as i32) && self.u32_min <= self.u32_max {
            self.s32_min = self.s32_min.max(self.u32_min as i32);
            self.s32_max = self.s32_max.min(self.u32_max as i32);
        }
    }

    fn deduce64(&mut self) {
        if (self.smin >= 0) == (self.smax >= 0) && self.smin <= self.smax {
            self.umin = self.umin.max(self.smin as u64);
            self.umax = self.umax.min(self.smax as u64);
        }
        if (self.umin as i64) <= (self.umax as i64) && self.umin <= self.umax {
            self.smin = self.smin.max(self.umin as i64);
            self.smax = self.smax.min(self.umax as i64);
        }
    }

    /// Between the 64-bit and the 32-bit views.
    fn mixed(&mut self) {
        const HI: u64 = 0xffff_ffff_0000_0000;
        if self.umin > self.umax {
            return;
        }
        // Same upper half: the low half ranges between the low halves.
        if self.umin & HI == self.umax & HI {
            self.u32_min = self.u32_min.max(self.umin as u32);
            self.u32_max = self.u32_max.min(self.umax as u32);
            if (self.umin as u32 as i32) <= (self.umax as u32 as i32) {
                self.s32_min = self.s32_min.max(self.umin as u32 as i32);
                self.s32_max = self.s32_max.min(self.umax as u32 as i32);
            }
            if self.u32_min <= self.u32_max {
                let hi = self.umin & HI;
                self.umin = self.umin.max(hi | self.u32_min as u64);
                self.umax = self.umax.min(hi | self.u32_max as u64);
            }
        }
        if self.smin <= self.smax && (self.smin as u64) & HI == (self.smax as u64) & HI {
            self.u32_min = self.u32_min.max(self.smin as u32);
            self.u32_max = self.u32_max.min(self.smax as u32);
            if (self.smin as u32 as i32) <= (self.smax as u32 as i32) {
                self.s32_min = self.s32_min.max(self.smin as u32 as i32);
                self.s32_max = self.s32_max.min(self.smax as u32 as i32);
            }
            if self.u32_min <= self.u32_max {
                let hi = (self.smin as u64) & HI;
                self.smin = self.smin.max((hi | self.u32_min as u64) as i64);
                self.smax = self.smax.min((hi | self.u32_max as u64) as i64);
            }
        }
        // A 64-bit value below 2^32 equals its subregister.
        if self.umax <= u32::MAX as u64 && self.u32_min <= self.u32_max {
            self.umin = self.umin.max(self.u32_min as u64);
            self.umax = self.umax.min(self.u32_max as u64);
        }
        // The kernel's case after a sign-extending load: a value inside the
        // s32 range is the sign extension of its low half, so when that half
        // is non-negative the 64-bit range is the 32-bit one.
        if self.s32_min >= 0
            && self.s32_min <= self.s32_max
            && self.smin >= i32::MIN as i64
            && self.smax <= i32::MAX as i64
        {
            self.smin = self.smin.max(self.s32_min as i64);
            self.smax = self.smax.min(self.s32_max as i64);
            self.umin = self.umin.max(self.s32_min as u64);
            self.umax = self.umax.min(self.s32_max as u64);
        }
    }

    fn tnum_from_bounds(&mut self) {
        if self.umin <= self.umax {
            self.var_off = self.var_off.intersect(Tnum::range(self.umin, self.umax));
        }
        if self.u32_min <= self.u32_max {
            let low = self
                .var_off
                .subreg()
                .intersect(Tnum::range(self.u32_min as u64, self.u32_max as u64));
            self.var_off = self.var_off.with_subreg(low);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn const_views() {
        let s = Scalar::constant(u64::MAX);
        assert_eq!(s.smin, -1);
        assert_eq!(s.u32_max, u32::MAX);
        assert!(s.contains(u64::MAX));
        assert!(!s.contains(0));
    }

    #[test]
    fn sync_from_urange() {
        let s = Scalar::from_urange(0, 255);
        assert_eq!(s.var_off, Tnum::range(0, 255));
        assert_eq!(s.smax, 255);
        assert_eq!(s.u32_max, 255);
        assert_eq!(s.s32_min, 0);
    }

    #[test]
    fn sync_from_srange_negative() {
        let s = Scalar::from_srange(-4, -1);
        assert_eq!(s.umin, (-4i64) as u64);
        assert_eq!(s.umax, u64::MAX);
        assert!(s.contains((-3i64) as u64));
    }
}
