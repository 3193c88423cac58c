//! This process's file descriptors that hold bpfjet objects.

use crate::objects::Obj;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{PoisonError, RwLock};

/// fds are small distinct integers: one multiply hashes them (every map
/// operation looks its fd up here).
#[derive(Default)]
struct FdHasher(u64);

impl Hasher for FdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_i32(&mut self, fd: i32) {
        self.0 = u64::from(fd as u32).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

#[derive(Default)]
pub struct FdTable {
    fds: RwLock<HashMap<i32, Obj, BuildHasherDefault<FdHasher>>>,
}

impl FdTable {
    pub fn get(&self, fd: i32) -> Option<Obj> {
        self.fds
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&fd)
            .cloned()
    }

    pub fn insert(&self, fd: i32, obj: Obj) {
        let old = self
            .fds
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(fd, obj);
        drop(old);
    }

    /// The fd is being closed: forget what it held, returned to the caller
    /// (and dropped outside the lock: dropping an object may close files).
    pub fn forget(&self, fd: i32) -> Option<Obj> {
        self.fds
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&fd)
    }

    /// Whether any fd still holds an object matching `f`.
    pub fn any(&self, f: impl Fn(&Obj) -> bool) -> bool {
        self.fds
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .any(f)
    }

    /// Every fd in the table.
    pub fn all(&self) -> Vec<i32> {
        self.fds
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .copied()
            .collect()
    }
}
