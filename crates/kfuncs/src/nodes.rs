//! Node memory: fixed-size nodes allocated from a pool, linked to each
//! other by numbered links, released with lazy safety — what skip lists,
//! linked lists and trees need and plain eBPF cannot express (it has no
//! allocator and no pointers a program may store).
//!
//! The pool lives in memory the program passes with its size — a map
//! value (a per-CPU array gives one pool per CPU slot, used by one worker
//! at a time, so no lock) — laid out as:
//!
//! ```text
//! header  u32 magic, data_size, nlinks, capacity,
//!             fresh (slots ever handed out), free (slot + 1, 0 = none), live, 0
//! slots   capacity x { u32 gen, u32 next_free (slot + 1),
//!                      u64 links[nlinks], data_size bytes padded to 8 }
//! ```
//!
//! A node is named by a handle, a u64 `gen << 32 | (slot + 1)`; 0 is null.
//! A slot's generation is odd while the node is allocated and moves on at
//! every allocation and release, so a handle to a released node — kept in a
//! map, in a link of another node, on the stack — no longer matches: links
//! to it read as null, calls on it return -EINVAL. Nothing is unlinked
//! eagerly (lazy safety: a release is O(1)).
//!
//! Why handles and not pointers: handles are scalars to the verifier, which
//! proves nothing about them; the program can write any bytes into the
//! pool and can compute any handle, so every slot index and generation
//! read from a handle or from the pool is checked before use. A forged or
//! stale handle names at most another live node of the same pool, or none —
//! never memory outside the pool. Node data is reached through
//! `bpfjet_node_data`, which returns a pointer the verifier tracks as an
//! acquired reference of the size the program asks for (a constant,
//! checked against the pool's node size at run time): it must be given
//! back with `bpfjet_node_put` on every path (a leak is rejected at load
//! time) and is unusable after that (use after release is rejected too).

use crate::errno::{neg, EINVAL};

/// "NODE": a header laid out by [`pool_init`].
pub const MAGIC: u32 = 0x4e4f_4445;
/// Bytes of the pool header.
pub const HEADER: usize = 32;
/// Largest node data, in bytes.
pub const MAX_DATA: u32 = 4096;
/// Most links per node.
pub const MAX_LINKS: u32 = 64;

fn rd(m: &[u8], at: usize) -> Option<u32> {
    let b = m.get(at..at.checked_add(4)?)?;
    Some(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

fn rd64(m: &[u8], at: usize) -> Option<u64> {
    let b = m.get(at..at.checked_add(8)?)?;
    let mut v = [0u8; 8];
    v.copy_from_slice(b);
    Some(u64::from_ne_bytes(v))
}

fn wr(m: &mut [u8], at: usize, v: u32) {
    m[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

fn wr64(m: &mut [u8], at: usize, v: u64) {
    m[at..at + 8].copy_from_slice(&v.to_ne_bytes());
}

/// Bytes of one slot.
pub fn stride(data_size: u32, nlinks: u32) -> usize {
    8 + 8 * nlinks as usize + (data_size as usize).div_ceil(8) * 8
}

/// Offset of a slot's data from the slot.
pub fn data_offset(nlinks: u32) -> usize {
    8 + 8 * nlinks as usize
}

/// The handle of slot `slot` at generation `gen`.
pub fn handle(slot: u32, gen: u32) -> u64 {
    (u64::from(gen) << 32) | u64::from(slot + 1)
}

/// The validated shape of a pool: where things are.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub data_size: u32,
    pub nlinks: u32,
    pub capacity: u32,
    pub stride: usize,
}

impl Shape {
    /// The header of `m`, if it describes a pool that fits in `m`.
    pub fn of(m: &[u8]) -> Option<Shape> {
        if rd(m, 0)? != MAGIC {
            return None;
        }
        let (data_size, nlinks, capacity) = (rd(m, 4)?, rd(m, 8)?, rd(m, 12)?);
        if data_size == 0 || data_size > MAX_DATA || nlinks > MAX_LINKS {
            return None;
        }
        let stride = stride(data_size, nlinks);
        let end = HEADER.checked_add((capacity as usize).checked_mul(stride)?)?;
        (end <= m.len()).then_some(Shape {
            data_size,
            nlinks,
            capacity,
            stride,
        })
    }

    fn slot(&self, slot: u32) -> usize {
        HEADER + slot as usize * self.stride
    }

    /// Offset of the slot a live handle names: its index is below `fresh`
    /// (handed out at least once) and its generation is the slot's, odd.
    pub fn live(&self, m: &[u8], h: u64) -> Option<usize> {
        let slot = (h as u32).checked_sub(1)?;
        let fresh = rd(m, 16)?.min(self.capacity);
        if slot >= fresh {
            return None;
        }
        let at = self.slot(slot);
        let gen = (h >> 32) as u32;
        (gen & 1 == 1 && rd(m, at)? == gen).then_some(at)
    }
}

/// `bpfjet_node_pool_init`: lay out a pool of nodes of `data_size` bytes
/// with `nlinks` links each in `m`; returns the capacity (nodes). A pool
/// already laid out with this geometry is left as it is (programs call this
/// on every packet; a control plane empties a pool by zeroing its header).
/// -EINVAL for a size of 0 or above 4096, more than 64 links, or memory
/// that holds no node.
pub fn pool_init(m: &mut [u8], data_size: u64, nlinks: u64) -> u64 {
    if data_size == 0 || data_size > u64::from(MAX_DATA) || nlinks > u64::from(MAX_LINKS) {
        return neg(EINVAL);
    }
    let (data_size, nlinks) = (data_size as u32, nlinks as u32);
    if let Some(s) = Shape::of(m) {
        if s.data_size == data_size && s.nlinks == nlinks {
            return u64::from(s.capacity);
        }
    }
    let stride = stride(data_size, nlinks);
    let capacity = (m.len().saturating_sub(HEADER) / stride).min(u32::MAX as usize - 1);
    if capacity == 0 {
        return neg(EINVAL);
    }
    for (i, v) in [MAGIC, data_size, nlinks, capacity as u32, 0, 0, 0, 0]
        .into_iter()
        .enumerate()
    {
        wr(m, 4 * i, v);
    }
    capacity as u64
}

/// `bpfjet_node_alloc`: a new node, its links null and its data zeroed;
/// 0 (null) when the pool is full or `m` is not a pool.
pub fn alloc(m: &mut [u8]) -> u64 {
    let Some(s) = Shape::of(m) else {
        return 0;
    };
    let (Some(fresh), Some(free)) = (rd(m, 16), rd(m, 20)) else {
        return 0;
    };
    let slot = if free != 0 {
        // A released slot; its next_free continues the list.
        let slot = free - 1;
        if slot >= fresh.min(s.capacity) {
            return 0;
        }
        let next = rd(m, s.slot(slot) + 4).unwrap_or(0);
        wr(m, 20, next);
        slot
    } else if fresh < s.capacity {
        wr(m, 16, fresh + 1);
        fresh
    } else {
        return 0;
    };
    let at = s.slot(slot);
    // Odd and different from any generation the slot had: handles from
    // its earlier lives (or from before a re-layout) stay stale.
    let gen = (rd(m, at).unwrap_or(0).wrapping_add(1)) | 1;
    wr(m, at, gen);
    wr(m, at + 4, 0);
    m[at + 8..at + s.stride].fill(0);
    let live = rd(m, 24).unwrap_or(0);
    wr(m, 24, live.wrapping_add(1));
    handle(slot, gen)
}

/// `bpfjet_node_free`: release the node; links to it read as null from
/// now on. 0, or -EINVAL for a handle that is not live.
pub fn free(m: &mut [u8], h: u64) -> u64 {
    let Some(s) = Shape::of(m) else {
        return neg(EINVAL);
    };
    let Some(at) = s.live(m, h) else {
        return neg(EINVAL);
    };
    let gen = rd(m, at).unwrap_or(0);
    wr(m, at, gen.wrapping_add(1));
    let free = rd(m, 20).unwrap_or(0);
    wr(m, at + 4, free);
    wr(m, 20, h as u32);
    let live = rd(m, 24).unwrap_or(0);
    wr(m, 24, live.saturating_sub(1));
    0
}

/// `bpfjet_node_connect`: link `link` of `from` now leads to `to` (what it
/// led to before is forgotten). 0, or -EINVAL for a node that is not live
/// or a link number out of range.
pub fn connect(m: &mut [u8], from: u64, link: u64, to: u64) -> u64 {
    let Some(s) = Shape::of(m) else {
        return neg(EINVAL);
    };
    let (Some(at), Some(_)) = (s.live(m, from), s.live(m, to)) else {
        return neg(EINVAL);
    };
    if link >= u64::from(s.nlinks) {
        return neg(EINVAL);
    }
    wr64(m, at + 8 + 8 * link as usize, to);
    0
}

/// `bpfjet_node_disconnect`: link `link` of `from` leads nowhere. 0, or
/// -EINVAL as for connect.
pub fn disconnect(m: &mut [u8], from: u64, link: u64) -> u64 {
    let Some(s) = Shape::of(m) else {
        return neg(EINVAL);
    };
    let Some(at) = s.live(m, from) else {
        return neg(EINVAL);
    };
    if link >= u64::from(s.nlinks) {
        return neg(EINVAL);
    }
    wr64(m, at + 8 + 8 * link as usize, 0);
    0
}

/// `bpfjet_node_next`: the node link `link` of `node` leads to; 0 (null)
/// when it leads nowhere, to a node released since, or when `node` is not
/// live or the link number out of range.
pub fn next(m: &[u8], node: u64, link: u64) -> u64 {
    let Some(s) = Shape::of(m) else {
        return 0;
    };
    let Some(at) = s.live(m, node) else {
        return 0;
    };
    if link >= u64::from(s.nlinks) {
        return 0;
    }
    let to = rd64(m, at + 8 + 8 * link as usize).unwrap_or(0);
    if s.live(m, to).is_some() {
        to
    } else {
        0
    }
}

/// `bpfjet_node_data`: offset in `m` of the first `size` bytes of the
/// node's data; `None` when the node is not live or its data is smaller.
pub fn data(m: &[u8], node: u64, size: u64) -> Option<usize> {
    let s = Shape::of(m)?;
    if size == 0 || size > u64::from(s.data_size) {
        return None;
    }
    s.live(m, node).map(|at| at + data_offset(s.nlinks))
}

/// Live nodes of the pool (the header's count), for control planes.
pub fn live(m: &[u8]) -> Option<u32> {
    Shape::of(m).and_then(|_| rd(m, 24))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(bytes: usize, data: u64, links: u64) -> Vec<u8> {
        let mut m = vec![0u8; bytes];
        assert!(pool_init(&mut m, data, links) < 1 << 32);
        m
    }

    #[test]
    fn exhausted_pool_returns_null_and_release_makes_room() {
        let mut m = pool(HEADER + 3 * stride(16, 2), 16, 2);
        let hs: Vec<u64> = (0..3).map(|_| alloc(&mut m)).collect();
        assert!(hs.iter().all(|&h| h != 0));
        assert_eq!(alloc(&mut m), 0);
        assert_eq!(free(&mut m, hs[1]), 0);
        let again = alloc(&mut m);
        assert_ne!(again, 0);
        assert_ne!(again, hs[1], "a reused slot gets a new generation");
        assert_eq!(again as u32, hs[1] as u32);
        assert_eq!(live(&m), Some(3));
    }

    #[test]
    fn links_to_a_released_node_read_as_null() {
        let mut m = pool(4096, 8, 1);
        let (a, b) = (alloc(&mut m), alloc(&mut m));
        assert_eq!(connect(&mut m, a, 0, b), 0);
        assert_eq!(next(&m, a, 0), b);
        assert_eq!(free(&mut m, b), 0);
        assert_eq!(next(&m, a, 0), 0);
        // The slot reused: the old link still reads as null.
        let c = alloc(&mut m);
        assert_eq!(c as u32, b as u32);
        assert_eq!(next(&m, a, 0), 0);
        assert_eq!(free(&mut m, b), neg(EINVAL), "double release");
        assert_eq!(connect(&mut m, a, 0, b), neg(EINVAL));
        assert_eq!(connect(&mut m, a, 1, c), neg(EINVAL), "link out of range");
        assert_eq!(data(&m, b, 8), None);
        assert_eq!(data(&m, c, 9), None, "larger than the node");
        assert!(data(&m, c, 8).is_some());
    }

    #[test]
    fn corrupted_pools_and_forged_handles_stay_inside() {
        let mut m = pool(1024, 8, 2);
        let a = alloc(&mut m);
        // Forged handles: never-allocated slots, wrong generations.
        for h in [0u64, 1 << 32 | 2, handle(0, 2), handle(100, 1), u64::MAX] {
            assert_eq!(next(&m, h, 0), 0);
            assert_eq!(free(&mut m, h), neg(EINVAL));
        }
        // A header claiming more capacity than the memory holds.
        wr(&mut m, 12, 1 << 20);
        assert_eq!(alloc(&mut m), 0);
        assert_eq!(next(&m, a, 0), 0);
        // Re-laid out: the old handle does not survive.
        assert!(pool_init(&mut m, 8, 2) < 1 << 32);
        assert_eq!(data(&m, a, 8), None);
    }

    #[test]
    fn init_keeps_a_pool_of_the_same_geometry() {
        let mut m = pool(1024, 8, 2);
        let a = alloc(&mut m);
        assert_eq!(
            pool_init(&mut m, 8, 2),
            ((1024 - HEADER) / stride(8, 2)) as u64
        );
        assert!(data(&m, a, 8).is_some());
        assert_eq!(pool_init(&mut m, 0, 2), neg(EINVAL));
        assert_eq!(pool_init(&mut [0u8; 40], 64, 2), neg(EINVAL));
    }
}
