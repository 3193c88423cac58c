//! This process's file descriptors that hold bpfjet objects.

use crate::objects::Obj;
use std::collections::HashMap;
use std::sync::{PoisonError, RwLock};

#[derive(Default)]
pub struct FdTable {
    fds: RwLock<HashMap<i32, Obj>>,
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
        self.fds
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(fd, obj);
    }

    /// The fd is being closed: forget what it held.
    pub fn forget(&self, fd: i32) {
        let removed = self
            .fds
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&fd);
        // Dropped outside the lock: dropping an object may close files.
        drop(removed);
    }
}
