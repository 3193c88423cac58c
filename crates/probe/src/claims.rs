//! Which code bytes bpfjet has patched or copied.
//!
//! An entry patch writes 5 bytes and copies the whole instructions they
//! cover into its trampoline; a USDT probe writes a jump or an `int3` in
//! the middle of a function. Two such patches must never overlap: a jump
//! written over another's bytes corrupts both, and an `int3` copied into a
//! trampoline traps at an address no probe knows. Every patch claims its
//! range here first; an overlapping claim is refused with the other
//! patch's address.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// start → end (exclusive) of every claimed range.
static CLAIMED: Mutex<BTreeMap<u64, u64>> = Mutex::new(BTreeMap::new());

/// Claims `[start, start + len)`, or says which claim it overlaps.
pub(crate) fn claim(start: u64, len: u64) -> Result<(), String> {
    let end = start + len;
    let mut c = CLAIMED.lock().unwrap();
    // The nearest claim starting before `end` is the only one that can
    // overlap (claims never overlap each other).
    if let Some((&s, &e)) = c.range(..end).next_back() {
        if e > start {
            return Err(format!(
                "the bytes {start:#x}..{end:#x} overlap another probe's patch at {s:#x}..{e:#x}"
            ));
        }
    }
    c.insert(start, end);
    Ok(())
}

/// Releases the claim starting at `start`.
pub(crate) fn release(start: u64) {
    CLAIMED.lock().unwrap().remove(&start);
}

#[cfg(test)]
mod tests {
    #[test]
    fn overlaps_are_refused() {
        let base = 0xdead_0000;
        super::claim(base, 5).unwrap();
        assert!(super::claim(base + 4, 1).is_err());
        assert!(super::claim(base - 2, 3).is_err());
        super::claim(base + 5, 1).unwrap();
        super::claim(base - 2, 2).unwrap();
        super::release(base);
        super::claim(base + 4, 1).unwrap();
    }
}
