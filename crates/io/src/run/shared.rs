//! One source feeding several workers.

use std::sync::{Arc, Mutex, PoisonError};

use crate::{IoError, PacketBatch, PacketSource};

/// A source shared by several workers, one batch per lock: how a single
/// pcap file feeds a pool. Batches go to whichever worker asks first, so
/// packet order across workers is not kept (within a batch it is).
#[derive(Debug)]
pub struct SharedSource<S> {
    inner: Arc<Mutex<S>>,
}

impl<S> Clone for SharedSource<S> {
    fn clone(&self) -> Self {
        SharedSource {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<S: PacketSource> SharedSource<S> {
    pub fn new(source: S) -> SharedSource<S> {
        SharedSource {
            inner: Arc::new(Mutex::new(source)),
        }
    }
}

impl<S: PacketSource> PacketSource for SharedSource<S> {
    fn next_batch(&mut self, batch: &mut PacketBatch) -> Result<usize, IoError> {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .next_batch(batch)
    }
}
