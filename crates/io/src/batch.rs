//! Reusable, XDP-ready packet buffers and the batch that carries them.
//!
//! A [`PacketBuf`] is one frame laid out the way a driver hands it to XDP:
//!
//! ```text
//!  0            data_offset()            data_offset()+len()      frame_len()
//!  | headroom ... | packet data ............ | tailroom ............ |
//! ```
//!
//! so the runtime can move the data start (`bpf_xdp_adjust_head`,
//! `bpf_xdp_adjust_meta`) or end (`bpf_xdp_adjust_tail`) in place and
//! report the result with [`PacketBuf::set_data_range`]. Frames are
//! allocated once when the batch is built and reused for every later
//! packet; a frame only grows (once) when a packet larger than any before
//! arrives.

use crate::{IoError, PacketMeta};

/// Packets per batch unless configured otherwise: the batch size AF_XDP
/// and most kernel drivers use for their NAPI budget slices.
pub const DEFAULT_BATCH_SIZE: usize = 64;

/// Bytes in front of the packet: the kernel's `XDP_PACKET_HEADROOM`, which
/// programs rely on for encapsulation with `bpf_xdp_adjust_head`.
pub const DEFAULT_HEADROOM: usize = 256;

/// Bytes kept free after the packet for `bpf_xdp_adjust_tail` growth.
pub const DEFAULT_TAILROOM: usize = 256;

/// Initial room for packet data. With the default head- and tailroom the
/// frame is one 4 KiB page, like a driver's XDP frame.
pub const DEFAULT_DATA_ROOM: usize = 4096 - DEFAULT_HEADROOM - DEFAULT_TAILROOM;

/// Frames grow in page steps so a capture whose sizes creep upwards does
/// not reallocate on every new maximum.
const FRAME_GROWTH_STEP: usize = 4096;

/// How each frame of a batch is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferLayout {
    /// Free bytes before the packet data when a source fills the frame.
    pub headroom: usize,
    /// Free bytes after the packet data that every frame guarantees.
    pub tailroom: usize,
    /// Room for data allocated up front; larger packets grow the frame.
    pub data_room: usize,
}

impl Default for BufferLayout {
    fn default() -> Self {
        BufferLayout {
            headroom: DEFAULT_HEADROOM,
            tailroom: DEFAULT_TAILROOM,
            data_room: DEFAULT_DATA_ROOM,
        }
    }
}

impl BufferLayout {
    fn frame_len_for(&self, data_len: usize) -> usize {
        self.headroom
            .saturating_add(data_len)
            .saturating_add(self.tailroom)
    }
}

/// One frame: headroom, packet data, tailroom, and the packet's metadata.
#[derive(Debug, Clone)]
pub struct PacketBuf {
    /// Invariant: `start <= end <= frame.len()`.
    frame: Vec<u8>,
    start: usize,
    end: usize,
    layout: BufferLayout,
    meta: PacketMeta,
}

impl PacketBuf {
    /// An empty frame (no data) with `layout`.
    pub fn new(layout: BufferLayout) -> Self {
        PacketBuf {
            frame: vec![0; layout.frame_len_for(layout.data_room)],
            start: layout.headroom,
            end: layout.headroom,
            layout,
            meta: PacketMeta::default(),
        }
    }

    /// The packet bytes.
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.frame[self.start..self.end]
    }

    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.frame[self.start..self.end]
    }

    /// Packet length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Where the packet data starts within [`PacketBuf::frame`].
    #[inline]
    pub fn data_offset(&self) -> usize {
        self.start
    }

    /// Bytes currently free before the data.
    #[inline]
    pub fn headroom(&self) -> usize {
        self.start
    }

    /// The free bytes before the data (where `xdp_adjust_head` with a
    /// negative delta and `xdp_adjust_meta` write).
    #[inline]
    pub fn headroom_mut(&mut self) -> &mut [u8] {
        &mut self.frame[..self.start]
    }

    /// Bytes currently free after the data.
    #[inline]
    pub fn tailroom(&self) -> usize {
        self.frame.len() - self.end
    }

    #[inline]
    pub fn tailroom_mut(&mut self) -> &mut [u8] {
        let end = self.end;
        &mut self.frame[end..]
    }

    /// The whole frame, headroom and tailroom included.
    #[inline]
    pub fn frame(&self) -> &[u8] {
        &self.frame
    }

    /// The whole frame, for an engine that works on raw pointers into it
    /// (the XDP context's `data_hard_start` is `frame_mut().as_mut_ptr()`).
    #[inline]
    pub fn frame_mut(&mut self) -> &mut [u8] {
        &mut self.frame
    }

    #[inline]
    pub fn frame_len(&self) -> usize {
        self.frame.len()
    }

    /// The layout this frame was built with.
    pub fn layout(&self) -> BufferLayout {
        self.layout
    }

    /// Moves the data window to `start..end` of the frame, after the
    /// program adjusted head or tail. The bytes are left as they are.
    pub fn set_data_range(&mut self, start: usize, end: usize) -> Result<(), IoError> {
        if start > end || end > self.frame.len() {
            return Err(IoError::DataRange {
                start,
                end,
                frame_len: self.frame.len(),
            });
        }
        self.start = start;
        self.end = end;
        Ok(())
    }

    #[inline]
    pub fn meta(&self) -> &PacketMeta {
        &self.meta
    }

    #[inline]
    pub fn meta_mut(&mut self) -> &mut PacketMeta {
        &mut self.meta
    }

    /// Resets the frame for a new packet of `len` bytes at the layout's
    /// headroom, growing the frame if it cannot hold `len` bytes plus the
    /// tailroom, and returns the data for the caller to fill. The previous
    /// contents are not cleared: every source overwrites all `len` bytes,
    /// and zeroing would double the cost of a small packet.
    #[inline]
    pub fn prepare(&mut self, len: usize) -> &mut [u8] {
        let needed = self.layout.frame_len_for(len);
        if needed > self.frame.len() {
            self.grow(needed);
        }
        self.start = self.layout.headroom;
        self.end = self.start + len;
        &mut self.frame[self.start..self.end]
    }

    #[cold]
    fn grow(&mut self, needed: usize) {
        let rounded = needed
            .div_ceil(FRAME_GROWTH_STEP)
            .saturating_mul(FRAME_GROWTH_STEP);
        self.frame.resize(rounded, 0);
    }

    /// Copies `bytes` in as the new packet (see [`PacketBuf::prepare`]).
    pub fn fill(&mut self, bytes: &[u8], meta: PacketMeta) {
        self.prepare(bytes.len()).copy_from_slice(bytes);
        self.meta = meta;
    }
}

/// A fixed number of reusable frames, of which the first `len()` hold
/// packets.
#[derive(Debug, Clone)]
pub struct PacketBatch {
    bufs: Vec<PacketBuf>,
    len: usize,
    layout: BufferLayout,
}

impl Default for PacketBatch {
    fn default() -> Self {
        PacketBatch::new()
    }
}

impl PacketBatch {
    /// [`DEFAULT_BATCH_SIZE`] frames with the default layout.
    pub fn new() -> Self {
        PacketBatch::with_layout(DEFAULT_BATCH_SIZE, BufferLayout::default())
    }

    /// `capacity` frames with the default layout.
    pub fn with_capacity(capacity: usize) -> Self {
        PacketBatch::with_layout(capacity, BufferLayout::default())
    }

    /// `capacity` frames laid out as `layout`. A capacity of 0 is raised to
    /// 1: an empty batch would make every source look exhausted.
    pub fn with_layout(capacity: usize, layout: BufferLayout) -> Self {
        let capacity = capacity.max(1);
        PacketBatch {
            bufs: (0..capacity).map(|_| PacketBuf::new(layout)).collect(),
            len: 0,
            layout,
        }
    }

    #[inline]
    pub fn capacity(&self) -> usize {
        self.bufs.len()
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub fn is_full(&self) -> bool {
        self.len == self.bufs.len()
    }

    pub fn layout(&self) -> BufferLayout {
        self.layout
    }

    /// Forgets the packets; the frames stay allocated for reuse.
    #[inline]
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Claims the next free frame for a source to fill (with
    /// [`PacketBuf::prepare`] or [`PacketBuf::fill`]), or `None` when the
    /// batch is full.
    #[inline]
    pub fn push_slot(&mut self) -> Option<&mut PacketBuf> {
        let buf = self.bufs.get_mut(self.len)?;
        self.len += 1;
        Some(buf)
    }

    /// Gives back the frame last claimed with [`PacketBatch::push_slot`],
    /// for a source that failed to fill it.
    #[inline]
    pub fn pop_slot(&mut self) {
        self.len = self.len.saturating_sub(1);
    }

    /// The packets in this batch.
    #[inline]
    pub fn packets(&self) -> &[PacketBuf] {
        &self.bufs[..self.len]
    }

    #[inline]
    pub fn packets_mut(&mut self) -> &mut [PacketBuf] {
        &mut self.bufs[..self.len]
    }

    pub fn iter(&self) -> std::slice::Iter<'_, PacketBuf> {
        self.packets().iter()
    }

    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, PacketBuf> {
        self.packets_mut().iter_mut()
    }
}

impl<'a> IntoIterator for &'a PacketBatch {
    type Item = &'a PacketBuf;
    type IntoIter = std::slice::Iter<'a, PacketBuf>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a> IntoIterator for &'a mut PacketBatch {
    type Item = &'a mut PacketBuf;
    type IntoIter = std::slice::IterMut<'a, PacketBuf>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_frame_has_headroom_and_tailroom() {
        let mut buf = PacketBuf::new(BufferLayout::default());
        buf.fill(&[1, 2, 3], PacketMeta::default());
        assert_eq!(buf.data(), &[1, 2, 3]);
        assert_eq!(buf.data_offset(), DEFAULT_HEADROOM);
        assert_eq!(buf.headroom_mut().len(), DEFAULT_HEADROOM);
        assert!(buf.tailroom() >= DEFAULT_TAILROOM);
        assert_eq!(buf.frame_len(), 4096);
    }

    #[test]
    fn large_packet_grows_frame_keeping_tailroom() {
        let layout = BufferLayout {
            headroom: 32,
            tailroom: 100,
            data_room: 64,
        };
        let mut buf = PacketBuf::new(layout);
        let big = vec![0xab; 9000];
        buf.fill(&big, PacketMeta::default());
        assert_eq!(buf.data(), &big[..]);
        assert_eq!(buf.data_offset(), 32);
        assert!(buf.tailroom() >= 100);
        // A smaller packet afterwards reuses the grown frame.
        let before = buf.frame_len();
        buf.fill(&[7; 10], PacketMeta::default());
        assert_eq!(buf.frame_len(), before);
        assert_eq!(buf.data(), &[7; 10]);
    }

    #[test]
    fn data_range_moves_within_frame_only() {
        let mut buf = PacketBuf::new(BufferLayout::default());
        buf.fill(&[9; 60], PacketMeta::default());
        // Like bpf_xdp_adjust_head(ctx, -20): data starts 20 bytes earlier.
        let (start, end) = (buf.data_offset() - 20, buf.data_offset() + 60);
        buf.set_data_range(start, end).unwrap();
        assert_eq!(buf.len(), 80);
        assert_eq!(buf.headroom(), DEFAULT_HEADROOM - 20);
        assert!(buf.set_data_range(10, 5).is_err());
        assert!(buf.set_data_range(0, buf.frame_len() + 1).is_err());
        assert!(buf.set_data_range(0, buf.frame_len()).is_ok());
    }

    #[test]
    fn batch_slots_are_reused() {
        let mut batch = PacketBatch::with_capacity(2);
        batch.push_slot().unwrap().fill(&[1], PacketMeta::default());
        batch.push_slot().unwrap().fill(&[2], PacketMeta::default());
        assert!(batch.push_slot().is_none());
        assert!(batch.is_full());
        let ptr = batch.packets()[0].frame().as_ptr();
        batch.clear();
        assert!(batch.is_empty());
        batch.push_slot().unwrap().fill(&[3], PacketMeta::default());
        assert_eq!(batch.packets()[0].frame().as_ptr(), ptr);
        assert_eq!(batch.packets()[0].data(), &[3]);
        batch.pop_slot();
        assert!(batch.is_empty());
    }

    #[test]
    fn zero_capacity_is_raised_to_one() {
        assert_eq!(PacketBatch::with_capacity(0).capacity(), 1);
    }
}
