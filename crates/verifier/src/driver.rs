//! The exploration: depth-first over paths, one abstract state per path,
//! forking at conditional jumps whose outcome is not known, with states
//! recorded at prune points so that a path reaching a point already covered
//! by an explored state stops there.
//!
//! Bookkeeping follows the kernel's idea: every recorded state (checkpoint)
//! counts the paths still being explored below it; only checkpoints whose
//! count dropped to zero (fully explored, hence proven safe) may prune. A
//! path that comes back to a checkpoint still being explored with an
//! identical state is an infinite loop.

use crate::cfg::Cfg;
use crate::env::VerifyEnv;
use crate::error::{VResult, VerifyError};
use crate::facts::{Facts, SubprogInfo};
use crate::frame::State;
use crate::liveness::{self, Liveness};
use crate::precision::{self, Demand, Hist, Loc, Note};
use crate::reg_state::{RegState, RegType};
use bpfjet_isa::{Insn, LdDwKind};
use bpfjet_maps::MapSpec;
use std::collections::{BTreeMap, HashMap};

/// The kernel's limit on pending branches.
const MAX_PENDING: usize = 8192;
/// Inside a loop a new state is recorded only after this many jumps or
/// instructions since the last one (the kernel's `is_state_visited`).
const LOOP_STATE_JMPS: u32 = 20;
const LOOP_STATE_INSNS: u32 = 100;
/// Kernel's `BPF_MAX_VAR_OFF`.
pub(crate) const MAX_VAR_OFF: i64 = 1 << 29;

/// What an instruction does to control flow.
pub(crate) enum Succ {
    Goto(usize),
    /// Continue at the first with the current state; explore the second too.
    Fork(usize, usize, State),
    /// Continue at the first with the current state; verify the second,
    /// with the given state, as a path of its own (no parent: a timer
    /// callback, `timer.rs`).
    Spawn(usize, usize, State),
    End,
}

struct Checkpoint {
    state: State,
    /// Call depth of `state` (kept when the state itself is dropped).
    depth: usize,
    parent: Option<usize>,
    branches: u32,
    hits: u32,
    misses: u32,
    /// The instructions from the parent checkpoint to this one.
    hist: Vec<Hist>,
    /// Some path below was pruned without precision marks to show for it
    /// (against a state still being explored, or against such a state):
    /// this state's marks stay incomplete until that loop's entry, the
    /// checkpoint named here, is fully explored and its deferred marks are
    /// propagated ([`Checkpoint::deferred`]); until then it prunes only
    /// states that agree on every scalar. The kernel scopes its exact
    /// comparisons the same way (`force_exact` while the state's loop
    /// entry has branches, `propagate_backedges` when its SCC is done).
    exact_until: Option<usize>,
    /// Paths pruned against this state (or against a state below it) while
    /// it was still being explored: when it is done, what its sources turned
    /// out to need precise is traced back along each of them.
    deferred: Vec<Deferred>,
    /// Hash of `state` as recorded (before any precision mark), to find a
    /// repeated state in a loop without comparing every state.
    hash: u64,
    /// Optimistic prunes against states below this one whose marks wait
    /// for it ([`Validation`]): checked when it is done.
    validations: Vec<Validation>,
    /// Validations waiting on this state's final marks: it is not evicted.
    pinned: u32,
}

/// A path pruned (optimistic run) by comparing on precision marks that
/// were not final yet: `source` covered `state` at `pc` with the marks it
/// had then. Once they are final the comparison is made again; if it no
/// longer holds, the optimistic run's pruning is unsound and the program
/// is verified again with exact comparisons.
struct Validation {
    source: usize,
    pc: usize,
    state: State,
}

/// A path pruned by an exact comparison against `source` whose precision
/// marks were not final yet: its history, to trace `source`'s marks through
/// once they are.
struct Deferred {
    source: usize,
    pc: usize,
    parent: Option<usize>,
    depth: usize,
    hist: Vec<Hist>,
}

/// Learned precision per prune point ([`Verifier::hints`]).
pub(crate) type Hints = BTreeMap<usize, Vec<(u16, u64)>>;

/// Adds `marks` (per frame: registers, slots) to the hint of `pc`.
pub(crate) fn add_hint(hints: &mut Hints, pc: usize, marks: &[(u16, u64)]) {
    let h = hints.entry(pc).or_default();
    if h.len() < marks.len() {
        h.resize(marks.len(), (0, 0));
    }
    for (a, b) in h.iter_mut().zip(marks) {
        a.0 |= b.0;
        a.1 |= b.1;
    }
}

fn state_hash(st: &State) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    st.hash(&mut h);
    h.finish()
}

/// Work done since the last checkpoint was recorded, counted over every
/// path as the kernel counts it (`insn_processed - prev_insn_processed`,
/// `jmps_processed - prev_jmps_processed`): a path popped after others were
/// explored records its next state early, where a per-path count would
/// leave whole stretches of a loop without a state to prune against.
#[derive(Clone, Copy, Default)]
struct SinceState {
    insns: u32,
    jmps: u32,
}

struct Path {
    pc: usize,
    state: State,
    parent: Option<usize>,
    /// The instructions since the parent checkpoint.
    hist: Vec<Hist>,
}

pub(crate) struct Verifier<'a> {
    pub insns: &'a [Insn],
    /// Malformed slots (placeholders in `insns`): refused when reached.
    invalid: &'a BTreeMap<usize, VerifyError>,
    pub env: &'a VerifyEnv<'a>,
    /// The program's maps followed by the inner-map templates of map-in-maps.
    pub maps: Vec<MapSpec>,
    /// For map-in-map entries of `maps`: the index of their inner template.
    pub inner_of: Vec<Option<u32>>,
    pub cfg: Cfg,
    pub live: Liveness,
    pub facts: Facts,
    pub next_id: u32,
    pub stack_depth: Vec<u32>,
    /// Lookups whose key differed between paths.
    pub key_conflict: Vec<usize>,
    checkpoints: Vec<Checkpoint>,
    at_pc: HashMap<usize, Vec<usize>>,
    processed: u64,
    /// Instructions and jumps processed (over all paths) since a state was
    /// last recorded.
    since_state: SinceState,
    /// Set by the `exit` of a callback, which goes back to its call: the
    /// caller's imprecise scalars are widened against the previous
    /// iteration's before the call is visited ([`Verifier::widen_after_callback`]).
    pub(crate) callback_returned: bool,
    /// Set by an iterator's `next` that forked: the queued (active) path
    /// is widened before it is pushed ([`Verifier::widen_queued`]).
    pub(crate) iter_queued: bool,
    /// Precision tracking is on (privileged policy); otherwise every scalar
    /// is compared exactly, as the kernel does without CAP_BPF.
    precision: bool,
    /// Fully explored states whose marks still wait for a loop entry prune
    /// on those marks, each such prune checked again when they are final
    /// ([`Validation`]); otherwise they prune only exact matches.
    optimistic: bool,
    /// Per prune point, scalars such states compare as if precise in an
    /// optimistic run: the final marks of the sources of earlier runs'
    /// optimistic prunes there that did not hold.
    hints: &'a Hints,
    /// This run's optimistic prunes that did not hold with final marks:
    /// their prune points and their sources' final marks.
    pub failed: Hints,
    /// Scalars (before the current instruction) whose value a decision of
    /// the current instruction depended on.
    demands: Vec<Loc>,
    /// What the current instruction did that its history entry must keep.
    pub note: Note,
    /// Program-local struct types met so far (`graph`).
    pub local_types: HashMap<u32, bpfjet_obj::LocalType>,
    /// Global subprograms (entry slots) whose body a call has already
    /// spawned as a path of its own (`global_func.rs`): verified once.
    pub globals_spawned: std::collections::HashSet<usize>,
}

impl<'a> Verifier<'a> {
    pub fn new(
        insns: &'a [Insn],
        invalid: &'a BTreeMap<usize, VerifyError>,
        env: &'a VerifyEnv<'a>,
        cfg: Cfg,
        optimistic: bool,
        hints: &'a Hints,
    ) -> Self {
        let mut maps: Vec<MapSpec> = env.maps.to_vec();
        let mut inner_of = vec![None; maps.len()];
        for i in crate::env::template_owners(env.maps) {
            if let Some(inner) = &env.maps[i].inner {
                inner_of[i] = Some(maps.len() as u32);
                maps.push((**inner).clone());
                inner_of.push(None);
            }
        }
        let live = liveness::compute(insns, &cfg, env.privileged());
        let n = cfg.entries.len();
        Verifier {
            insns,
            invalid,
            env,
            maps,
            inner_of,
            cfg,
            live,
            facts: Facts::default(),
            next_id: 0,
            stack_depth: vec![0; n],
            key_conflict: Vec::new(),
            checkpoints: Vec::new(),
            at_pc: HashMap::new(),
            processed: 0,
            since_state: SinceState::default(),
            callback_returned: false,
            iter_queued: false,
            precision: env.privileged(),
            optimistic: optimistic && env.privileged(),
            hints,
            failed: Hints::new(),
            demands: Vec::new(),
            note: Note::None,
            local_types: HashMap::new(),
            globals_spawned: std::collections::HashSet::new(),
        }
    }

    pub fn fresh_id(&mut self) -> u32 {
        self.next_id += 1;
        self.next_id
    }

    /// The value of scalar register `r` (current frame, before the current
    /// instruction) decides something: it must be precise.
    pub fn need_reg(&mut self, st: &State, r: u8) {
        if self.precision && st.reg(r).is_scalar() {
            self.demands.push(Loc::Reg {
                frame: st.depth() as u8,
                reg: r,
            });
        }
    }

    /// The register spilled in `slot` of `frame` decides something.
    pub fn need_slot(&mut self, frame: usize, slot: usize) {
        if self.precision {
            self.demands.push(Loc::Slot {
                frame: frame as u8,
                slot: slot as u8,
            });
        }
    }

    pub fn map(&self, idx: u32) -> Option<&MapSpec> {
        self.maps.get(idx as usize)
    }

    /// Record that the subprogram whose frame is `frame` used stack down to `depth`.
    pub fn note_stack(&mut self, st: &State, frame: usize, depth: i64) {
        let entry = st.frames.get(frame).map_or(0, |f| f.entry);
        let idx = self.cfg.subprog_of(entry);
        let d = depth.clamp(0, 512) as u32;
        if let Some(s) = self.stack_depth.get_mut(idx) {
            *s = (*s).max(d);
        }
    }

    fn decorate(&self, mut e: VerifyError, pc: usize, st: &State) -> VerifyError {
        if e.pc.is_none() {
            e.pc = Some(pc);
        }
        if e.insn_text.is_empty() {
            if let Some(insn) = self.insns.get(pc) {
                e.insn_text = bpfjet_isa::disasm::format_insn_with(insn, Some(pc), &|id| {
                    crate::proto::helper_name(id)
                });
            }
        }
        if e.line.is_none() {
            e.line = self
                .env
                .line_info
                .and_then(|li| li.range(..=pc).next_back().map(|(_, l)| l.clone()));
        }
        if e.state.is_empty() {
            e.state = st.describe();
        }
        e
    }

    /// Explores the program. An optimistic run also returns the prune
    /// points whose optimistic prunes failed: its verdict stands only when
    /// there are none.
    pub fn run(mut self) -> (Result<Facts, VerifyError>, Hints) {
        let verdict = self.explore();
        if verdict.is_err() && self.optimistic {
            self.sweep_validations();
        }
        (verdict, std::mem::take(&mut self.failed))
    }

    /// The run stopped with prunes still waiting for final marks: those
    /// that already fail on the marks their sources have now fail on the
    /// final ones too (marks only grow, and each one only makes a
    /// comparison stricter), so the next run learns from them as well.
    fn sweep_validations(&mut self) {
        for c in 0..self.checkpoints.len() {
            for v in std::mem::take(&mut self.checkpoints[c].validations) {
                self.check_validation(&v);
            }
        }
    }

    /// Compares recorded prune `v` again on its source's marks as they are
    /// now; if the source no longer covers the pruned state, the prune
    /// point learns the source's marks for the next run.
    fn check_validation(&mut self, v: &Validation) {
        let src = &self.checkpoints[v.source].state;
        let allow_uninit = self.env.privileged();
        if !crate::pruning::covers(src, &v.state, &self.live, v.pc, allow_uninit, false) {
            let marks = precision::marks_of(src);
            add_hint(&mut self.failed, v.pc, &marks);
        }
    }

    fn explore(&mut self) -> Result<Facts, VerifyError> {
        let mut work = vec![Path {
            pc: 0,
            state: State::new_entry(),
            parent: None,
            hist: Vec::new(),
        }];
        while let Some(mut path) = work.pop() {
            loop {
                let pc = path.pc;
                if self.cfg.prune_point.get(pc).copied().unwrap_or(false) {
                    match self.visit(&mut path) {
                        Ok(true) => {}
                        Ok(false) => {
                            self.end_path(path.parent);
                            break;
                        }
                        Err(e) => return Err(self.decorate(e, pc, &path.state)),
                    }
                }
                self.processed += 1;
                self.since_state.insns += 1;
                if matches!(
                    self.insns[pc],
                    Insn::Jmp { .. }
                        | Insn::Ja { .. }
                        | Insn::MayGoto { .. }
                        | Insn::Call(_)
                        | Insn::Exit
                ) {
                    self.since_state.jmps += 1;
                }
                if self.processed > self.env.complexity_limit {
                    let e = VerifyError::new(
                        "too_complex",
                        format!(
                            "program is too complex: processed {} instructions (limit {}); \
                             a loop may not terminate or has too many iterations",
                            self.processed, self.env.complexity_limit
                        ),
                    );
                    return Err(self.decorate(e, pc, &path.state));
                }
                let depth = path.state.depth();
                let step = self.step(pc, &mut path.state);
                if step.is_ok() {
                    self.record(&mut path, pc, depth);
                }
                match step {
                    Err(e) => return Err(self.decorate(e, pc, &path.state)),
                    Ok(Succ::Goto(next)) => {
                        path.pc = next;
                        if std::mem::take(&mut self.callback_returned) {
                            self.widen_after_callback(&mut path);
                        }
                    }
                    Ok(Succ::Fork(next, other, mut other_state)) => {
                        if std::mem::take(&mut self.iter_queued) {
                            self.widen_queued(path.parent, pc, &mut other_state);
                        }
                        if let Some(p) = path.parent {
                            self.checkpoints[p].branches += 1;
                        }
                        self.check_pending(work.len(), pc, &path.state)?;
                        work.push(Path {
                            pc: other,
                            state: other_state,
                            parent: path.parent,
                            hist: path.hist.clone(),
                        });
                        path.pc = next;
                    }
                    Ok(Succ::Spawn(next, entry, callback)) => {
                        self.check_pending(work.len(), pc, &path.state)?;
                        work.push(Path {
                            pc: entry,
                            state: callback,
                            parent: None,
                            hist: Vec::new(),
                        });
                        path.pc = next;
                    }
                    Ok(Succ::End) => {
                        self.end_path(path.parent);
                        break;
                    }
                }
            }
        }
        self.finish()
    }

    /// One more pending path would exceed the kernel's bound on them.
    fn check_pending(&self, pending: usize, pc: usize, state: &State) -> Result<(), VerifyError> {
        if pending < MAX_PENDING {
            return Ok(());
        }
        let e = VerifyError::new(
            "too_complex",
            format!(
                "the sequence of {} pending branches is too complex",
                pending + 1
            ),
        );
        Err(self.decorate(e, pc, state))
    }

    /// After the instruction at `pc` (executed at call depth `depth`):
    /// trace what its decisions demanded back through the path, then add
    /// it to the path's history.
    fn record(&mut self, path: &mut Path, pc: usize, depth: usize) {
        let note = std::mem::take(&mut self.note);
        if !self.precision {
            self.demands.clear();
            return;
        }
        if !self.demands.is_empty() {
            let mut d = Demand::default();
            for loc in self.demands.drain(..) {
                d.add(loc);
            }
            self.backtrack(&path.hist, path.parent, depth, d);
        }
        path.hist.push(Hist {
            pc: pc as u32,
            depth: depth as u8,
            note,
        });
    }

    /// Walk demand `d` (on the state at the end of `hist`, at call depth
    /// `depth`) back through `hist` and the checkpoints above `parent`,
    /// marking the demanded scalars precise in every checkpoint on the way.
    fn backtrack(&mut self, hist: &[Hist], parent: Option<usize>, depth: usize, mut d: Demand) {
        let mut depth_after = depth;
        let walk = |hist: &[Hist], depth_after: &mut usize, d: &mut Demand| {
            for h in hist.iter().rev() {
                precision::undo(self.insns, h, *depth_after, d)?;
                *depth_after = h.depth as usize;
                if d.is_empty() {
                    break;
                }
            }
            Ok::<(), precision::Unexplained>(())
        };
        if walk(hist, &mut depth_after, &mut d).is_err() {
            return self.mark_chain_all(parent);
        }
        let mut cur = parent;
        while let Some(c) = cur {
            if d.is_empty() {
                return;
            }
            let cp = &mut self.checkpoints[c];
            if !cp.state.frames.is_empty() && precision::mark_state(&mut cp.state, &mut d).is_err()
            {
                return self.mark_chain_all(Some(c));
            }
            if d.is_empty() {
                return;
            }
            let hist = std::mem::take(&mut cp.hist);
            let mut depth_after = cp.depth;
            let res = walk(&hist, &mut depth_after, &mut d);
            let cp = &mut self.checkpoints[c];
            cp.hist = hist;
            let up = cp.parent;
            if res.is_err() {
                return self.mark_chain_all(up);
            }
            cur = up;
        }
    }

    /// The fallback when the history cannot explain a demand: every scalar
    /// of every checkpoint from `from` up is precise.
    fn mark_chain_all(&mut self, mut from: Option<usize>) {
        while let Some(c) = from {
            precision::mark_all(&mut self.checkpoints[c].state);
            from = self.checkpoints[c].parent;
        }
    }

    fn end_path(&mut self, mut parent: Option<usize>) {
        while let Some(p) = parent {
            let cp = &mut self.checkpoints[p];
            cp.branches = cp.branches.saturating_sub(1);
            if cp.branches > 0 {
                break;
            }
            if !cp.deferred.is_empty() {
                self.propagate_deferred(p);
            }
            if !self.checkpoints[p].validations.is_empty() {
                self.validate(p);
            }
            parent = self.checkpoints[p].parent;
        }
    }

    /// Checkpoint `entry` is fully explored: the paths pruned exactly
    /// against it (or against states below it) while it was not get the
    /// precision marks of their sources, traced back through their own
    /// history (which marks every checkpoint above them, `entry` and its
    /// ancestors included). Marks added to a source change what it demands,
    /// so this repeats until no source's demand changes (the kernel's
    /// `propagate_backedges`).
    fn propagate_deferred(&mut self, entry: usize) {
        let items = std::mem::take(&mut self.checkpoints[entry].deferred);
        let mut seen: Vec<Option<Demand>> = vec![None; items.len()];
        loop {
            let mut changed = false;
            for (item, last) in items.iter().zip(seen.iter_mut()) {
                let src = &self.checkpoints[item.source].state;
                if src.frames.is_empty() {
                    // Evicted: its marks are gone, assume every scalar mattered.
                    if last.is_none() {
                        *last = Some(Demand::default());
                        self.mark_chain_all(item.parent);
                        changed = true;
                    }
                    continue;
                }
                let d = precision::precise_of(src, |f| self.live_of(&src.frames, item.pc, f));
                if last.as_ref() == Some(&d) {
                    continue;
                }
                *last = Some(d.clone());
                changed = true;
                if !d.is_empty() {
                    self.backtrack(&item.hist, item.parent, item.depth, d);
                }
            }
            if !changed {
                break;
            }
        }
        // A source (or the entry itself) whose marks still wait for an
        // outer loop entry may gain marks when that one is done; the
        // states between these paths and `entry` then need them too: they
        // keep comparing exactly, and the paths are traced again, until
        // the outer entry is done.
        let outer = std::iter::once(entry)
            .chain(items.iter().map(|it| it.source))
            .filter_map(|c| self.exact_pending(&self.checkpoints[c]))
            .min();
        if let Some(outer) = outer {
            for item in &items {
                let mut up = item.parent;
                while let Some(a) = up {
                    if a == entry {
                        break;
                    }
                    let until = self.exact_pending(&self.checkpoints[a]);
                    self.checkpoints[a].exact_until = Some(until.map_or(outer, |u| u.min(outer)));
                    up = self.checkpoints[a].parent;
                }
            }
            self.checkpoints[outer].deferred.extend(items);
        }
    }

    /// Live registers and slots of frame `f` of a state at `pc` whose
    /// frames are `frames` (the innermost one is at `pc`, the others wait
    /// for a call to return).
    fn live_of(&self, frames: &[crate::frame::Frame], pc: usize, f: usize) -> (u16, u64) {
        if f + 1 == frames.len() {
            (
                self.live.regs.get(pc).copied().unwrap_or(u16::MAX),
                self.live.slots.get(pc).copied().unwrap_or(u64::MAX),
            )
        } else {
            self.live.at_return(frames[f + 1].callsite)
        }
    }

    /// Checkpoint `entry` is done and its deferred marks propagated: each
    /// optimistic prune waiting for it is compared again on its source's
    /// marks, now final, or passed on to the outer loop entry the source's
    /// (or `entry`'s) marks still wait for.
    fn validate(&mut self, entry: usize) {
        for v in std::mem::take(&mut self.checkpoints[entry].validations) {
            let pending = self
                .exact_pending(&self.checkpoints[v.source])
                .or_else(|| self.exact_pending(&self.checkpoints[entry]));
            if let Some(outer) = pending {
                self.checkpoints[outer].validations.push(v);
                continue;
            }
            self.check_validation(&v);
            self.checkpoints[v.source].pinned -= 1;
        }
    }

    /// The loop entry whose exploration `cp`'s precision marks still wait
    /// for, if any.
    fn exact_pending(&self, cp: &Checkpoint) -> Option<usize> {
        cp.exact_until.filter(|&e| self.checkpoints[e].branches > 0)
    }

    /// Back at the call after a callback's iteration: the caller's scalars
    /// that no decision has needed precise and that changed since the
    /// previous iteration (the nearest state recorded at this call on the
    /// path, in the same frames) become unknown, so that a counter kept
    /// by the callback (`ctx->n++`) converges instead of being verified
    /// once per value. The kernel's `widen_imprecise_scalars` in
    /// `prepare_func_exit` ("widening for callback iterators"). Only
    /// information is lost: sound whatever the marks turn out to be.
    fn widen_after_callback(&mut self, path: &mut Path) {
        let iterations = path.state.cur().callback_depth;
        if let Some(prev) = self.prev_entry(path.parent, path.pc, &path.state) {
            self.widen_against(prev, &mut path.state, iterations);
        }
    }

    /// The active path an iterator's `next` queued (`queued`, at `pc + 1`),
    /// or the fall-through path of a `may_goto`: widened against the state
    /// at the same instruction one iteration earlier, the nearest recorded
    /// there above `parent` (the state recorded at this very instruction),
    /// as the kernel's `process_iter_next_call` and its `may_goto` branch
    /// of `check_cond_jmp_op` do.
    fn widen_queued(&mut self, parent: Option<usize>, pc: usize, queued: &mut State) {
        let above = parent.and_then(|p| {
            let here = self.at_pc.get(&pc).is_some_and(|l| l.contains(&p));
            if here {
                self.checkpoints[p].parent
            } else {
                Some(p)
            }
        });
        let iterations = if matches!(self.insns[pc], Insn::MayGoto { .. }) {
            queued.may_goto_depth
        } else {
            iter_depth(queued).unwrap_or(u32::MAX)
        };
        if let Some(prev) = self.prev_entry(above, pc, queued) {
            self.widen_against(prev, queued, iterations);
        }
    }

    /// The nearest checkpoint at `pc` among `from` and its ancestors whose
    /// frames are `st`'s (the kernel's `find_prev_entry`).
    fn prev_entry(&self, from: Option<usize>, pc: usize, st: &State) -> Option<usize> {
        let here = self.at_pc.get(&pc)?;
        let same_frames = |old: &State| {
            old.frames.len() == st.frames.len()
                && old
                    .frames
                    .iter()
                    .zip(&st.frames)
                    .all(|(a, b)| a.callsite == b.callsite && a.entry == b.entry)
        };
        let mut up = from;
        while let Some(a) = up {
            let cp = &self.checkpoints[a];
            if here.contains(&a) && same_frames(&cp.state) {
                return Some(a);
            }
            up = cp.parent;
        }
        None
    }

    /// Widens `st`'s imprecise scalars that differ from checkpoint
    /// `prev`'s. Without precision tracking (the unprivileged policy) no
    /// scalar is known to be imprecise: a counter the loop compares could
    /// be widened where the kernel keeps it exact, so there the first
    /// [`UNPRIVILEGED_WIDEN_AFTER`] `iterations` are followed exactly, as
    /// the kernel follows a precise counter.
    fn widen_against(&self, prev: usize, st: &mut State, iterations: u32) {
        if !self.precision && iterations < UNPRIVILEGED_WIDEN_AFTER {
            return;
        }
        let old = &self.checkpoints[prev].state;
        let mut ids = Vec::new();
        let mut widen = |o: &RegState, c: &mut RegState| widen_scalar(o, c, &mut ids);
        for (of, cf) in old.frames.iter().zip(st.frames.iter_mut()) {
            for (o, c) in of.regs.iter().zip(cf.regs.iter_mut()) {
                widen(o, c);
            }
            for i in 0..of.stack.slots.len().min(cf.stack.slots.len()) {
                if let (Some(o), Some(c)) = (&of.stack.slots[i].spill, &mut cf.stack.slots[i].spill)
                {
                    widen(o, c);
                }
            }
        }
    }

    /// Whether `pc` calls `bpf_iter_num_next` on an iterator that is not
    /// active in `st`.
    fn drained_iter_at(&self, pc: usize, st: &State) -> bool {
        let Insn::Call(bpfjet_isa::CallTarget::Kfunc(idx)) = self.insns[pc] else {
            return false;
        };
        let is_next = usize::try_from(idx)
            .ok()
            .and_then(|i| self.env.kfuncs.get(i))
            .is_some_and(|n| {
                crate::iter::IterKfunc::from_name(n) == Some(crate::iter::IterKfunc::Next)
            });
        if !is_next {
            return false;
        }
        let Ok((frame, off)) = crate::iter::iter_slot(st, crate::iter::IterKfunc::Next) else {
            return true;
        };
        !st.frames[frame]
            .stack
            .iter_at(off)
            .is_some_and(|it| matches!(it.ty, RegType::IterNum { active: true }))
    }

    /// At a prune point: `Ok(false)` to stop the path (covered by an
    /// explored state), otherwise continue, maybe under a new checkpoint.
    fn visit(&mut self, path: &mut Path) -> VResult<bool> {
        let pc = path.pc;
        let allow_uninit = self.env.privileged();
        // Like the kernel, record a new state only after a few instructions
        // and jumps since the last one (always at subprogram entries and at
        // calls that run a callback, where iterations converge).
        let calls_callback = self.cfg.calls_callback[pc];
        // A `may_goto` is a forced checkpoint too, where its loop converges.
        let may_goto = matches!(self.insns[pc], Insn::MayGoto { .. });
        let forced = self.cfg.is_entry(pc) || calls_callback || may_goto;
        // An iterator's `next` whose iterator is drained returns NULL and
        // loops no more: only an explored state may prune it (the kernel
        // takes an earlier iteration as converged only for an active one).
        let drained_iter = calls_callback && self.drained_iter_at(pc, &path.state);
        let since = self.since_state;
        let mut add_new = forced || since.insns >= 8 && since.jmps >= 2;
        // The kernel's rule inside loops (`is_state_visited`, "avoid adding
        // new state too often"): while a state recorded here is still being
        // explored, the path is going round a loop whose iterations differ,
        // so a new state is recorded only every 20 jumps or 100 instructions.
        // Fewer states per iteration also means fewer misses charged to the
        // explored states here, which keeps the ones that prune other paths.
        if add_new
            && !forced
            && since.jmps < LOOP_STATE_JMPS
            && since.insns < LOOP_STATE_INSNS
            && self
                .at_pc
                .get(&pc)
                .is_some_and(|list| list.iter().any(|&c| self.checkpoints[c].branches > 0))
        {
            add_new = false;
        }
        let mut evict = Vec::new();
        let mut covered_by = None;
        let mut cur_hash = None;
        if let Some(list) = self.at_pc.get(&pc) {
            for &c in list {
                let cp = &self.checkpoints[c];
                let done = cp.branches == 0;
                // At a call that runs a callback, a state still being
                // explored is one before an earlier iteration on this path:
                // when it covers the state after this iteration, every
                // scalar within its range, the iterations have converged
                // (the kernel's `calls_callback` case of `is_state_visited`,
                // compared `RANGE_WITHIN`).
                // At a `may_goto`, a state still being explored covers one
                // that went round the loop (a different `may_goto_depth`)
                // the same way: the kernel's `is_may_goto_insn_at` case.
                let converges = calls_callback && !drained_iter
                    || may_goto && cp.state.may_goto_depth != path.state.may_goto_depth;
                if done || converges {
                    // A state still being explored has incomplete precision
                    // marks: only an exact match may stop the path there.
                    let pending = self.exact_pending(cp).is_some();
                    let exact = !self.precision || !done || !self.optimistic && pending;
                    let hint = match self.hints.get(&pc) {
                        Some(h) if pending => &h[..],
                        _ => &[],
                    };
                    if crate::pruning::covers_with(
                        &cp.state,
                        &path.state,
                        &self.live,
                        pc,
                        allow_uninit,
                        exact,
                        hint,
                    ) {
                        covered_by = Some(c);
                        break;
                    }
                }
                if !done
                    && !calls_callback
                    && self.cfg.loop_head[pc]
                    && cp.hash == *cur_hash.get_or_insert_with(|| state_hash(&path.state))
                    && crate::pruning::same_loop_state(&cp.state, &path.state)
                {
                    return crate::error::err(
                        "infinite_loop",
                        format!("infinite loop detected at insn {pc}: the state repeats"),
                    );
                }
                // States that keep failing to match stop being compared (the
                // kernel's miss counting; they stay in the bookkeeping). A
                // miss counts only when a new state is added here, so that a
                // loop's iterations do not push out the states of other paths
                // before they can prune. At a call that runs a callback,
                // states are kept longer (the kernel keeps its forced
                // checkpoints still being explored for 64): iterations
                // converge against the one before them, and the paths after
                // the call, one per iteration count that did not converge,
                // are pruned there against each other, so the states of
                // other iterations of an outer loop must not push them out.
                let cp = &mut self.checkpoints[c];
                if add_new {
                    cp.misses += 1;
                    let n = if calls_callback || may_goto { 64 } else { 3 };
                    if cp.misses > cp.hits * n + n && cp.pinned == 0 {
                        evict.push(c);
                    }
                }
            }
        }
        if !evict.is_empty() {
            if let Some(list) = self.at_pc.get_mut(&pc) {
                list.retain(|c| !evict.contains(c));
            }
            for c in evict {
                // Only the counters and the history are needed from now on.
                self.checkpoints[c].state = State {
                    frames: Vec::new(),
                    refs: Vec::new(),
                    lock: None,
                    may_goto_depth: 0,
                    async_callback: false,
                    global_body: false,
                };
            }
        }
        if let Some(c) = covered_by {
            self.checkpoints[c].hits += 1;
            if !self.precision {
                return Ok(false);
            }
            let pending = if self.checkpoints[c].branches > 0 {
                Some(c)
            } else {
                self.exact_pending(&self.checkpoints[c])
            };
            if let Some(entry) = pending {
                if self.optimistic && self.checkpoints[c].branches == 0 {
                    // Compared on marks that may still grow: compare again
                    // when they are final.
                    self.checkpoints[c].pinned += 1;
                    self.checkpoints[entry].validations.push(Validation {
                        source: c,
                        pc,
                        state: path.state.clone(),
                    });
                }
                // The path's future is the explored state's, whose marks are
                // not final before `entry` (a state still being explored,
                // hence an ancestor of the path) is done: the states between
                // the path and `entry` compare exactly until then, and the
                // marks follow the path back when they are final.
                let mut up = path.parent;
                while let Some(a) = up {
                    if a == entry {
                        break;
                    }
                    let until = self.exact_pending(&self.checkpoints[a]);
                    // Both in progress, so both on the current chain: the
                    // older one (lower id) is done last.
                    self.checkpoints[a].exact_until = Some(until.map_or(entry, |u| u.min(entry)));
                    up = self.checkpoints[a].parent;
                }
                let hist = std::mem::take(&mut path.hist);
                self.checkpoints[entry].deferred.push(Deferred {
                    source: c,
                    pc,
                    parent: path.parent,
                    depth: path.state.depth(),
                    hist,
                });
            } else {
                // What was precise for the explored state is precise for
                // this path too.
                let old = &self.checkpoints[c].state;
                let d = precision::precise_of(old, |f| self.live_of(&old.frames, pc, f));
                if !d.is_empty() {
                    let hist = std::mem::take(&mut path.hist);
                    self.backtrack(&hist, path.parent, path.state.depth(), d);
                    path.hist = hist;
                }
            }
            return Ok(false);
        }
        if !add_new {
            return Ok(true);
        }
        let id = self.checkpoints.len();
        self.checkpoints.push(Checkpoint {
            state: path.state.clone(),
            depth: path.state.depth(),
            parent: path.parent,
            branches: 1,
            hits: 0,
            misses: 0,
            hist: std::mem::take(&mut path.hist),
            exact_until: None,
            deferred: Vec::new(),
            hash: cur_hash.unwrap_or_else(|| state_hash(&path.state)),
            validations: Vec::new(),
            pinned: 0,
        });
        self.at_pc.entry(pc).or_default().push(id);
        self.facts.states_stored += 1;
        path.parent = Some(id);
        self.since_state = SinceState::default();
        Ok(true)
    }

    fn finish(&mut self) -> Result<Facts, VerifyError> {
        // Combined stack of every call chain (kernel: frames rounded to 32 bytes).
        let n = self.cfg.entries.len();
        let rounded: Vec<u32> = self
            .stack_depth
            .iter()
            .map(|&d| d.max(1).div_ceil(32) * 32)
            .collect();
        // The deepest call chain below subprogram `v`, entered at call
        // depth `depth` (1: the program): its frames and its combined
        // stack, static as the kernel's `check_max_stack_depth` — a chain
        // through a global function counts whole, though its body was
        // explored from its own start.
        fn deepest(v: usize, calls: &[Vec<usize>], rounded: &[u32], depth: usize) -> (usize, u32) {
            if depth > crate::frame::MAX_FRAMES {
                return (depth, 0);
            }
            let (frames, below) = calls[v]
                .iter()
                .map(|&w| deepest(w, calls, rounded, depth + 1))
                .fold((depth, 0), |(f, b), (wf, wb)| (f.max(wf), b.max(wb)));
            (frames, rounded[v] + below)
        }
        let (chain, total) = deepest(0, &self.cfg.calls, &rounded, 1);
        if chain > crate::frame::MAX_FRAMES {
            return Err(VerifyError::new(
                "call_too_deep",
                format!("the call stack of {chain} frames is too deep"),
            ));
        }
        if n > 1 && total > 512 {
            return Err(VerifyError::new(
                "stack_too_deep",
                format!(
                    "combined stack size of the call chain is {total} bytes; too large (max 512)"
                ),
            ));
        }
        for pc in std::mem::take(&mut self.key_conflict) {
            if let Some(k) = self.facts.const_key_lookups.get_mut(&pc) {
                k.key = None;
            }
        }
        self.facts.subprogs = self
            .cfg
            .entries
            .iter()
            .zip(&self.stack_depth)
            .map(|(&entry, &stack_depth)| SubprogInfo { entry, stack_depth })
            .collect();
        self.facts.insns_processed = self.processed;
        Ok(std::mem::take(&mut self.facts))
    }

    /// Abstractly execute the instruction at `pc`.
    fn step(&mut self, pc: usize, st: &mut State) -> VResult<Succ> {
        // The kernel checks these fields when its walk reaches the slot.
        if let Some(e) = self.invalid.get(&pc) {
            return Err(e.clone());
        }
        let insn = self.insns[pc];
        match insn {
            Insn::Alu {
                width,
                op,
                dst,
                src,
            } => {
                self.check_alu(st, width, op, dst, src)?;
                Ok(Succ::Goto(pc + 1))
            }
            Insn::Endian { order, bits, dst } => {
                self.check_endian(st, order, bits, dst)?;
                Ok(Succ::Goto(pc + 1))
            }
            Insn::LdDw { kind, dst, imm } => {
                self.check_lddw(st, pc, kind, dst, imm)?;
                Ok(Succ::Goto(pc + 2))
            }
            Insn::LdDwTail => {
                crate::error::err("bad_insn", "execution reached the second slot of an lddw")
            }
            Insn::LdPacket { .. } => crate::error::err(
                "ld_abs",
                "BPF_LD_[ABS|IND] instructions are not allowed for XDP programs",
            ),
            Insn::Load {
                size,
                sign_extend,
                dst,
                src,
                off,
            } => {
                self.check_load(st, pc, size.bytes(), sign_extend, dst, src, off)?;
                Ok(Succ::Goto(pc + 1))
            }
            Insn::Store {
                size,
                dst,
                off,
                src,
            } => {
                self.check_store(st, pc, size.bytes(), dst, off, src)?;
                Ok(Succ::Goto(pc + 1))
            }
            Insn::Atomic {
                width,
                op,
                fetch,
                dst,
                src,
                off,
            } => {
                self.check_atomic(st, pc, width, op, fetch, dst, src, off)?;
                Ok(Succ::Goto(pc + 1))
            }
            Insn::LoadAcquire {
                size,
                dst,
                src,
                off,
            } => {
                self.check_load_acquire(st, pc, size.bytes(), dst, src, off)?;
                Ok(Succ::Goto(pc + 1))
            }
            Insn::StoreRelease {
                size,
                dst,
                off,
                src,
            } => {
                self.check_store_release(st, pc, size.bytes(), dst, off, src)?;
                Ok(Succ::Goto(pc + 1))
            }
            Insn::Ja { off } => {
                let t = (pc as i64 + 1 + off as i64) as usize;
                self.check_back_edge(pc, t)?;
                Ok(Succ::Goto(t))
            }
            Insn::Jmp {
                width,
                op,
                dst,
                src,
                off,
            } => {
                self.check_back_edge(pc, (pc as i64 + 1 + off as i64) as usize)?;
                self.check_cond_jmp(st, pc, width, op, dst, src, off)
            }
            Insn::MayGoto { off } => {
                let t = (pc as i64 + 1 + off as i64) as usize;
                self.check_back_edge(pc, t)?;
                Ok(self.check_may_goto(st, pc, t))
            }
            Insn::Call(target) => {
                self.facts.calls_reached.insert(pc);
                self.check_call(st, pc, target)
            }
            Insn::CallReg { .. } => crate::error::err(
                "callx",
                "indirect calls (callx) are not supported by the verifier",
            ),
            Insn::Exit => self.check_exit(st),
        }
    }

    /// Loops under the unprivileged policy: the kernel explores mispredicted
    /// branches speculatively without CAP_PERFMON, which makes it reject
    /// practically every loop; bpfjet does not model speculation and refuses
    /// backward jumps instead (documented imprecision: stricter, never looser).
    /// A loop with a `may_goto` in it is the exception: `may_goto` is no
    /// comparison the CPU could mispredict, and the kernel (6.18) verifies
    /// such loops without CAP_PERFMON; bpfjet verifies them as it does
    /// under the privileged policy (scalars compared exactly).
    fn check_back_edge(&self, pc: usize, target: usize) -> VResult<()> {
        if target <= pc && !self.env.privileged() && !self.cfg.may_goto_within(target, pc) {
            return crate::error::err(
                "loop_unpriv",
                format!("back-edge from insn {pc} to {target}: loops are not verified for unprivileged loaders"),
            );
        }
        Ok(())
    }

    fn check_lddw(
        &mut self,
        st: &mut State,
        pc: usize,
        kind: LdDwKind,
        dst: u8,
        imm: u64,
    ) -> VResult<()> {
        use crate::reg_state::{RegState, RegType};
        let low = imm as u32;
        let map_exists = |v: &Self| (low as usize) < v.env.maps.len();
        let reg =
            match kind {
                LdDwKind::Imm => RegState::constant(imm),
                LdDwKind::MapIdx => {
                    if !map_exists(self) {
                        return crate::error::err(
                            "bad_map",
                            format!(
                                "lddw refers to map #{low}, the program has {} maps",
                                self.env.maps.len()
                            ),
                        );
                    }
                    RegState::pointer(RegType::MapPtr { map: low }, 0)
                }
                LdDwKind::MapIdxValue => {
                    if !map_exists(self) {
                        return crate::error::err(
                            "bad_map",
                            format!(
                                "lddw refers to map #{low}, the program has {} maps",
                                self.env.maps.len()
                            ),
                        );
                    }
                    let spec = &self.env.maps[low as usize];
                    let off = (imm >> 32) as u32;
                    let direct = matches!(
                        spec.map_type,
                        bpfjet_maps::MapType::Array | bpfjet_maps::MapType::PercpuArray
                    ) && spec.max_entries == 1;
                    if !direct || spec.map_type.is_per_cpu() {
                        return crate::error::err(
                            "bad_map",
                            format!(
                                "map #{low} ({}) does not support direct value access",
                                spec.name
                            ),
                        );
                    }
                    if off >= spec.value_size {
                        return crate::error::err(
                            "bad_map",
                            format!(
                                "invalid access to map value pointer, value_size={} off={off}",
                                spec.value_size
                            ),
                        );
                    }
                    RegState::pointer(RegType::MapValue { map: low }, off as i32)
                }
                LdDwKind::Func => {
                    let t = (pc as i64 + 1 + low as i32 as i64) as u32;
                    // The kernel's check_ld_imm: a callback is verified in
                    // its caller's context, which a global function never is.
                    if let Some(g) = self.env.global_func(t as usize) {
                        return crate::error::err(
                            "callback_not_static",
                            format!(
                                "callback function not static: {}() is a global function \
                                 (make it static to pass it as a callback)",
                                g.name
                            ),
                        );
                    }
                    RegState::pointer(RegType::Func { entry: t }, 0)
                }
                LdDwKind::MapFd | LdDwKind::MapValue => return crate::error::err(
                    "bad_lddw",
                    "lddw with a map fd: bpfjet programs refer to maps by index (PSEUDO_MAP_IDX)",
                ),
                LdDwKind::BtfId => {
                    return crate::error::err(
                        "bad_lddw",
                        "lddw of a BTF id (kernel variable) is not supported",
                    )
                }
            };
        *st.reg_mut(dst) = reg;
        Ok(())
    }
}

/// Callback or iterator iterations followed exactly on one path before
/// scalars are widened, without precision tracking.
const UNPRIVILEGED_WIDEN_AFTER: u32 = 256;

/// The kernel's `maybe_widen_reg`: a scalar that is not precise on either
/// side and differs from the previous iteration's becomes unknown. Equal
/// means the same value and ids that correspond one to one across the
/// whole state (`ids`, the kernel's `check_ids` map).
fn widen_scalar(old: &RegState, cur: &mut RegState, ids: &mut Vec<(u32, u32)>) {
    if old.ty != RegType::Scalar || cur.ty != RegType::Scalar || old.precise || cur.precise {
        return;
    }
    if old.val == cur.val && same_id(old.id, cur.id, ids) {
        return;
    }
    *cur = RegState::unknown();
}

/// Whether `old` and `cur` correspond, recording the pair (the kernel's
/// `check_ids`): no id on both sides, or ids that map one to one.
fn same_id(old: u32, cur: u32, ids: &mut Vec<(u32, u32)>) -> bool {
    if (old == 0) != (cur == 0) {
        return false;
    }
    if old == 0 {
        return true;
    }
    for &(o, c) in ids.iter() {
        if o == old {
            return c == cur;
        }
        if c == cur {
            return false;
        }
    }
    ids.push((old, cur));
    true
}

/// How many elements the most advanced active iterator of `st` has
/// returned (the queued state of a `next` call: its R1 is gone by then).
fn iter_depth(st: &State) -> Option<u32> {
    st.frames
        .iter()
        .flat_map(|f| f.stack.slots.iter())
        .filter_map(|s| s.spill.filter(|_| s.is_iter()))
        .filter(|r| matches!(r.ty, RegType::IterNum { active: true }))
        .map(|r| r.range)
        .max()
}
