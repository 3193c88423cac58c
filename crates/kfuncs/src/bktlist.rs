//! List-buckets: an array of FIFO queues of fixed-size elements addressed
//! by bucket index (timing wheels, calendar queues), with push to the back,
//! pop and peek at the front, all O(1).
//!
//! The whole structure lives in memory the program passes with its size —
//! a map value (a per-CPU array gives one per CPU slot: one worker touches
//! it at a time, so no lock) — and links nodes by index, not by address:
//!
//! ```text
//! header   u32 nbuckets, elem_size, capacity, free (node + 1, 0 = none)
//! buckets  nbuckets x { u32 head, tail (node + 1, 0 = empty), len }
//! nodes    capacity x { u32 next (node + 1), elem_size bytes, padded to 4 }
//! ```
//!
//! Why this shape: the verifier's job stays what it already proves — a
//! pointer to writable memory of the size that follows — and nothing is
//! tracked across calls (no references to acquire or release, no new map
//! type). The program can write any bytes into that memory, so every index
//! read from it is checked before use: a corrupted structure makes a call
//! return -EINVAL, never access memory outside the region. A control plane
//! reads the queues from the map like any other value.

use crate::errno::{neg, EINVAL};

/// -ENOSPC: the node pool is full.
pub const ENOSPC: u64 = 28;
/// -ENOENT: the bucket is empty.
pub const ENOENT: u64 = 2;

/// Largest element, in bytes.
pub const MAX_ELEM: u32 = 256;

const HEADER: usize = 16;
const BUCKET: usize = 12;

fn rd(m: &[u8], at: usize) -> Option<u32> {
    let b = m.get(at..at + 4)?;
    Some(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

fn wr(m: &mut [u8], at: usize, v: u32) {
    m[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

/// Bytes of one node for `elem_size`-byte elements.
fn stride(elem_size: u32) -> usize {
    4 + (elem_size as usize).div_ceil(4) * 4
}

/// The validated shape of a structure: where things are.
#[derive(Clone, Copy)]
struct Shape {
    nbuckets: u32,
    elem_size: u32,
    capacity: u32,
    nodes: usize,
    stride: usize,
}

impl Shape {
    /// The header of `m`, if it describes a structure that fits in `m`.
    fn of(m: &[u8]) -> Option<Shape> {
        let (nbuckets, elem_size, capacity) = (rd(m, 0)?, rd(m, 4)?, rd(m, 8)?);
        if nbuckets == 0 || elem_size == 0 || elem_size > MAX_ELEM {
            return None;
        }
        let nodes = HEADER.checked_add((nbuckets as usize).checked_mul(BUCKET)?)?;
        let stride = stride(elem_size);
        let end = nodes.checked_add((capacity as usize).checked_mul(stride)?)?;
        (end <= m.len()).then_some(Shape {
            nbuckets,
            elem_size,
            capacity,
            nodes,
            stride,
        })
    }

    fn bucket(&self, b: u64) -> Option<usize> {
        (b < u64::from(self.nbuckets)).then(|| HEADER + b as usize * BUCKET)
    }

    /// Offset of node `link - 1` (links are node + 1), if in the pool.
    fn node(&self, link: u32) -> Option<usize> {
        (link >= 1 && link <= self.capacity).then(|| self.nodes + (link - 1) as usize * self.stride)
    }
}

/// `bpfjet_bktlist_init`: lay out `nbuckets` empty queues of `elem_size`-
/// byte elements in `m`, every remaining node free; returns the capacity
/// (nodes), or -EINVAL when not even one node fits.
pub fn init(m: &mut [u8], nbuckets: u64, elem_size: u64) -> u64 {
    if nbuckets == 0 || nbuckets > u64::from(u32::MAX) || elem_size == 0 || elem_size > 256 {
        return neg(EINVAL);
    }
    let Some(nodes) = (nbuckets as usize)
        .checked_mul(BUCKET)
        .and_then(|b| b.checked_add(HEADER))
    else {
        return neg(EINVAL);
    };
    let stride = stride(elem_size as u32);
    let capacity = (m.len().saturating_sub(nodes) / stride).min(u32::MAX as usize - 1);
    if nodes > m.len() || capacity == 0 {
        return neg(EINVAL);
    }
    wr(m, 0, nbuckets as u32);
    wr(m, 4, elem_size as u32);
    wr(m, 8, capacity as u32);
    wr(m, 12, 1);
    m[HEADER..nodes].fill(0);
    for i in 0..capacity {
        let next = if i + 1 < capacity { i as u32 + 2 } else { 0 };
        wr(m, nodes + i * stride, next);
    }
    capacity as u64
}

/// `bpfjet_bktlist_push`: append `elem` to bucket `b`: 0, -ENOSPC when
/// the pool is full, -EINVAL for a bucket out of range, an element of
/// another size or a structure `init` did not lay out.
pub fn push(m: &mut [u8], b: u64, elem: &[u8]) -> u64 {
    let Some(s) = Shape::of(m) else {
        return neg(EINVAL);
    };
    let Some(bk) = s.bucket(b) else {
        return neg(EINVAL);
    };
    if elem.len() != s.elem_size as usize {
        return neg(EINVAL);
    }
    let free = rd(m, 12).unwrap_or(0);
    if free == 0 {
        return neg(ENOSPC);
    }
    let Some(n) = s.node(free) else {
        return neg(EINVAL);
    };
    let next_free = rd(m, n).unwrap_or(0);
    let tail = rd(m, bk + 4).unwrap_or(0);
    let len = rd(m, bk + 8).unwrap_or(0);
    let tail_node = if tail == 0 {
        None
    } else {
        match s.node(tail) {
            Some(t) => Some(t),
            None => return neg(EINVAL),
        }
    };
    wr(m, 12, next_free);
    wr(m, n, 0);
    m[n + 4..n + 4 + elem.len()].copy_from_slice(elem);
    match tail_node {
        Some(t) => wr(m, t, free),
        None => wr(m, bk, free),
    }
    wr(m, bk + 4, free);
    wr(m, bk + 8, len.wrapping_add(1));
    0
}

/// The front node of bucket `b`, validated: (shape, bucket offset, link,
/// node offset), or the error to return.
fn front(m: &[u8], b: u64, out_len: usize) -> Result<(Shape, usize, u32, usize), u64> {
    let s = Shape::of(m).ok_or(neg(EINVAL))?;
    let bk = s.bucket(b).ok_or(neg(EINVAL))?;
    if out_len != s.elem_size as usize {
        return Err(neg(EINVAL));
    }
    let head = rd(m, bk).unwrap_or(0);
    if head == 0 {
        return Err(neg(ENOENT));
    }
    let n = s.node(head).ok_or(neg(EINVAL))?;
    Ok((s, bk, head, n))
}

/// `bpfjet_bktlist_peek`: copy bucket `b`'s front element to `out`: 0,
/// -ENOENT when empty, -EINVAL as for `push`.
pub fn peek(m: &[u8], b: u64, out: &mut [u8]) -> u64 {
    match front(m, b, out.len()) {
        Ok((_, _, _, n)) => {
            out.copy_from_slice(&m[n + 4..n + 4 + out.len()]);
            0
        }
        Err(e) => e,
    }
}

/// `bpfjet_bktlist_pop`: move bucket `b`'s front element to `out` and free
/// its node: 0, -ENOENT when empty, -EINVAL as for `push`.
pub fn pop(m: &mut [u8], b: u64, out: &mut [u8]) -> u64 {
    let (s, bk, head, n) = match front(m, b, out.len()) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let next = rd(m, n).unwrap_or(0);
    if next != 0 && s.node(next).is_none() {
        return neg(EINVAL);
    }
    out.copy_from_slice(&m[n + 4..n + 4 + out.len()]);
    wr(m, bk, next);
    if next == 0 {
        wr(m, bk + 4, 0);
    }
    let len = rd(m, bk + 8).unwrap_or(0);
    wr(m, bk + 8, len.saturating_sub(1));
    let free = rd(m, 12).unwrap_or(0);
    wr(m, n, free);
    wr(m, 12, head);
    0
}

/// `bpfjet_bktlist_len`: elements queued in bucket `b`, or -EINVAL.
pub fn len(m: &[u8], b: u64) -> u64 {
    match Shape::of(m).and_then(|s| s.bucket(b)) {
        Some(bk) => u64::from(rd(m, bk + 8).unwrap_or(0)),
        None => neg(EINVAL),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    #[test]
    fn queues_behave_like_fifos_until_the_pool_is_full() {
        let mut m = vec![0u8; 16 + 8 * 12 + 20 * 12];
        assert_eq!(init(&mut m, 8, 8), 20);
        let mut model: Vec<VecDeque<u64>> = vec![VecDeque::new(); 8];
        let mut x = 0x2545_f491u32;
        let mut out = [0u8; 8];
        for step in 0..5000u64 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let b = u64::from(x % 8);
            let queued: usize = model.iter().map(VecDeque::len).sum();
            if x & 0x100 != 0 {
                let r = push(&mut m, b, &step.to_ne_bytes());
                if queued == 20 {
                    assert_eq!(r, neg(ENOSPC));
                } else {
                    assert_eq!(r, 0);
                    model[b as usize].push_back(step);
                }
            } else {
                let p = peek(&m, b, &mut out);
                let want = model[b as usize].front().copied();
                assert_eq!(p == 0, want.is_some());
                let r = pop(&mut m, b, &mut out);
                match model[b as usize].pop_front() {
                    Some(v) => {
                        assert_eq!(r, 0);
                        assert_eq!(u64::from_ne_bytes(out), v);
                    }
                    None => assert_eq!(r, neg(ENOENT)),
                }
            }
            assert_eq!(len(&m, b), model[b as usize].len() as u64);
        }
    }

    #[test]
    fn bad_input_is_refused_and_corruption_stays_inside() {
        let mut m = vec![0u8; 400];
        assert_eq!(push(&mut m, 0, &[0; 8]), neg(EINVAL), "not laid out");
        assert_eq!(init(&mut m, 0, 8), neg(EINVAL));
        assert_eq!(init(&mut m, 100, 8), neg(EINVAL), "no room for a node");
        assert!(init(&mut m, 4, 8) > 0);
        assert_eq!(push(&mut m, 4, &[0; 8]), neg(EINVAL), "bucket out of range");
        assert_eq!(push(&mut m, 0, &[0; 4]), neg(EINVAL), "element size");
        assert_eq!(push(&mut m, 0, &[1; 8]), 0);
        // A program scribbling over the links: every call stays in bounds.
        let mut x = 7u32;
        for _ in 0..20000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let at = (x as usize >> 8) % m.len();
            m[at] = x as u8;
            let mut out = [0u8; 8];
            let _ = push(&mut m, u64::from(x % 5), &[2; 8]);
            let _ = pop(&mut m, u64::from(x % 5), &mut out);
            let _ = peek(&m, u64::from(x % 5), &mut out);
            let _ = len(&m, u64::from(x % 5));
        }
    }
}
