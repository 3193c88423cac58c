//! Semantics of the eNetSTL module's kfuncs that have no exact counterpart
//! among bpfjet's own (same names and signatures live in `catalog`).
//! Written from the published headers' documented behaviour, not their code.

use crate::bktlist;
use crate::hash::xxh32;
use std::cell::{Cell, RefCell};

/// Seeds of eNetSTL's fused count-min (`hash_alg_post.h`): the published
/// constants, which a program's control plane needs to find a key's columns.
pub const SEEDS: [u32; 8] = [
    0xec5853, 0xec5859, 0xec5861, 0xec587f, 0xec58a7, 0xec58b3, 0xec58c7, 0xec58d1,
];

/// Bytes of eNetSTL's `struct pkt_5tuple` (packed: two IPv4 addresses, two
/// ports, the protocol).
pub const PKT_5TUPLE_BYTES: usize = 13;

/// `bpf_hash_smid_cnt_u32(tuple, mem, size, column_shift)`: rows of
/// `1 << (column_shift & 31)` u32 counters, `size >> shift >> 2` rows (at
/// most 8, else nothing happens, as in the module); row i's column is
/// `xxh32(tuple, 13, SEEDS[i]) & (columns - 1)`.
pub fn hash_simd_cnt_u32(tuple: &[u8], table: &mut [u8], column_shift: u32) {
    let shift = column_shift & 0x1f;
    let columns = 1usize << shift;
    let rows = (table.len() >> shift) >> 2;
    if rows > SEEDS.len() {
        return;
    }
    for (row, &seed) in SEEDS[..rows].iter().enumerate() {
        let column = xxh32(&tuple[..PKT_5TUPLE_BYTES], seed) as usize & (columns - 1);
        let at = (row * columns + column) * 4;
        let c = &mut table[at..at + 4];
        let v = u32::from_ne_bytes([c[0], c[1], c[2], c[3]]).wrapping_add(1);
        c.copy_from_slice(&v.to_ne_bytes());
    }
}

/// eNetSTL's 16-bit search result: a byte mask (two bits per equal u16,
/// `movemask` of a 16-bit compare) over 16 elements.
pub fn byte_mask_u16(element_mask: u64) -> u64 {
    (0..16).fold(0, |m, i| {
        if element_mask & (1 << i) != 0 {
            m | (0b11 << (2 * i))
        } else {
            m
        }
    })
}

/// Buckets of eNetSTL's list-buckets (its module's fixed array).
pub const BKT_SLOTS: u64 = 320;
/// Nodes of one thread's eNetSTL list-buckets.
pub const BKT_NODES: usize = 65536;
/// eNetSTL's list-buckets hold u64 values.
const BKT_ELEM: u64 = 8;
/// The handle eNetSTL's module hands out (`struct bpf_bkt_list { int fd; }`).
const BKT_FD: u32 = 1;
const ENOMEM: u64 = 12;

thread_local! {
    /// This thread's (CPU slot's) list-buckets, laid out by `bktlist::init`,
    /// and the handle's memory (its address is handed to programs).
    static BKT: RefCell<Option<Vec<u8>>> = const { RefCell::new(None) };
    static BKT_HANDLE: Cell<u32> = const { Cell::new(BKT_FD) };
}

fn with_bktlist<R>(f: impl FnOnce(&mut [u8]) -> R) -> R {
    BKT.with(|b| {
        let mut b = b.borrow_mut();
        let m = b.get_or_insert_with(|| {
            let mut m = vec![0u8; 16 + BKT_SLOTS as usize * 12 + BKT_NODES * 12];
            bktlist::init(&mut m, BKT_SLOTS, BKT_ELEM);
            m
        });
        f(m)
    })
}

/// `bpf_bktlist_new`: the thread's handle (`fd` 1); its queues persist
/// across runs, as the module's per-CPU ones do.
pub fn bktlist_handle() -> u64 {
    // The program may write the handle's 4 bytes (the verifier lets it):
    // it is reset here, and push/pop take the fd by value anyway.
    BKT_HANDLE.with(|h| {
        h.set(BKT_FD);
        h.as_ptr() as u64
    })
}

/// `bpf_bktlist_push_back(fd, val, size, slot)`: 0; -1 for a handle other
/// than 1; -EINVAL for a size other than 8 or a slot past 320; -ENOMEM
/// when the thread's 65536 nodes are in use.
pub fn bktlist_push_back(fd: u64, val: &[u8], slot: u64) -> u64 {
    if fd as u32 != BKT_FD {
        return crate::errno::neg(1);
    }
    if val.len() as u64 != BKT_ELEM || slot >= BKT_SLOTS {
        return crate::errno::neg(crate::errno::EINVAL);
    }
    let mut v = [0u8; 8];
    v.copy_from_slice(val);
    match with_bktlist(|m| bktlist::push(m, slot, &v)) {
        r if r == crate::errno::neg(bktlist::ENOSPC) => crate::errno::neg(ENOMEM),
        r => r,
    }
}

/// `bpf_bktlist_pop_front(fd, val, size, slot)`: 0 with the front value
/// in `val`, 1 when the slot is empty (the module's convention), errors as
/// for push.
pub fn bktlist_pop_front(fd: u64, val: &mut [u8], slot: u64) -> u64 {
    if fd as u32 != BKT_FD {
        return crate::errno::neg(1);
    }
    if val.len() as u64 != BKT_ELEM || slot >= BKT_SLOTS {
        return crate::errno::neg(crate::errno::EINVAL);
    }
    let mut v = [0u8; 8];
    match with_bktlist(|m| bktlist::pop(m, slot, &mut v)) {
        0 => {
            val.copy_from_slice(&v);
            0
        }
        r if r == crate::errno::neg(bktlist::ENOENT) => 1,
        r => r,
    }
}
