//! The packet buffer of one XDP run, laid out like the frame the kernel's
//! `BPF_PROG_TEST_RUN` builds for XDP programs, and the three adjust
//! operations with the kernel's limits and error codes.
//!
//! A packet longer than the linear part ([`MAX_LINEAR_PACKET`] bytes) becomes
//! a **multi-buffer** frame, split as `bpf_prog_test_run_xdp` splits it: the
//! first [`MAX_LINEAR_PACKET`] bytes in the linear buffer, the rest in
//! fragments of one page each (the last one partly filled), at most
//! [`MAX_FRAGS`] of them. `data`/`data_end` cover only the linear part;
//! `bpf_xdp_get_buff_len`, `bpf_xdp_load_bytes`/`store_bytes` and
//! `bpf_xdp_adjust_tail` see the whole frame.
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
/// `rxq->frag_size`: every fragment is a page of its own (test-run sets
/// the loopback queue's fragment size to `PAGE_SIZE`).
pub const FRAG_SIZE: usize = 4096;
/// `MAX_SKB_FRAGS` (17 in a default kernel configuration): a test run with
/// more fragments fails with ENOMEM.
pub const MAX_FRAGS: usize = 17;
/// The largest packet a test run accepts: the linear part and
/// [`MAX_FRAGS`] full fragments.
pub const MAX_PACKET: usize = MAX_LINEAR_PACKET + MAX_FRAGS * FRAG_SIZE;
/// `ETH_HLEN`: adjustments never leave less than an Ethernet header.
pub const ETH_HLEN: usize = 14;
/// The largest metadata area: `skb_shared_info::meta_len` is a u8, and
/// metadata must be a multiple of 4 bytes (`xdp_metalen_invalid`).
pub const XDP_META_MAX: usize = 255;

/// One XDP frame: the page buffer, the packet bounds as offsets into it, and
/// the context structure the program reads (kept in sync with the bounds);
/// plus the fragments of a multi-buffer frame (`skb_shared_info::frags`).
pub struct XdpFrame {
    buf: Box<[u8]>,
    data_meta: usize,
    data: usize,
    data_end: usize,
    md: Box<XdpMd>,
    /// Empty for a linear frame (the kernel's frags flag is clear).
    frags: Vec<Frag>,
}

/// One fragment: a page whose first `len` bytes are packet data
/// (`skb_frag_off` is 0 in a test run).
struct Frag {
    page: Box<[u8]>,
    len: usize,
}

impl Frag {
    fn bytes(&self) -> &[u8] {
        &self.page[..self.len]
    }
}

impl std::fmt::Debug for XdpFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpFrame")
            .field("data_meta", &self.data_meta)
            .field("data", &self.data)
            .field("data_end", &self.data_end)
            .field(
                "frags",
                &self.frags.iter().map(|f| f.len).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Why a packet cannot become a frame (the kernel's test run refuses a
/// short packet with EINVAL and one needing more than [`MAX_FRAGS`]
/// fragments with ENOMEM).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("packet of {0} bytes is shorter than an Ethernet header (14 bytes) (EINVAL)")]
    TooShort(usize),
    #[error(
        "packet of {0} bytes exceeds the largest multi-buffer frame ({MAX_PACKET} bytes: \
         {MAX_LINEAR_PACKET} linear and {MAX_FRAGS} fragments of {FRAG_SIZE}) (ENOMEM)"
    )]
    TooLong(usize),
    #[error("a {linear}-byte linear part is longer than the {len}-byte packet (EINVAL)")]
    LinearPastEnd { linear: usize, len: usize },
    #[error(
        "{meta} bytes of metadata: it must be a multiple of 4 of at most 216 bytes, \
         inside a {linear}-byte linear part (EINVAL)"
    )]
    BadMeta { meta: usize, linear: usize },
}

/// The most metadata a test run accepts: the headroom less the reserved
/// `struct xdp_frame` (`meta_sz > headroom - sizeof(struct xdp_frame)`).
pub const TEST_RUN_META_MAX: usize = XDP_PACKET_HEADROOM - XDP_FRAME_RESERVED;

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

/// Whether `packet` fits a frame: at least an Ethernet header and at most
/// [`MAX_PACKET`] bytes.
fn check_len(packet: &[u8]) -> Result<(), FrameError> {
    if packet.len() < ETH_HLEN {
        return Err(FrameError::TooShort(packet.len()));
    }
    if packet.len() > MAX_PACKET {
        return Err(FrameError::TooLong(packet.len()));
    }
    Ok(())
}

/// The fragments holding `rest` (the bytes past the linear part): full
/// pages, the last one partly filled, as the kernel's test run fills them.
fn split_frags(rest: &[u8]) -> Vec<Frag> {
    rest.chunks(FRAG_SIZE)
        .map(|chunk| {
            let mut page = vec![0u8; FRAG_SIZE].into_boxed_slice();
            page[..chunk.len()].copy_from_slice(chunk);
            Frag {
                page,
                len: chunk.len(),
            }
        })
        .collect()
}

impl XdpFrame {
    /// A frame holding `packet` after the standard headroom, with no metadata.
    pub fn new(
        packet: &[u8],
        ingress_ifindex: u32,
        rx_queue_index: u32,
    ) -> Result<Self, FrameError> {
        Self::with_linear(packet, packet.len(), ingress_ifindex, rx_queue_index)
    }

    /// A frame whose linear part holds the first `min(linear,
    /// MAX_LINEAR_PACKET)` bytes of `packet` and fragments the rest: the
    /// kernel's test run with an input context whose `data_end` is
    /// `linear` (6.18: any value up to the packet's length, 0 included).
    pub fn with_linear(
        packet: &[u8],
        linear: usize,
        ingress_ifindex: u32,
        rx_queue_index: u32,
    ) -> Result<Self, FrameError> {
        Self::for_test_run(packet, 0, linear, ingress_ifindex, rx_queue_index)
    }

    /// The frame `bpf_prog_test_run_xdp` builds from an input context:
    /// `packet` starts with `meta` bytes of metadata (`xdp_md.data`), which
    /// sit right before the standard headroom's end; the linear part holds
    /// the first `min(linear, MAX_LINEAR_PACKET + meta)` bytes counted
    /// from the metadata (`xdp_md.data_end`), the rest goes to page-sized
    /// fragments, at most [`MAX_FRAGS`] of them (ENOMEM past that).
    pub fn for_test_run(
        packet: &[u8],
        meta: usize,
        linear: usize,
        ingress_ifindex: u32,
        rx_queue_index: u32,
    ) -> Result<Self, FrameError> {
        if linear > packet.len() {
            return Err(FrameError::LinearPastEnd {
                linear,
                len: packet.len(),
            });
        }
        if !meta.is_multiple_of(4) || meta > TEST_RUN_META_MAX || meta > linear {
            return Err(FrameError::BadMeta { meta, linear });
        }
        if packet.len() - meta < ETH_HLEN {
            return Err(FrameError::TooShort(packet.len() - meta));
        }
        let linear = linear.min(MAX_LINEAR_PACKET + meta);
        if (packet.len() - linear).div_ceil(FRAG_SIZE) > MAX_FRAGS {
            return Err(FrameError::TooLong(packet.len()));
        }
        let data_meta = XDP_PACKET_HEADROOM - meta;
        let mut buf = vec![0u8; FRAME_SIZE].into_boxed_slice();
        buf[data_meta..data_meta + linear].copy_from_slice(&packet[..linear]);
        let mut frame = XdpFrame {
            buf,
            data_meta,
            data: XDP_PACKET_HEADROOM,
            data_end: data_meta + linear,
            md: Box::new(XdpMd {
                ingress_ifindex,
                rx_queue_index,
                ..XdpMd::default()
            }),
            frags: split_frags(&packet[linear..]),
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
        let linear = packet.len().min(MAX_LINEAR_PACKET);
        copy_packet(
            &mut self.buf[XDP_PACKET_HEADROOM..XDP_PACKET_HEADROOM + linear],
            &packet[..linear],
        );
        self.data_meta = XDP_PACKET_HEADROOM;
        self.data = XDP_PACKET_HEADROOM;
        self.data_end = XDP_PACKET_HEADROOM + linear;
        if !self.frags.is_empty() || packet.len() > linear {
            self.frags = split_frags(&packet[linear..]);
        }
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

    /// The context's interface fields: a DEVMAP entry's program runs with
    /// the receiving device, queue 0 and its entry's device
    /// (`dev_map_bpf_prog_run`).
    pub fn set_queue(&mut self, ingress_ifindex: u32, rx_queue_index: u32, egress_ifindex: u32) {
        self.md.ingress_ifindex = ingress_ifindex;
        self.md.rx_queue_index = rx_queue_index;
        self.md.egress_ifindex = egress_ifindex;
    }

    /// `data..data_end` then every fragment's bytes: the frame as it
    /// leaves an interface, into `out` (replacing what it held).
    pub fn copy_out(&self, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(self.packet());
        for frag in &self.frags {
            out.extend_from_slice(frag.bytes());
        }
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

    /// `data_meta..data_end`: the linear part of what the kernel's test
    /// run copies out (all of it for a linear frame).
    pub fn meta_and_packet(&self) -> &[u8] {
        &self.buf[self.data_meta..self.data_end]
    }

    /// What the kernel's test run copies out: `data_meta..data_end`, then
    /// every fragment's bytes in order.
    pub fn output(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.data_end - self.data_meta + self.frags_size());
        out.extend_from_slice(self.meta_and_packet());
        for frag in &self.frags {
            out.extend_from_slice(frag.bytes());
        }
        out
    }

    /// What the kernel's test run writes back into the context
    /// (`xdp_convert_buff_to_md`): `data` and `data_end` as offsets from
    /// `data_meta`.
    pub fn md_offsets(&self) -> (u32, u32) {
        (
            (self.data - self.data_meta) as u32,
            (self.data_end - self.data_meta) as u32,
        )
    }

    /// The linear part's length, `data_end - data`.
    pub fn len(&self) -> usize {
        self.data_end - self.data
    }

    /// Whether the frame has fragments (the kernel's `xdp_buff_has_frags`).
    pub fn has_frags(&self) -> bool {
        !self.frags.is_empty()
    }

    /// The fragments' lengths, in order.
    pub fn frag_lens(&self) -> Vec<usize> {
        self.frags.iter().map(|f| f.len).collect()
    }

    /// `skb_shared_info::xdp_frags_size`.
    pub fn frags_size(&self) -> usize {
        self.frags.iter().map(|f| f.len).sum()
    }

    /// The fragments' bytes, in order, into `out` (exactly
    /// [`XdpFrame::frags_size`] bytes).
    pub fn copy_frags_to(&self, out: &mut [u8]) {
        let mut at = 0;
        for frag in &self.frags {
            out[at..at + frag.len].copy_from_slice(frag.bytes());
            at += frag.len;
        }
    }

    /// `xdp_get_buff_len`: the linear part and every fragment.
    pub fn buff_len(&self) -> usize {
        self.len() + self.frags_size()
    }

    /// `bpf_xdp_pointer`'s checks: offsets and lengths over 0xffff are
    /// EFAULT, a range past the whole frame EINVAL. `Err` is the positive
    /// errno the helpers negate.
    fn check_range(&self, offset: u32, len: u32) -> Result<(), u64> {
        if offset > 0xffff || len > 0xffff {
            return Err(errno::EFAULT);
        }
        if offset as usize + len as usize > self.buff_len() {
            return Err(errno::EINVAL);
        }
        Ok(())
    }

    /// The pieces of the frame in packet order: the linear part, then the
    /// fragments (`bpf_xdp_copy_buf`'s walk).
    fn pieces_mut(&mut self) -> impl Iterator<Item = &mut [u8]> {
        let linear = &mut self.buf[self.data..self.data_end];
        std::iter::once(linear).chain(self.frags.iter_mut().map(|f| &mut f.page[..f.len]))
    }

    /// `bpf_xdp_load_bytes`: `out.len()` bytes from packet offset `offset`,
    /// across fragment borders.
    pub fn load_bytes(&mut self, offset: u32, out: &mut [u8]) -> Result<(), u64> {
        self.check_range(offset, out.len() as u32)?;
        self.copy(offset as usize, out.len(), |piece, at| {
            out[at..at + piece.len()].copy_from_slice(piece)
        });
        Ok(())
    }

    /// `bpf_xdp_store_bytes`: `bytes` to packet offset `offset`, across
    /// fragment borders.
    pub fn store_bytes(&mut self, offset: u32, bytes: &[u8]) -> Result<(), u64> {
        self.check_range(offset, bytes.len() as u32)?;
        self.copy(offset as usize, bytes.len(), |piece, at| {
            piece.copy_from_slice(&bytes[at..at + piece.len()])
        });
        Ok(())
    }

    /// `bpf_xdp_pointer`: the address of `len` bytes at packet offset
    /// `offset` when they lie in one piece (the linear part or one
    /// fragment), `Ok(None)` when they cross a border; `Err` as
    /// [`XdpFrame::load_bytes`].
    pub fn pointer(&mut self, offset: u32, len: u32) -> Result<Option<*mut u8>, u64> {
        self.check_range(offset, len)?;
        let (mut offset, len) = (offset as usize, len as usize);
        let linear = self.len();
        if offset < linear {
            return Ok(
                (offset + len <= linear).then(|| self.buf[self.data + offset..].as_mut_ptr())
            );
        }
        offset -= linear;
        for frag in &mut self.frags {
            if offset < frag.len {
                let fits = offset + len <= frag.len;
                return Ok(fits.then(|| frag.page[offset..].as_mut_ptr()));
            }
            offset -= frag.len;
        }
        // The kernel's walk ends with the linear part's address and size.
        Ok((offset + len <= linear).then(|| self.buf[self.data + offset..].as_mut_ptr()))
    }

    /// The bytes of `offset..offset + len` that the frame has, as many as
    /// there are (`bpf_xdp_copy_buf` copies what it finds).
    pub fn gather_available(&mut self, offset: usize, len: usize) -> Vec<u8> {
        let len = len.min(self.buff_len().saturating_sub(offset));
        self.gather(offset, len)
    }

    /// Bytes `offset..offset + len` of the whole frame (checked by the
    /// caller), as `bpf_xdp_copy` gathers them for perf event output.
    pub fn gather(&mut self, offset: usize, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        self.copy(offset, len, |piece, at| {
            out[at..at + piece.len()].copy_from_slice(piece)
        });
        out
    }

    /// Calls `visit(piece, at)` for every part of packet range
    /// `offset..offset + len` in order; `at` is the part's position in the
    /// range.
    fn copy(&mut self, offset: usize, len: usize, mut visit: impl FnMut(&mut [u8], usize)) {
        let (mut skip, mut done) = (offset, 0);
        for piece in self.pieces_mut() {
            if done == len {
                break;
            }
            if skip >= piece.len() {
                skip -= piece.len();
                continue;
            }
            let take = (piece.len() - skip).min(len - done);
            visit(&mut piece[skip..skip + take], done);
            done += take;
            skip = 0;
        }
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

    /// `bpf_xdp_adjust_tail`: move `data_end` by `offset`; grown bytes are
    /// zeroed. On a multi-buffer frame the end of the last fragment moves
    /// instead (see [`XdpFrame::adjust_frags_tail`]).
    pub fn adjust_tail(&mut self, offset: i32) -> Result<(), u64> {
        if self.has_frags() {
            return self.adjust_frags_tail(offset);
        }
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

impl XdpFrame {
    /// `bpf_xdp_adjust_tail` on a multi-buffer frame
    /// (`bpf_xdp_frags_increase_tail` / `bpf_xdp_frags_shrink_tail`):
    /// growing fills the last fragment's page (zeroed bytes; EINVAL past its
    /// end); shrinking takes bytes off the fragments from the last one back,
    /// dropping each fragment it empties, and what is left once no fragment
    /// remains off the linear part. The whole frame never gets shorter than
    /// an Ethernet header (EINVAL).
    fn adjust_frags_tail(&mut self, offset: i32) -> Result<(), u64> {
        if offset >= 0 {
            let grow = offset as usize;
            let Some(last) = self.frags.last_mut() else {
                unreachable!("adjust_frags_tail runs on frames with fragments");
            };
            if grow > FRAG_SIZE - last.len {
                return Err(errno::EINVAL);
            }
            last.page[last.len..last.len + grow].fill(0);
            last.len += grow;
            return Ok(());
        }
        let mut shrink = offset.unsigned_abs() as usize;
        if shrink as i64 > self.buff_len() as i64 - ETH_HLEN as i64 {
            return Err(errno::EINVAL);
        }
        while shrink > 0 {
            let Some(last) = self.frags.last_mut() else {
                break;
            };
            let cut = shrink.min(last.len);
            last.len -= cut;
            shrink -= cut;
            if last.len == 0 {
                self.frags.pop();
            }
        }
        // Only reached with every fragment gone: the kernel clears the frags
        // flag and moves data_end back by the rest.
        self.data_end -= shrink;
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

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 13 + i / 4096) as u8).collect()
    }

    #[test]
    fn long_packets_split_like_the_kernel() {
        for (len, frags) in [
            (MAX_LINEAR_PACKET, vec![]),
            (MAX_LINEAR_PACKET + 1, vec![1]),
            (9000, vec![4096, 9000 - MAX_LINEAR_PACKET - 4096]),
            (MAX_PACKET, vec![FRAG_SIZE; MAX_FRAGS]),
        ] {
            let packet = pattern(len);
            let f = XdpFrame::new(&packet, 1, 0).unwrap();
            assert_eq!(f.len(), len.min(MAX_LINEAR_PACKET));
            assert_eq!(f.buff_len(), len);
            assert_eq!(f.frag_lens(), frags, "{len}");
            assert_eq!(f.output(), packet);
        }
        assert_eq!(
            XdpFrame::new(&pattern(MAX_PACKET + 1), 1, 0).unwrap_err(),
            FrameError::TooLong(MAX_PACKET + 1)
        );
    }

    #[test]
    fn copies_cross_fragment_borders() {
        let packet = pattern(9000);
        let mut f = XdpFrame::new(&packet, 1, 0).unwrap();
        let mut out = [0u8; 40];
        let at = MAX_LINEAR_PACKET + 4096 - 20;
        assert_eq!(f.load_bytes(at as u32, &mut out), Ok(()));
        assert_eq!(&out[..], &packet[at..at + 40]);
        assert_eq!(f.load_bytes(8990, &mut out[..11]), Err(errno::EINVAL));
        assert_eq!(f.load_bytes(0x10000, &mut out[..1]), Err(errno::EFAULT));
        let mut big = vec![0u8; 6000];
        assert_eq!(f.load_bytes(100, &mut big), Ok(()));
        assert_eq!(big, &packet[100..6100]);
        assert_eq!(f.store_bytes(MAX_LINEAR_PACKET as u32 - 3, &[9; 8]), Ok(()));
        let mut expect = packet.clone();
        expect[MAX_LINEAR_PACKET - 3..MAX_LINEAR_PACKET + 5].fill(9);
        assert_eq!(f.output(), expect);
    }

    #[test]
    fn frags_tail_grows_in_the_last_page_and_shrinks_across_fragments() {
        let mut f = XdpFrame::new(&pattern(9000), 1, 0).unwrap();
        let last = 9000 - MAX_LINEAR_PACKET - 4096;
        let room = (FRAG_SIZE - last) as i32;
        assert_eq!(f.adjust_tail(room + 1), Err(errno::EINVAL));
        assert_eq!(f.adjust_tail(room), Ok(()));
        assert_eq!(f.frag_lens(), vec![4096, 4096]);
        assert!(f.output()[9000..].iter().all(|&b| b == 0));
        // Drops the last fragment and 10 bytes of the first.
        assert_eq!(f.adjust_tail(-4106), Ok(()));
        assert_eq!(f.frag_lens(), vec![4086]);
        // Every fragment and 6 linear bytes.
        assert_eq!(f.adjust_tail(-4092), Ok(()));
        assert!(!f.has_frags());
        assert_eq!(f.len(), MAX_LINEAR_PACKET - 6);
        assert_eq!(f.md().data_end - f.md().data, f.len() as u64);
        // Linear again: limited by the page.
        assert_eq!(f.adjust_tail(7), Err(errno::EINVAL));
        let mut f = XdpFrame::new(&pattern(5000), 1, 0).unwrap();
        assert_eq!(f.adjust_tail(-(5000 - 13)), Err(errno::EINVAL));
        assert_eq!(f.adjust_tail(-(5000 - 14)), Ok(()));
        assert_eq!((f.len(), f.buff_len()), (14, 14));
    }
}
