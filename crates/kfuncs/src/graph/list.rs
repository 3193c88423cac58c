//! An intrusive doubly linked list through the `bpf_list_node` fields of
//! objects, headed by a `bpf_list_head`, as the kernel's (circular, the
//! head a sentinel; a zeroed head is an empty list, initialised on first
//! use as the kernel's `INIT_LIST_HEAD` on demand).
//!
//! Layouts: head, 16 bytes: `[next][prev]`; node, 24 bytes:
//! `[next][prev][owner head]`.
//!
//! # Safety
//! Addresses are a head and nodes the verifier proved to be such fields,
//! accessed under the head's `bpf_spin_lock`.

// Every function shares the contract of the module docs' Safety section.
#![allow(clippy::missing_safety_doc)]

unsafe fn next(n: u64) -> u64 {
    unsafe { *(n as *const u64) }
}
unsafe fn prev(n: u64) -> u64 {
    unsafe { *(n as *const u64).add(1) }
}
unsafe fn set_next(n: u64, v: u64) {
    unsafe { *(n as *mut u64) = v }
}
unsafe fn set_prev(n: u64, v: u64) {
    unsafe { *(n as *mut u64).add(1) = v }
}
pub unsafe fn owner(n: u64) -> u64 {
    unsafe { *(n as *const u64).add(2) }
}
pub unsafe fn set_owner(n: u64, head: u64) {
    unsafe { *(n as *mut u64).add(2) = head }
}

unsafe fn init(head: u64) {
    unsafe {
        if next(head) == 0 {
            set_next(head, head);
            set_prev(head, head);
        }
    }
}

/// Link `node` (in no list) at the front or the back.
pub unsafe fn push(head: u64, node: u64, back: bool) {
    unsafe {
        init(head);
        let (before, after) = if back {
            (prev(head), head)
        } else {
            (head, next(head))
        };
        set_next(node, after);
        set_prev(node, before);
        set_next(before, node);
        set_prev(after, node);
        set_owner(node, head);
    }
}

/// The front or back node, 0 when empty.
pub unsafe fn peek(head: u64, back: bool) -> u64 {
    unsafe {
        init(head);
        let n = if back { prev(head) } else { next(head) };
        if n == head {
            0
        } else {
            n
        }
    }
}

/// Unlink and return the front or back node, 0 when empty.
pub unsafe fn pop(head: u64, back: bool) -> u64 {
    unsafe {
        let n = peek(head, back);
        if n != 0 {
            set_next(prev(n), next(n));
            set_prev(next(n), prev(n));
            set_next(n, 0);
            set_prev(n, 0);
            set_owner(n, 0);
        }
        n
    }
}

/// Every node, unlinked (to free a head's contents).
pub unsafe fn drain(head: u64) -> Vec<u64> {
    let mut out = Vec::new();
    loop {
        let n = unsafe { pop(head, false) };
        if n == 0 {
            return out;
        }
        out.push(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_and_lifo_order() {
        let head = Box::new([0u64; 2]);
        let h = head.as_ptr() as u64;
        let nodes: Vec<Box<[u64; 3]>> = (0..4).map(|_| Box::new([0u64; 3])).collect();
        let addr = |i: usize| nodes[i].as_ptr() as u64;
        unsafe {
            assert_eq!(pop(h, false), 0);
            push(h, addr(0), true);
            push(h, addr(1), true);
            push(h, addr(2), false);
            assert_eq!(owner(addr(1)), h);
            assert_eq!(peek(h, false), addr(2));
            assert_eq!(peek(h, true), addr(1));
            assert_eq!(pop(h, false), addr(2));
            assert_eq!(pop(h, true), addr(1));
            assert_eq!(owner(addr(1)), 0);
            push(h, addr(3), true);
            assert_eq!(drain(h), vec![addr(0), addr(3)]);
            assert_eq!(pop(h, true), 0);
        }
    }
}
