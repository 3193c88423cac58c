//! The kernel's open-coded number iterator (`bpf_iter_num_new`,
//! `bpf_iter_num_next`, `bpf_iter_num_destroy`; libbpf's `bpf_for` and
//! `bpf_repeat`), with the kernel's layout and results: the program's
//! 8-byte `struct bpf_iter_num` holds `int cur` then `int end`.
//! The verifier (`bpfjet_verifier::iter`) proves the pointer is the
//! program's own iterator slot.

/// `EINVAL`, `E2BIG`.
const EINVAL: i32 = 22;
const E2BIG: i32 = 7;

/// An `int` result as the kernel's x86-64 kfunc leaves it in r0: the
/// 32-bit value, zero-extended (a C function returning `int` sets `eax`).
fn int_result(v: i32) -> u64 {
    u64::from(v as u32)
}

/// The kernel's `BPF_MAX_LOOPS`: the most elements one iterator returns.
const MAX_LOOPS: i64 = 8 * 1024 * 1024;

/// # Safety
/// `it` is an 8-byte, 4-aligned iterator slot.
unsafe fn fields<'a>(it: u64) -> &'a mut [i32; 2] {
    // SAFETY: per the contract.
    unsafe { &mut *(it as *mut [i32; 2]) }
}

/// `int bpf_iter_num_new(struct bpf_iter_num *it, int start, int end)`:
/// `[start, end)`; an empty iterator and -EINVAL for `start > end`,
/// -E2BIG for more than `BPF_MAX_LOOPS` numbers.
///
/// # Safety
/// `it` is the program's iterator slot (8 bytes, verified).
pub unsafe extern "C" fn new(it: u64, start: u64, end: u64, _: u64, _: u64) -> u64 {
    // SAFETY: per the contract.
    let s = unsafe { fields(it) };
    let (start, end) = (start as i32, end as i32);
    if start > end {
        *s = [0, 0];
        return int_result(-EINVAL);
    }
    if i64::from(end) - i64::from(start) > MAX_LOOPS {
        *s = [0, 0];
        return int_result(-E2BIG);
    }
    // `next` increments first.
    *s = [start.wrapping_sub(1), end];
    0
}

/// `int *bpf_iter_num_next(struct bpf_iter_num *it)`: the next number's
/// address (inside the iterator), or NULL once past the end (the
/// iterator is then emptied, as the kernel's).
///
/// # Safety
/// As [`new`].
pub unsafe extern "C" fn next(it: u64, _: u64, _: u64, _: u64, _: u64) -> u64 {
    // SAFETY: per the contract.
    let s = unsafe { fields(it) };
    // The kernel's `(s64)(s->cur + 1) >= s->end`, the int addition
    // wrapping (the kernel builds with -fno-strict-overflow).
    if i64::from(s[0].wrapping_add(1)) >= i64::from(s[1]) {
        *s = [0, 0];
        return 0;
    }
    s[0] += 1;
    it
}

/// `void bpf_iter_num_destroy(struct bpf_iter_num *it)`.
///
/// # Safety
/// As [`new`].
pub unsafe extern "C" fn destroy(it: u64, _: u64, _: u64, _: u64, _: u64) -> u64 {
    // SAFETY: per the contract.
    *unsafe { fields(it) } = [0, 0];
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbers(start: i32, end: i32) -> (i64, Vec<i32>) {
        let mut it = [0i32; 2];
        let a = it.as_mut_ptr() as u64;
        // SAFETY: `it` is an 8-byte iterator.
        let r = i64::from(unsafe { new(a, start as u64, end as u64, 0, 0) } as i32);
        let mut out = Vec::new();
        loop {
            // SAFETY: as above.
            let p = unsafe { next(a, 0, 0, 0, 0) };
            if p == 0 {
                break;
            }
            // SAFETY: `next` returned the iterator's own `cur`.
            out.push(unsafe { *(p as *const i32) });
        }
        // SAFETY: as above.
        unsafe { destroy(a, 0, 0, 0, 0) };
        (r, out)
    }

    #[test]
    fn yields_the_half_open_range_as_the_kernel() {
        assert_eq!(numbers(0, 4), (0, vec![0, 1, 2, 3]));
        assert_eq!(numbers(-2, 1), (0, vec![-2, -1, 0]));
        assert_eq!(numbers(5, 5), (0, vec![]));
        assert_eq!(numbers(3, 2), (-22, vec![]));
        assert_eq!(numbers(0, (MAX_LOOPS + 1) as i32), (-7, vec![]));
        assert_eq!(
            numbers(i32::MIN, i32::MIN + 2),
            (0, vec![i32::MIN, i32::MIN + 1])
        );
        assert_eq!(numbers(i32::MAX - 1, i32::MAX), (0, vec![i32::MAX - 1]));
    }
}
