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
