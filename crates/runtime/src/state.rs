//! Per-run scratch state, reusable across runs so that running a program does
//! not allocate: the call stack memory, the run-time region list, the budget
//! and tail-call counters.

use crate::error::Access;
use crate::program::Program;
use crate::region::Region;

/// Bytes of stack each frame gets (the kernel's `MAX_BPF_STACK`).
pub const STACK_SIZE: usize = 512;
/// Maximum number of frames, the entry frame included (the kernel's
/// `MAX_CALL_FRAMES`): the eighth nested call faults.
pub const MAX_CALL_DEPTH: usize = 8;
/// Kernel's `MAX_TAIL_CALL_CNT`: at most 33 tail calls succeed in one run.
pub const MAX_TAIL_CALLS: u32 = 33;
/// Distance between the tops of two consecutive frames. Each frame's 512
/// usable bytes sit at the top of its stride; the rest is an unmapped guard, so
/// that in bounds-checked mode an access just above a callee's r10 faults
/// instead of silently landing in its caller's frame.
pub const FRAME_STRIDE: usize = 2 * STACK_SIZE;

const STACK_WORDS: usize = MAX_CALL_DEPTH * FRAME_STRIDE / 8;

/// Scratch state for running programs. Create one per thread and reuse it.
pub struct RunState {
    /// Stack memory for all frames, `MAX_CALL_DEPTH * FRAME_STRIDE` bytes. Held
    /// as a raw pointer because the interpreter reaches it only through the
    /// addresses in r10, never through Rust references.
    stack: *mut u64,
    regions: Vec<Region>,
    /// Regions below this index outlive a run; the rest were registered during
    /// the current run (by the runner or by helpers) and are dropped at its end.
    persistent_regions: usize,
    budget: Option<u64>,
    pub(crate) steps_left: u64,
    pub(crate) tail_calls: u32,
    pub(crate) program_table: Vec<Option<Program>>,
}

// SAFETY: `stack` is an exclusively owned heap allocation, like a `Box`.
unsafe impl Send for RunState {}

impl Default for RunState {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for RunState {
    fn drop(&mut self) {
        // SAFETY: `stack` came from `Box::into_raw` of a slice of this length
        // in `new` and is freed only here.
        unsafe {
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.stack,
                STACK_WORDS,
            )));
        }
    }
}

impl RunState {
    pub fn new() -> Self {
        let stack = Box::into_raw(vec![0u64; STACK_WORDS].into_boxed_slice()) as *mut u64;
        RunState {
            stack,
            regions: Vec::new(),
            persistent_regions: 0,
            budget: None,
            steps_left: u64::MAX,
            tail_calls: 0,
            program_table: Vec::new(),
        }
    }

    /// Limit each run to `budget` executed instructions (callbacks and
    /// tail-called programs included); `None` means unlimited. Exhausting it is
    /// [`crate::Fault::BudgetExceeded`], which is how fuzzing ends infinite loops.
    pub fn set_insn_budget(&mut self, budget: Option<u64>) {
        self.budget = budget;
    }

    pub fn insn_budget(&self) -> Option<u64> {
        self.budget
    }

    /// Instructions executed by the last (or current) run.
    pub fn executed_insns(&self) -> u64 {
        self.budget.unwrap_or(u64::MAX) - self.steps_left
    }

    /// Tail calls taken by the last (or current) run.
    pub fn tail_calls(&self) -> u32 {
        self.tail_calls
    }

    /// Register a region that stays valid across runs (bounds-checked mode):
    /// e.g. a context structure or a map's storage.
    pub fn add_region(&mut self, region: Region) {
        self.regions.insert(self.persistent_regions, region);
        self.persistent_regions += 1;
    }

    /// Forget every region registered with [`RunState::add_region`].
    pub fn clear_regions(&mut self) {
        self.regions.clear();
        self.persistent_regions = 0;
    }

    pub fn regions(&self) -> &[Region] {
        &self.regions
    }

    /// The programs `HelperCtx::tail_call_index` can jump to, by index (the
    /// role of a `BPF_MAP_TYPE_PROG_ARRAY`).
    pub fn set_program_table(&mut self, programs: Vec<Option<Program>>) {
        self.program_table = programs;
    }

    /// The table [`RunState::set_program_table`] installed.
    pub fn program_table(&self) -> &[Option<Program>] {
        &self.program_table
    }

    /// Count a tail call about to be taken by an engine that performs tail
    /// calls itself (the JIT's native tail calls): `false`, and nothing
    /// counted, when this run already took [`MAX_TAIL_CALLS`].
    #[inline]
    pub fn try_count_tail_call(&mut self) -> bool {
        if self.tail_calls >= MAX_TAIL_CALLS {
            return false;
        }
        self.tail_calls += 1;
        true
    }

    /// Replace the first region equal to `old` (persistent or per-run) with
    /// `new`, or remove it when `new` is None.
    pub(crate) fn replace_region(&mut self, old: Region, new: Option<Region>) {
        let Some(i) = self.regions.iter().position(|r| *r == old) else {
            if let Some(new) = new {
                self.add_run_region(new);
            }
            return;
        };
        match new {
            Some(new) => self.regions[i] = new,
            None => {
                self.regions.remove(i);
                if i < self.persistent_regions {
                    self.persistent_regions -= 1;
                }
            }
        }
    }

    /// Register a region for the current run only.
    pub(crate) fn add_run_region(&mut self, region: Region) {
        if !self.regions[self.persistent_regions..].contains(&region) {
            self.regions.push(region);
        }
    }

    #[inline]
    pub(crate) fn begin_run(&mut self) {
        self.regions.truncate(self.persistent_regions);
        self.steps_left = self.budget.unwrap_or(u64::MAX);
        self.tail_calls = 0;
    }

    #[inline]
    pub(crate) fn end_run(&mut self) {
        self.regions.truncate(self.persistent_regions);
    }

    fn stack_base(&self) -> u64 {
        self.stack as u64
    }

    /// r10 of a frame at call depth `depth` (0 = the entry frame).
    pub(crate) fn frame_pointer(&self, depth: usize) -> u64 {
        self.stack_base() + ((MAX_CALL_DEPTH - depth.min(MAX_CALL_DEPTH - 1)) * FRAME_STRIDE) as u64
    }

    /// Whether the access lies within the usable 512 bytes of one live frame
    /// (frames at depths `0..=depth`).
    pub(crate) fn stack_permits(&self, depth: usize, addr: u64, size: u64) -> bool {
        let Some(offset) = addr.checked_sub(self.stack_base()) else {
            return false;
        };
        let stride = FRAME_STRIDE as u64;
        let slot = offset / stride;
        if slot >= MAX_CALL_DEPTH as u64 {
            return false;
        }
        // Slots are laid out from the deepest frame (slot 0) to the entry
        // frame (the last slot).
        let frame_depth = MAX_CALL_DEPTH as u64 - 1 - slot;
        let within = offset % stride;
        frame_depth <= depth as u64
            && within >= stride - STACK_SIZE as u64
            && size <= stride - within
    }

    /// The bounds-checked mode's access check, minus the program's own static
    /// regions (checked by the caller).
    pub(crate) fn permits(&self, depth: usize, addr: u64, size: u64, access: Access) -> bool {
        self.stack_permits(depth, addr, size)
            || self.regions.iter().any(|r| r.permits(addr, size, access))
    }
}
