//! Searches in a bucket array: the elements of a byte range read as
//! native-endian u16/u32/u64 (a trailing partial element is ignored).
//!
//! Each operation has a scalar definition and, on x86-64 with AVX2, a
//! vector path that returns exactly the same result (the property tests
//! compare them); [`Simd`] picks the path once, from the CPU's features.

use crate::cpu::{features, CpuFeatures};

/// An element type of a bucket array.
pub trait Lane: Copy + Ord + Eq + Into<u64> + 'static {
    const BYTES: usize;
    const MAX: Self;
    const MIN: Self;
    fn read(bytes: &[u8]) -> Self;
    fn from_u64(v: u64) -> Self;
}

macro_rules! lane {
    ($t:ty) => {
        impl Lane for $t {
            const BYTES: usize = std::mem::size_of::<$t>();
            const MAX: Self = <$t>::MAX;
            const MIN: Self = <$t>::MIN;
            #[inline]
            fn read(bytes: &[u8]) -> Self {
                let mut b = [0u8; std::mem::size_of::<$t>()];
                b.copy_from_slice(&bytes[..Self::BYTES]);
                <$t>::from_ne_bytes(b)
            }
            #[inline]
            fn from_u64(v: u64) -> Self {
                v as $t
            }
        }
    };
}
lane!(u16);
lane!(u32);
lane!(u64);

fn lanes<T: Lane>(bytes: &[u8]) -> impl Iterator<Item = T> + '_ {
    bytes.chunks_exact(T::BYTES).map(T::read)
}

/// The scalar definitions.
pub mod scalar {
    use super::{lanes, Lane};

    /// Index of the first element equal to `key`; the element count if none.
    pub fn find_eq<T: Lane>(bytes: &[u8], key: T) -> u64 {
        let n = bytes.len() / T::BYTES;
        lanes::<T>(bytes).position(|v| v == key).unwrap_or(n) as u64
    }

    /// Bit i set when element i (i < 64) equals `key`.
    pub fn mask_eq<T: Lane>(bytes: &[u8], key: T) -> u64 {
        lanes::<T>(bytes)
            .take(64)
            .enumerate()
            .fold(0, |m, (i, v)| m | (u64::from(v == key) << i))
    }

    /// The smallest element; `T::MAX` for an empty bucket.
    pub fn min<T: Lane>(bytes: &[u8]) -> T {
        lanes::<T>(bytes).min().unwrap_or(T::MAX)
    }

    /// The largest element; 0 for an empty bucket.
    pub fn max<T: Lane>(bytes: &[u8]) -> T {
        lanes::<T>(bytes).max().unwrap_or(T::MIN)
    }

    /// Index of the first smallest element; 0 for an empty bucket (the
    /// element count, as for `find_eq`).
    pub fn argmin<T: Lane>(bytes: &[u8]) -> u64 {
        find_eq(bytes, min::<T>(bytes))
    }

    /// Index of the first largest element; 0 for an empty bucket.
    pub fn argmax<T: Lane>(bytes: &[u8]) -> u64 {
        find_eq(bytes, max::<T>(bytes))
    }

    /// Whether two keys of equal length are byte-for-byte equal.
    pub fn key_eq(a: &[u8], b: &[u8]) -> bool {
        a == b
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::Lane;
    use std::arch::x86_64::*;

    /// Per-byte equality mask of one 32-byte chunk against `key`
    /// broadcast; bit j set when byte j belongs to an equal element.
    ///
    /// # Safety
    /// AVX2 is available and `chunk` has at least 32 bytes.
    #[target_feature(enable = "avx2")]
    unsafe fn chunk_byte_mask<T: Lane>(chunk: &[u8], key: T) -> u32 {
        // SAFETY: per the contract; the load is unaligned.
        unsafe {
            let v = _mm256_loadu_si256(chunk.as_ptr().cast());
            let k: u64 = key.into();
            let eq = match T::BYTES {
                2 => _mm256_cmpeq_epi16(v, _mm256_set1_epi16(k as u16 as i16)),
                4 => _mm256_cmpeq_epi32(v, _mm256_set1_epi32(k as u32 as i32)),
                _ => _mm256_cmpeq_epi64(v, _mm256_set1_epi64x(k as i64)),
            };
            _mm256_movemask_epi8(eq) as u32
        }
    }

    /// Element mask (bit i per element i) of a per-byte mask.
    fn element_mask<T: Lane>(byte_mask: u32) -> u64 {
        let mut m = 0u64;
        for i in 0..32 / T::BYTES {
            if byte_mask & (1 << (i * T::BYTES)) != 0 {
                m |= 1 << i;
            }
        }
        m
    }

    /// # Safety
    /// AVX2 is available.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn find_eq<T: Lane>(bytes: &[u8], key: T) -> u64 {
        let per = 32 / T::BYTES;
        let mut chunks = bytes.chunks_exact(32);
        let mut base = 0u64;
        for chunk in &mut chunks {
            // SAFETY: AVX2 per the contract; the chunk has 32 bytes.
            let m = unsafe { chunk_byte_mask(chunk, key) };
            if m != 0 {
                return base + u64::from(m.trailing_zeros()) / T::BYTES as u64;
            }
            base += per as u64;
        }
        base + super::scalar::find_eq(chunks.remainder(), key)
    }

    /// # Safety
    /// AVX2 is available.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn mask_eq<T: Lane>(bytes: &[u8], key: T) -> u64 {
        let per = 32 / T::BYTES;
        let usable = bytes.len().min(64 * T::BYTES);
        let bytes = &bytes[..usable];
        let mut chunks = bytes.chunks_exact(32);
        let mut mask = 0u64;
        let mut base = 0;
        for chunk in &mut chunks {
            // SAFETY: AVX2 per the contract; the chunk has 32 bytes.
            let m = unsafe { chunk_byte_mask(chunk, key) };
            mask |= element_mask::<T>(m) << base;
            base += per;
        }
        let tail = super::scalar::mask_eq(chunks.remainder(), key);
        if base < 64 {
            mask |= tail << base;
        }
        mask
    }

    /// # Safety
    /// AVX2 is available; `T` is u16 or u32 (AVX2 has no unsigned 64-bit
    /// minimum).
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn min_max<T: Lane>(bytes: &[u8], want_max: bool) -> T {
        let mut chunks = bytes.chunks_exact(32);
        // SAFETY: AVX2 per the contract; loads are unaligned and 32 bytes.
        unsafe {
            let mut acc = if want_max {
                _mm256_setzero_si256()
            } else {
                _mm256_set1_epi8(-1)
            };
            for chunk in &mut chunks {
                let v = _mm256_loadu_si256(chunk.as_ptr().cast());
                acc = match (T::BYTES, want_max) {
                    (2, false) => _mm256_min_epu16(acc, v),
                    (2, true) => _mm256_max_epu16(acc, v),
                    (_, false) => _mm256_min_epu32(acc, v),
                    (_, true) => _mm256_max_epu32(acc, v),
                };
            }
            let mut lanes = [0u8; 32];
            _mm256_storeu_si256(lanes.as_mut_ptr().cast(), acc);
            let tail = chunks.remainder();
            let folded = lanes.chunks_exact(T::BYTES).map(T::read);
            let rest = tail.chunks_exact(T::BYTES).map(T::read);
            if want_max {
                folded.chain(rest).max().unwrap_or(T::MIN)
            } else {
                folded.chain(rest).min().unwrap_or(T::MAX)
            }
        }
    }

    /// # Safety
    /// AVX2 is available; `a` and `b` have the same length, a multiple of 16.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn key_eq(a: &[u8], b: &[u8]) -> bool {
        a.chunks_exact(16).zip(b.chunks_exact(16)).all(|(x, y)| {
            // SAFETY: 16-byte unaligned loads of 16-byte chunks.
            unsafe {
                let x = _mm_loadu_si128(x.as_ptr().cast());
                let y = _mm_loadu_si128(y.as_ptr().cast());
                _mm_movemask_epi8(_mm_cmpeq_epi8(x, y)) == 0xffff
            }
        })
    }
}

/// The search operations, on the path `features` allows.
#[derive(Clone, Copy, Debug)]
pub struct Simd {
    avx2: bool,
}

impl Simd {
    /// The path of this machine.
    pub fn detected() -> Simd {
        Simd::with(features())
    }

    /// The path `f` allows (`CpuFeatures::SCALAR` forces the scalar one).
    pub fn with(f: CpuFeatures) -> Simd {
        Simd {
            avx2: cfg!(target_arch = "x86_64") && f.avx2,
        }
    }

    pub fn find_eq<T: Lane>(self, bytes: &[u8], key: T) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            // SAFETY: AVX2 was detected.
            return unsafe { avx2::find_eq(bytes, key) };
        }
        scalar::find_eq(bytes, key)
    }

    pub fn mask_eq<T: Lane>(self, bytes: &[u8], key: T) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            // SAFETY: AVX2 was detected.
            return unsafe { avx2::mask_eq(bytes, key) };
        }
        scalar::mask_eq(bytes, key)
    }

    pub fn min<T: Lane>(self, bytes: &[u8]) -> T {
        #[cfg(target_arch = "x86_64")]
        if self.avx2 && T::BYTES < 8 {
            // SAFETY: AVX2 was detected; T is u16 or u32.
            return unsafe { avx2::min_max(bytes, false) };
        }
        scalar::min(bytes)
    }

    pub fn max<T: Lane>(self, bytes: &[u8]) -> T {
        #[cfg(target_arch = "x86_64")]
        if self.avx2 && T::BYTES < 8 {
            // SAFETY: AVX2 was detected; T is u16 or u32.
            return unsafe { avx2::min_max(bytes, true) };
        }
        scalar::max(bytes)
    }

    pub fn argmin<T: Lane>(self, bytes: &[u8]) -> u64 {
        self.find_eq(bytes, self.min::<T>(bytes))
    }

    pub fn argmax<T: Lane>(self, bytes: &[u8]) -> u64 {
        self.find_eq(bytes, self.max::<T>(bytes))
    }

    /// Whether two keys of the same length (16 or 32 bytes) are equal.
    pub fn key_eq(self, a: &[u8], b: &[u8]) -> bool {
        #[cfg(target_arch = "x86_64")]
        if self.avx2 && a.len() == b.len() && a.len().is_multiple_of(16) {
            // SAFETY: AVX2 was detected; lengths checked.
            return unsafe { avx2::key_eq(a, b) };
        }
        scalar::key_eq(a, b)
    }
}
