//! The per-thread shadow stack of hooked return addresses.
//!
//! A return probe replaces the return address on the stack with the return
//! trampoline and keeps the original here with the stack slot it came from.
//! Slots identify frames: the stack grows down, so a live outer call's slot
//! is above every inner call's. Frames abandoned by `longjmp` (or a signal
//! handler that never returns) are recognised by their slot lying at or
//! below a newer call's slot, and dropped.

/// Deepest nesting of hooked calls per thread; deeper calls run their entry
/// handler but not their return handler (counted as missed).
pub const DEPTH: usize = 1024;

/// `repr(C)`: the quick return trampoline pops frames in assembly
/// (`trampoline.rs`, offsets taken with `offset_of!`).
#[derive(Clone, Copy)]
#[repr(C)]
pub struct Frame {
    /// Address of the return-address slot on the thread's stack.
    pub slot: u64,
    pub ret: u64,
    pub probe: u64,
}

#[repr(C)]
pub struct Shadow {
    pub(crate) len: usize,
    pub(crate) frames: [Frame; DEPTH],
}

/// Runs `f` on this thread's shadow stack, if it has one (it is made at
/// the thread's first hooked call). Only the probe dispatchers call it,
/// never re-entrantly (they do not call each other).
pub fn with<R>(f: impl FnOnce(&mut Shadow) -> R) -> Option<R> {
    let t = crate::thread::current();
    // SAFETY: per-thread, and the dispatchers never nest their use.
    unsafe { crate::thread::existing_stacks(t) }.map(|s| f(&mut s.shadow))
}

impl Shadow {
    /// Records a hooked call whose return address is at `slot`; false when
    /// the stack is full.
    ///
    /// A frame at the same slot whose return address was already replaced
    /// by a trampoline is a tail call (`realloc(NULL, n)` ends in `jmp
    /// malloc`): the callee returns through the caller's slot, so both
    /// frames stay, chained as the kernel chains such uretprobes. The
    /// callee's frame returns into the trampoline, which then pops the
    /// caller's, innermost first. Any other frame at or below the slot
    /// belongs to a call that was abandoned (`longjmp`) and is dropped.
    pub fn push(&mut self, frame: Frame) -> bool {
        let chained = frame.ret == crate::trampoline::return_trampoline()
            || frame.ret == crate::trampoline::quick_return();
        while self.len > 0 {
            let top = self.frames[self.len - 1].slot;
            if top > frame.slot || (top == frame.slot && chained) {
                break;
            }
            self.len -= 1;
        }
        if self.len == DEPTH {
            return false;
        }
        self.frames[self.len] = frame;
        self.len += 1;
        true
    }

    /// The frame of a hooked call returning from `slot`, dropping frames
    /// abandoned below it.
    pub fn pop(&mut self, slot: u64) -> Option<Frame> {
        while self.len > 0 && self.frames[self.len - 1].slot < slot {
            self.len -= 1;
        }
        if self.len > 0 && self.frames[self.len - 1].slot == slot {
            self.len -= 1;
            return Some(self.frames[self.len]);
        }
        None
    }

    /// Removes every frame, innermost first, handing each to `f`.
    pub fn drain(&mut self, mut f: impl FnMut(&Frame)) {
        while self.len > 0 {
            self.len -= 1;
            f(&self.frames[self.len]);
        }
    }

    pub fn depth(&self) -> usize {
        self.len
    }
}
