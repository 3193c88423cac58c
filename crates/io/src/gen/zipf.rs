//! Flow popularity: which flow the next packet belongs to.
//!
//! Zipf(s) over `n` flows gives the flow of rank `k` (1-based) probability
//! `k^-s / H(n, s)`. It is sampled by inversion of the exact CDF, which is
//! correct for every `s > 0` (including `s <= 1`, where the classic
//! rejection samplers need care). A plain binary search would cost
//! `log2(n)` cache misses per packet; a guide table (Chen & Asau's cutpoint
//! method) maps the random number to the CDF bucket it falls in first, so a
//! sample takes O(1) probes on average.

use super::rng::Rng;

/// Chooses flow indices `0..n`.
#[derive(Debug, Clone)]
pub enum FlowSampler {
    Uniform { flows: u64 },
    Zipf(ZipfTable),
}

impl FlowSampler {
    #[inline]
    pub fn sample(&self, rng: &mut Rng) -> usize {
        match self {
            FlowSampler::Uniform { flows } => rng.below(*flows) as usize,
            FlowSampler::Zipf(table) => table.sample(rng.next_f64()),
        }
    }
}

/// Inverse-CDF table for Zipf(s) over `n` ranks; flow index `i` has rank
/// `i + 1`, so flow 0 is the most popular.
#[derive(Debug, Clone)]
pub struct ZipfTable {
    /// `cdf[i]` = P(flow <= i); the last entry is exactly 1.
    cdf: Vec<f64>,
    /// `guide[j]` = the first `i` with `cdf[i] > j / guide.len()`.
    guide: Vec<u32>,
}

impl ZipfTable {
    /// `flows >= 1`, `s` finite and positive (checked by the spec parser;
    /// anything else is clamped to a usable table rather than panicking).
    pub fn new(flows: usize, s: f64) -> Self {
        let flows = flows.max(1);
        let s = if s.is_finite() && s > 0.0 { s } else { 1.0 };
        // Sum from the smallest weight up so the tiny tail terms are not
        // lost against the large head when n is in the millions.
        let total: f64 = (1..=flows).rev().map(|k| (k as f64).powf(-s)).sum();
        let mut cdf = Vec::with_capacity(flows);
        let mut acc = 0.0;
        for k in 1..=flows {
            acc += (k as f64).powf(-s) / total;
            cdf.push(acc);
        }
        // Rounding may leave the last entry a hair below 1, and a uniform
        // variate above it would run off the end.
        if let Some(last) = cdf.last_mut() {
            *last = 1.0;
        }

        let buckets = flows;
        let mut guide = Vec::with_capacity(buckets);
        let mut i = 0usize;
        for j in 0..buckets {
            let threshold = j as f64 / buckets as f64;
            while i + 1 < flows && cdf[i] <= threshold {
                i += 1;
            }
            guide.push(i as u32);
        }
        ZipfTable { cdf, guide }
    }

    pub fn len(&self) -> usize {
        self.cdf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cdf.is_empty()
    }

    /// Probability of flow index `i`.
    pub fn probability(&self, i: usize) -> f64 {
        match i {
            0 => self.cdf[0],
            _ if i < self.cdf.len() => self.cdf[i] - self.cdf[i - 1],
            _ => 0.0,
        }
    }

    /// The flow index for a uniform variate `u` in `[0, 1)`: the smallest
    /// `i` with `cdf[i] > u`.
    #[inline]
    pub fn sample(&self, u: f64) -> usize {
        let bucket = ((u * self.guide.len() as f64) as usize).min(self.guide.len() - 1);
        let mut i = self.guide[bucket] as usize;
        let last = self.cdf.len() - 1;
        while i < last && self.cdf[i] <= u {
            i += 1;
        }
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_is_monotone_and_ends_at_one() {
        let t = ZipfTable::new(1000, 1.1);
        assert_eq!(t.len(), 1000);
        assert!(t.cdf.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(*t.cdf.last().unwrap(), 1.0);
        let sum: f64 = (0..1000).map(|i| t.probability(i)).sum();
        assert!((sum - 1.0).abs() < 1e-12);
        // Ratio of the first two ranks is 2^s.
        let ratio = t.probability(0) / t.probability(1);
        assert!((ratio - 2f64.powf(1.1)).abs() < 1e-9);
    }

    #[test]
    fn sample_matches_binary_search_everywhere() {
        for (flows, s) in [(1, 1.0), (2, 0.5), (10, 1.0), (1000, 1.1), (5000, 2.5)] {
            let t = ZipfTable::new(flows, s);
            let mut rng = Rng::new(3);
            for _ in 0..20_000 {
                let u = rng.next_f64();
                let expected = t.cdf.partition_point(|&c| c <= u).min(flows - 1);
                assert_eq!(t.sample(u), expected, "flows={flows} s={s} u={u}");
            }
            assert_eq!(t.sample(0.0), 0);
            assert!(t.sample(1.0 - f64::EPSILON) < flows);
        }
    }

    #[test]
    fn bad_parameters_do_not_panic() {
        assert_eq!(ZipfTable::new(0, 1.0).len(), 1);
        let t = ZipfTable::new(10, f64::NAN);
        assert!(t.sample(0.5) < 10);
    }
}
