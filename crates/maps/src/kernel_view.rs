//! The read-only block a program finds behind a map pointer.
//!
//! With CAP_PERFMON the kernel lets a program read the fields of the map's
//! own `struct bpf_map` (or of the map type's struct that embeds it first:
//! `struct bpf_array`, `struct bpf_htab`, ...) through the pointer `lddw`
//! of a map loads. Every `Map` therefore carries a block of
//! [`KERNEL_VIEW_BYTES`] bytes laid out like that kernel struct, and the
//! program-visible handle is the block's address ([`crate::Map::handle`]).
//! The layout comes from the kernel's BTF, which this crate does not read:
//! whoever hands out handles fills the block once
//! ([`crate::Map::init_kernel_view`]) before the first program sees it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

/// Size of the block: more than the largest map struct of Linux 6.18
/// (`struct bpf_htab`, 832 bytes). The verifier refuses reads past it.
pub const KERNEL_VIEW_BYTES: usize = 1024;

const WORDS: usize = KERNEL_VIEW_BYTES / 8;

/// The block itself. Words are atomics only so that the one-time fill
/// through `&self` is sound; programs read it with plain loads after the
/// fill has completed (it happens before any handle is handed out).
pub(crate) struct KernelView {
    words: [AtomicU64; WORDS],
    filled: Once,
}

impl KernelView {
    pub(crate) fn new() -> KernelView {
        KernelView {
            words: std::array::from_fn(|_| AtomicU64::new(0)),
            filled: Once::new(),
        }
    }

    /// Lay the block out once: `fill` writes the kernel struct's bytes into
    /// a zeroed buffer. Later calls do nothing.
    pub(crate) fn init(&self, fill: impl FnOnce(&mut [u8; KERNEL_VIEW_BYTES])) {
        self.filled.call_once(|| {
            let mut bytes = [0u8; KERNEL_VIEW_BYTES];
            fill(&mut bytes);
            for (word, chunk) in self.words.iter().zip(bytes.chunks_exact(8)) {
                let v = u64::from_ne_bytes(chunk.try_into().expect("8-byte chunk"));
                word.store(v, Ordering::Relaxed);
            }
        });
    }

    /// The block's contents (for tests and dumps).
    pub(crate) fn bytes(&self) -> Vec<u8> {
        self.words
            .iter()
            .flat_map(|w| w.load(Ordering::Relaxed).to_ne_bytes())
            .collect()
    }
}
