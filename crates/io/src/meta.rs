//! What a source knows about a packet besides its bytes.

/// Per-packet metadata carried next to the bytes of a [`crate::PacketBuf`].
///
/// `ingress_ifindex` and `rx_queue` are what the program later sees in
/// `xdp_md`; pcap and generated traffic have no real interface, so their
/// sources stamp the values they were configured with (0 by default, like
/// `BPF_PROG_TEST_RUN` without a context).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct PacketMeta {
    /// Capture or generation time, nanoseconds since the Unix epoch (pcap) or
    /// since the start of generation (generator).
    pub timestamp_ns: u64,
    /// Length of the packet on the wire. Larger than the captured data when a
    /// capture was cut at its snap length.
    pub orig_len: u32,
    /// `xdp_md.ingress_ifindex`.
    pub ingress_ifindex: u32,
    /// `xdp_md.rx_queue_index`.
    pub rx_queue: u32,
}
