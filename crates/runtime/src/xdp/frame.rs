//! The packet buffer of one XDP run, laid out like the frame the kernel's
//! `BPF_PROG_TEST_RUN` builds for XDP programs, and the three adjust
//! operations with the kernel's limits and error codes.
//!
//! ```text
//!  0        XDP_FRAME_RESERVED            HEADROOM            data_end    HARD_END     PAGE
//!  |-- xdp_frame --|---- free headroom ----|meta|--- packet ---|-- tailroom --|- shinfo -|
//! ```
//! The kernel keeps `struct xdp_frame` at the start of the headroom (so a
//! redirected frame can be converted in place) and `struct skb_shared_info`
//! at the end of the page; neither may be overwritten by adjustments.

use super::context::XdpMd;
use crate::errno;

/// `XDP_PACKET_HEADROOM`: where the packet starts in a fresh frame.
pub const XDP_PACKET_HEADROOM: usize = 256;
/// The test-run frame is one page (`PAGE_SIZE` on x86-64).
pub const FRAME_SIZE: usize = 4096;
/// `SKB_DATA_ALIGN(sizeof(struct skb_shared_info))` on x86-64 Linux 6.x:
/// the tail of the page `bpf_xdp_adjust_tail` may not grow into.
pub const SKB_SHARED_INFO_SIZE: usize = 320;
/// `sizeof(struct xdp_frame)` on x86-64 Linux 6.x: the start of the headroom
/// `bpf_xdp_adjust_head` / `adjust_meta` may not move into.
pub const XDP_FRAME_RESERVED: usize = 40;
/// `xdp_data_hard_end`: the end of the usable buffer.
pub const HARD_END: usize = FRAME_SIZE - SKB_SHARED_INFO_SIZE;
/// The largest packet a test run accepts without multi-buffer frags
/// (`PAGE_SIZE - XDP_PACKET_HEADROOM - tailroom` in test_run.c).
pub const MAX_LINEAR_PACKET: usize = HARD_END - XDP_PACKET_HEADROOM;
/// `ETH_HLEN`: adjustments never leave less than an Ethernet header.
pub const ETH_HLEN: usize = 14;
/// The largest metadata area: `skb_shared_info::meta_len` is a u8, and
/// metadata must be a multiple of 4 bytes (`xdp_metalen_invalid`).
pub const XDP_META_MAX: usize = 255;

/// One XDP frame: the page buffer, the packet bounds as offsets into it, and
/// the context structure the program reads (kept in sync with the bounds).
pub struct XdpFrame {
    buf: Box<[u8]>,
    data_meta: usize,
    data: usize,
    data_end: usize,
    md: Box<XdpMd>,
}

impl std::fmt::Debug for XdpFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpFrame")
            .field("data_meta", &self.data_meta)
            .field("data", &self.data)
            .field("data_end", &self.data_end)
            .finish()
    }
}

/// Why a packet cannot become a frame (the kernel's test run refuses these
/// with EINVAL, or needs multi-buffer support bpfjet lacks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("packet of {0} bytes is shorter than an Ethernet header (14 bytes)")]
    TooShort(usize),
    #[error(
        "packet of {0} bytes exceeds the {MAX_LINEAR_PACKET}-byte linear frame; \
         multi-buffer (frags) frames are not supported"
    )]
    TooLong(usize),
}

/// `dst.copy_from_slice(src)` for a packet of at least [`ETH_HLEN`] bytes,
/// inline for the common small frame: a fresh-packet benchmark resets the
/// frame before every run, and a `memcpy` call costs more than the copy.
#[inline]
fn copy_packet(dst: &mut [u8], src: &[u8]) {
    const CHUNK: usize = 16;
    let len = src.len();
    if dst.len() != len || !(8..=4 * CHUNK).contains(&len) {
        dst.copy_from_slice(src);
        return;
    }
    if len < CHUNK {
        // Two overlapping 8-byte moves cover 8..=16 bytes.
        copy_chunk::<8>(dst, src, 0);
        copy_chunk::<8>(dst, src, len - 8);
        return;
    }
    let mut at = 0;
    while at + CHUNK < len {
        copy_chunk::<CHUNK>(dst, src, at);
        at += CHUNK;
    }
    // The last chunk ends at `len`, overlapping the previous one.
    copy_chunk::<CHUNK>(dst, src, len - CHUNK);
}

/// `N` bytes at `at`, as one move: the size is a constant, so no `memcpy`
/// call (a closure taking the size as an argument got one per chunk).
#[inline(always)]
fn copy_chunk<const N: usize>(dst: &mut [u8], src: &[u8], at: usize) {
    let (Some(d), Some(s)) = (dst.get_mut(at..at + N), src.get(at..at + N)) else {
        unreachable!("copy_packet checked both lengths");
    };
    d.copy_from_slice(s);
}

/// Whether `packet` fits a linear frame: at least an Ethernet header and at
/// most [`MAX_LINEAR_PACKET`] bytes.
fn check_len(packet: &[u8]) -> Result<(), FrameError> {
    if packet.len() < ETH_HLEN {
        return Err(FrameError::TooShort(packet.len()));
    }
    if packet.len() > MAX_LINEAR_PACKET {
        return Err(FrameError::TooLong(packet.len()));
    }
    Ok(())
}

impl XdpFrame {
    /// A frame holding `packet` after the standard headroom, with no metadata.
    pub fn new(
        packet: &[u8],
        ingress_ifindex: u32,
        rx_queue_index: u32,
    ) -> Result<Self, FrameError> {
        check_len(packet)?;
        let mut buf = vec![0u8; FRAME_SIZE].into_boxed_slice();
        buf[XDP_PACKET_HEADROOM..XDP_PACKET_HEADROOM + packet.len()].copy_from_slice(packet);
        let mut frame = XdpFrame {
            buf,
            data_meta: XDP_PACKET_HEADROOM,
            data: XDP_PACKET_HEADROOM,
            data_end: XDP_PACKET_HEADROOM + packet.len(),
            md: Box::new(XdpMd {
                ingress_ifindex,
                rx_queue_index,
                ..XdpMd::default()
            }),
        };
        frame.sync_md();
        Ok(frame)
    }

    /// Put `packet` back into this frame as [`XdpFrame::new`] would lay it
    /// out (headroom, no metadata), keeping the buffer and the context's
    /// address: benchmarks reset the frame before every fresh-packet run.
    /// Bytes outside the packet keep what earlier runs left there.
    #[inline]
    pub fn reset(&mut self, packet: &[u8]) -> Result<(), FrameError> {
        check_len(packet)?;
        copy_packet(
            &mut self.buf[XDP_PACKET_HEADROOM..XDP_PACKET_HEADROOM + packet.len()],
            packet,
        );
        self.data_meta = XDP_PACKET_HEADROOM;
        self.data = XDP_PACKET_HEADROOM;
        self.data_end = XDP_PACKET_HEADROOM + packet.len();
        self.sync_md();
        Ok(())
    }

    #[inline]
    fn base(&self) -> u64 {
        self.buf.as_ptr() as u64
    }

    #[inline]
    fn sync_md(&mut self) {
        let base = self.base();
        self.md.data = base + self.data as u64;
        self.md.data_end = base + self.data_end as u64;
        self.md.data_meta = base + self.data_meta as u64;
    }

    /// The context structure's address (r1 at program entry).
    #[inline]
    pub fn md_addr(&self) -> u64 {
        &*self.md as *const XdpMd as u64
    }

    pub fn md(&self) -> &XdpMd {
        &self.md
    }

    /// Host address and length of `data_meta..data_end`: everything the
    /// program may touch directly.
    pub fn packet_span(&self) -> (u64, u64) {
        (
            self.base() + self.data_meta as u64,
            (self.data_end - self.data_meta) as u64,
        )
    }

    /// `data..data_end`.
    pub fn packet(&self) -> &[u8] {
        &self.buf[self.data..self.data_end]
    }

    pub fn packet_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.data..self.data_end]
    }

    /// `data_meta..data`.
    pub fn metadata(&self) -> &[u8] {
        &self.buf[self.data_meta..self.data]
    }

    /// `data_meta..data_end`: what the kernel's test run copies out.
    pub fn meta_and_packet(&self) -> &[u8] {
        &self.buf[self.data_meta..self.data_end]
    }

    /// `xdp_get_buff_len` for a linear frame.
    pub fn len(&self) -> usize {
        self.data_end - self.data
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `bpf_xdp_adjust_head`: move `data` by `offset`; the metadata moves
    /// with it. `Err` is the positive errno the helper negates.
    pub fn adjust_head(&mut self, offset: i32) -> Result<(), u64> {
        let metalen = self.data - self.data_meta;
        let new_data = self.data as i64 + i64::from(offset);
        let lowest = (XDP_FRAME_RESERVED + metalen) as i64;
        let highest = self.data_end as i64 - ETH_HLEN as i64;
        if new_data < lowest || new_data > highest {
            return Err(errno::EINVAL);
        }
        let new_data = new_data as usize;
        let new_meta = new_data - metalen;
        if metalen != 0 {
            self.buf.copy_within(self.data_meta..self.data, new_meta);
        }
        self.data_meta = new_meta;
        self.data = new_data;
        self.sync_md();
        Ok(())
    }

    /// `bpf_xdp_adjust_meta`: move `data_meta` by `offset`.
    pub fn adjust_meta(&mut self, offset: i32) -> Result<(), u64> {
        let meta = self.data_meta as i64 + i64::from(offset);
        if meta < XDP_FRAME_RESERVED as i64 || meta > self.data as i64 {
            return Err(errno::EINVAL);
        }
        let metalen = self.data - meta as usize;
        if !metalen.is_multiple_of(4) || metalen > XDP_META_MAX {
            return Err(errno::EACCES);
        }
        self.data_meta = meta as usize;
        self.sync_md();
        Ok(())
    }

    /// `bpf_xdp_adjust_tail`: move `data_end` by `offset`; grown bytes are zeroed.
    pub fn adjust_tail(&mut self, offset: i32) -> Result<(), u64> {
        let new_end = self.data_end as i64 + i64::from(offset);
        if new_end > HARD_END as i64 || new_end < (self.data + ETH_HLEN) as i64 {
            return Err(errno::EINVAL);
        }
        let new_end = new_end as usize;
        if new_end > self.data_end {
            self.buf[self.data_end..new_end].fill(0);
        }
        self.data_end = new_end;
        self.sync_md();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(len: usize) -> XdpFrame {
        XdpFrame::new(&vec![0xab; len], 1, 0).unwrap()
    }

    #[test]
    fn reset_copies_every_length_exactly() {
        // The inline small-packet copy covers 8..=64 bytes in overlapping
        // chunks; longer packets take copy_from_slice.
        let mut f = frame(ETH_HLEN);
        for len in ETH_HLEN..=200 {
            let packet: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
            f.adjust_head(-4).unwrap();
            f.reset(&packet).unwrap();
            assert_eq!(f.packet(), &packet[..], "length {len}");
            assert_eq!(f.md().data_end - f.md().data, len as u64);
        }
    }

    #[test]
    fn fresh_frame_layout() {
        let f = frame(60);
        assert_eq!(f.len(), 60);
        assert_eq!(f.md().data_end - f.md().data, 60);
        assert_eq!(f.md().data_meta, f.md().data);
        assert!(f.metadata().is_empty());
    }

    #[test]
    fn head_limits() {
        let mut f = frame(60);
        let room = (XDP_PACKET_HEADROOM - XDP_FRAME_RESERVED) as i32;
        assert_eq!(f.adjust_head(-room - 1), Err(errno::EINVAL));
        assert_eq!(f.adjust_head(-room), Ok(()));
        assert_eq!(f.len(), 60 + room as usize);
        let mut f = frame(60);
        assert_eq!(f.adjust_head(60 - 13), Err(errno::EINVAL));
        assert_eq!(f.adjust_head(60 - 14), Ok(()));
        assert_eq!(f.len(), 14);
    }

    #[test]
    fn tail_limits_zero_growth() {
        let mut f = frame(60);
        f.packet_mut()[59] = 7;
        assert_eq!(f.adjust_tail(-47), Err(errno::EINVAL));
        assert_eq!(f.adjust_tail(-10), Ok(()));
        assert_eq!(f.adjust_tail(10), Ok(()));
        assert_eq!(f.packet()[59], 0, "grown bytes are zeroed");
        let max = (MAX_LINEAR_PACKET - 60) as i32;
        assert_eq!(f.adjust_tail(max + 1), Err(errno::EINVAL));
        assert_eq!(f.adjust_tail(max), Ok(()));
        assert_eq!(f.len(), MAX_LINEAR_PACKET);
    }

    #[test]
    fn meta_moves_with_head() {
        let mut f = frame(60);
        assert_eq!(f.adjust_meta(-3), Err(errno::EACCES));
        assert_eq!(f.adjust_meta(1), Err(errno::EINVAL));
        assert_eq!(f.adjust_meta(-8), Ok(()));
        f.buf[f.data_meta..f.data].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(f.adjust_head(-20), Ok(()));
        assert_eq!(f.metadata(), &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(f.meta_and_packet().len(), 88);
    }
}
