//! The CPU features the SIMD paths need, detected once at first use (the
//! library is "loaded" when the first program that calls a kfunc is).

use std::sync::OnceLock;

/// Which vector paths this CPU can take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuFeatures {
    pub avx2: bool,
    pub sse42: bool,
}

impl CpuFeatures {
    /// No SIMD at all: every kfunc takes its scalar path.
    pub const SCALAR: CpuFeatures = CpuFeatures {
        avx2: false,
        sse42: false,
    };

    fn detect() -> CpuFeatures {
        #[cfg(target_arch = "x86_64")]
        {
            CpuFeatures {
                avx2: std::arch::is_x86_feature_detected!("avx2"),
                sse42: std::arch::is_x86_feature_detected!("sse4.2"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            CpuFeatures::SCALAR
        }
    }
}

/// This machine's features (detected on the first call).
#[inline]
pub fn features() -> CpuFeatures {
    static FEATURES: OnceLock<CpuFeatures> = OnceLock::new();
    *FEATURES.get_or_init(CpuFeatures::detect)
}
