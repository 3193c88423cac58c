//! Map value fields that are nondeterministic by nature, for comparing
//! dumps of two engines field by field instead of skipping whole maps.

use bpfjet_maps::state::{EntryState, MapState};
use std::ops::Range;

/// A value field written from `bpf_ktime_get_ns()`: the kernel and bpfjet
/// read the clock at different instants, so the bytes cannot agree.
pub struct TimeField {
    program: &'static str,
    map: &'static str,
    /// The field is in the entries of the map's inner maps (map-in-map).
    inner: bool,
    /// Byte range of the field within the value.
    bytes: Range<usize>,
}

pub const TIME_FIELDS: &[TimeField] = &[
    // struct real_pos_lru { u32 pos; u32 pad; u64 atime; }: atime is stamped
    // for UDP flows (katran_lb.c, pick_real), in the per-CPU LRU ...
    TimeField {
        program: "katran_lb",
        map: "lru_mapping",
        inner: true,
        bytes: 8..16,
    },
    // ... and in the shared LRU used by CPUs without a per-CPU table.
    TimeField {
        program: "katran_lb",
        map: "fallback_cache",
        inner: false,
        bytes: 8..16,
    },
    // struct bucket { u64 tokens; u64 last_ns; }: last_ns is the creation or
    // refill time (rate_limiter.c). Tokens only depend on elapsed time for
    // refills, which the fixtures avoid by presetting last_ns = 2^64-1.
    TimeField {
        program: "rate_limiter",
        map: "buckets",
        inner: false,
        bytes: 8..16,
    },
];

/// Replace every time field's bytes by whether a time was written at all.
pub fn mask(program: &str, maps: &mut MapState) {
    for field in TIME_FIELDS.iter().filter(|f| f.program == program) {
        let Some(entries) = maps.get_mut(field.map) else {
            continue;
        };
        for entry in entries.iter_mut() {
            if field.inner {
                if let Some(inner) = &mut entry.inner {
                    inner
                        .entries
                        .iter_mut()
                        .for_each(|e| mask_entry(e, &field.bytes));
                }
            } else {
                mask_entry(entry, &field.bytes);
            }
        }
    }
}

fn mask_entry(entry: &mut EntryState, bytes: &Range<usize>) {
    let mask = |hex: &mut String| {
        // Dumps are lowercase hex without spaces: byte i is at 2i..2i+2.
        let digits = 2 * bytes.start..(2 * bytes.end).min(hex.len());
        if digits.start >= digits.end {
            return;
        }
        let written = hex[digits.clone()].bytes().any(|d| d != b'0');
        hex.replace_range(digits, if written { "<time>" } else { "<zero>" });
    };
    if let Some(v) = &mut entry.value {
        mask(v);
    }
    if let Some(vs) = &mut entry.values {
        vs.iter_mut().for_each(mask);
    }
}
