//! Medians and spreads over rounds.

/// Median of `values` (the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

pub fn min(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}

pub fn max(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

/// `kernel / engine`, or None when either is not a positive time (a net
/// cost can vanish in the noise for a trivial program).
pub fn ratio(kernel: f64, engine: f64) -> Option<f64> {
    (kernel > 0.0 && engine > 0.0 && kernel.is_finite() && engine.is_finite())
        .then(|| kernel / engine)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn ratios() {
        assert_eq!(ratio(10.0, 5.0), Some(2.0));
        assert_eq!(ratio(10.0, 0.0), None);
        assert_eq!(ratio(10.0, -1.0), None);
    }
}
