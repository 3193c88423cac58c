//! A loaded program and the options it was loaded with.

use crate::error::{Fault, LoadError};
use crate::helpers::HelperRegistry;
use crate::interp;
use crate::region::Region;
use crate::state::RunState;
use bpfjet_isa::Insn;
use std::any::Any;
use std::sync::Arc;

/// Evidence that a program was proven memory-safe, which is what allows it to
/// run on the unchecked fast path. Only obtainable through an `unsafe`
/// constructor: running an unproven program in verified mode lets it read and
/// write arbitrary host memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VerifiedProof(());

impl VerifiedProof {
    /// # Safety
    /// The program must have been accepted by bpfjet's verifier for the same
    /// map bindings, helpers and context layout it will run with, so that
    /// every memory access it makes is in bounds.
    pub unsafe fn assume_verified() -> Self {
        VerifiedProof(())
    }
}

/// How the interpreter treats the program's memory accesses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MemoryMode {
    /// Every load, store and atomic is checked against the known regions; an
    /// access outside them is [`Fault::OutOfBounds`] (`--unverified`).
    #[default]
    BoundsChecked,
    /// Raw loads and stores: the fast path for verified programs.
    Verified(VerifiedProof),
}

/// What a map index in an `lddw` (`BPF_PSEUDO_MAP_IDX[_VALUE]`) resolves to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapBinding {
    /// The value `lddw MapIdx` loads: the handle helpers receive as their map
    /// argument. Its meaning belongs to whoever implements the map helpers.
    pub handle: u64,
    /// The map's value memory, for `lddw MapIdxValue` (global data sections
    /// and other direct-value maps); it becomes a region in bounds-checked mode.
    pub value: Option<Region>,
    /// The read-only block behind the handle that a privileged program may
    /// read as the kernel's map struct (`bpfjet_maps::Map::handle`); it
    /// becomes a region in bounds-checked mode. `None` when the handle is
    /// not a runtime map's (the embedder's own helpers).
    pub view: Option<Region>,
}

/// Everything a program is bound to at load time.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    pub memory: MemoryMode,
    pub helpers: Arc<HelperRegistry>,
    pub kfuncs: Arc<HelperRegistry>,
    /// Indexed by the map index of `lddw MapIdx/MapIdxValue`.
    pub maps: Vec<MapBinding>,
}

impl LoadOptions {
    pub fn bounds_checked() -> Self {
        LoadOptions::default()
    }

    pub fn verified(proof: VerifiedProof) -> Self {
        LoadOptions {
            memory: MemoryMode::Verified(proof),
            ..LoadOptions::default()
        }
    }

    pub fn with_helpers(mut self, helpers: HelperRegistry) -> Self {
        self.helpers = Arc::new(helpers);
        self
    }

    pub fn with_kfuncs(mut self, kfuncs: HelperRegistry) -> Self {
        self.kfuncs = Arc::new(kfuncs);
        self
    }

    pub fn with_maps(mut self, maps: Vec<MapBinding>) -> Self {
        self.maps = maps;
        self
    }
}

/// The loaded form the interpreter executes.
#[derive(Clone, Debug)]
pub(crate) struct ProgramInner {
    /// One entry per slot; every `lddw` is resolved to `LdDwKind::Imm`.
    pub insns: Vec<Insn>,
    pub helpers: Arc<HelperRegistry>,
    pub kfuncs: Arc<HelperRegistry>,
    /// Map value areas the program addresses directly (bounds-checked mode).
    pub static_regions: Vec<Region>,
    /// Slots that begin a subprogram (0, local call targets, function
    /// pointers), sorted: the only slots a callback may start at.
    pub subprog_entries: Vec<usize>,
    pub bounds_checked: bool,
    /// This program itself (set by [`ProgramInner::shared`]): what a
    /// helper keeps to run the program's code later, a timer's callback.
    pub this: std::sync::Weak<ProgramInner>,
}

impl ProgramInner {
    /// Share the program, knowing itself ([`ProgramInner::this`]).
    pub(crate) fn shared(self) -> Arc<ProgramInner> {
        Arc::new_cyclic(|this| ProgramInner {
            this: this.clone(),
            ..self
        })
    }

    pub fn is_subprog_entry(&self, slot: usize) -> bool {
        self.subprog_entries.binary_search(&slot).is_ok()
    }
}

/// A program ready to run. Cheap to clone (shared), `Send + Sync`.
#[derive(Clone, Debug)]
pub struct Program {
    pub(crate) inner: Arc<ProgramInner>,
}

impl Program {
    /// Check and bind a typed program (slot form, as `decode_program` returns
    /// it). Programs built by hand are checked as strictly as decoded ones, so
    /// running a loaded program can fault but never panic.
    pub fn new(insns: Vec<Insn>, options: LoadOptions) -> Result<Program, LoadError> {
        crate::load::load(insns, options).map(|inner| Program {
            inner: inner.shared(),
        })
    }

    /// The instructions as loaded (map and function `lddw`s resolved to
    /// immediates).
    pub fn insns(&self) -> &[Insn] {
        &self.inner.insns
    }

    /// The helpers the program's helper calls are bound to (its type's set).
    pub fn helpers(&self) -> &Arc<HelperRegistry> {
        &self.inner.helpers
    }

    /// The kfuncs the program's kfunc calls are bound to (by call imm).
    pub fn kfuncs(&self) -> &Arc<HelperRegistry> {
        &self.inner.kfuncs
    }

    pub fn is_bounds_checked(&self) -> bool {
        self.inner.bounds_checked
    }

    /// Run from slot 0 with `args` in r1–r5 (missing ones are 0, extra ones
    /// ignored) and `user` as the opaque context helpers reach through
    /// [`crate::HelperCtx::user`]. Returns r0 at the final `exit`.
    pub fn run(
        &self,
        state: &mut RunState,
        user: &mut (dyn Any + 'static),
        args: &[u64],
    ) -> Result<u64, Fault> {
        let mut regs = [0u64; 5];
        for (reg, arg) in regs.iter_mut().zip(args) {
            *reg = *arg;
        }
        state.begin_run();
        let result = interp::run_entry(&self.inner, state, user, regs);
        state.end_run();
        result
    }

    /// Bracket a run of this program by another engine (the JIT) with the
    /// per-run bookkeeping [`Program::run`] does: run-time regions of the
    /// previous run are dropped and the tail-call count starts at zero.
    #[inline(always)]
    pub fn run_externally<R>(
        &self,
        state: &mut RunState,
        run: impl FnOnce(&mut RunState) -> R,
    ) -> R {
        state.begin_run();
        let result = run(state);
        state.end_run();
        result
    }

    /// The conformance-suite convention: r1 points to `mem` (0 when it is
    /// empty), r2 holds its length, and `mem` is a writable region for this
    /// run. The per-run context is `()`.
    pub fn run_on_memory(&self, state: &mut RunState, mem: &mut [u8]) -> Result<u64, Fault> {
        let (addr, len) = if mem.is_empty() {
            (0, 0)
        } else {
            (mem.as_mut_ptr() as u64, mem.len() as u64)
        };
        state.begin_run();
        if len != 0 {
            state.add_run_region(Region::writable(addr, len));
        }
        let result = interp::run_entry(&self.inner, state, &mut (), [addr, len, 0, 0, 0]);
        state.end_run();
        result
    }
}
