//! Static structure of a program before abstract interpretation: subprogram
//! boundaries, jump sanity, unreachable code, and the points where states
//! are compared for pruning.

use bpfjet_isa::{CallTarget, Insn, LdDwKind};

#[derive(Clone, Debug)]
pub struct Cfg {
    /// Subprogram entry slots, sorted; the first is 0.
    pub entries: Vec<usize>,
    /// Slots where states are recorded and compared.
    pub prune_point: Vec<bool>,
    /// Slots targeted by a backward jump (loop heads).
    pub loop_head: Vec<bool>,
    /// For each subprogram, the subprograms it calls directly.
    pub calls: Vec<Vec<usize>>,
    /// Calls of a helper or kfunc that runs a callback (`bpf_loop`,
    /// `bpf_for_each_map_elem`, `bpf_rbtree_add_impl`, ...). A callback
    /// returns to its call, which runs again: the kernel's
    /// `calls_callback`, where states converge like an iterator's.
    pub calls_callback: Vec<bool>,
    /// `may_goto_before[pc]`: how many `may_goto` instructions precede
    /// slot `pc` (one entry more than the program has slots).
    pub may_goto_before: Vec<u32>,
}

impl Cfg {
    /// Index of the subprogram containing `pc`.
    pub fn subprog_of(&self, pc: usize) -> usize {
        match self.entries.binary_search(&pc) {
            Ok(i) => i,
            Err(i) => i.saturating_sub(1),
        }
    }

    pub fn subprog_end(&self, idx: usize, len: usize) -> usize {
        self.entries.get(idx + 1).copied().unwrap_or(len)
    }

    pub fn is_entry(&self, pc: usize) -> bool {
        self.entries.binary_search(&pc).is_ok()
    }

    /// Whether a `may_goto` lies in slots `from..=to`.
    pub fn may_goto_within(&self, from: usize, to: usize) -> bool {
        let count = |pc: usize| self.may_goto_before.get(pc).copied().unwrap_or(0);
        count(to + 1) > count(from)
    }

    /// Marks the calls that run a callback (helpers whose prototype has
    /// one, and `bpf_rbtree_add_impl` among the kfuncs, named by
    /// `kfuncs`), and open-coded iterators' `bpf_iter_num_next`, as prune
    /// points where a state is always recorded.
    pub fn mark_callback_calls(&mut self, insns: &[Insn], kfuncs: &[String]) {
        for (pc, insn) in insns.iter().enumerate() {
            let runs_callback = match *insn {
                Insn::Call(CallTarget::Helper(id)) => {
                    crate::proto::helper_proto(id).is_some_and(|p| p.callback.is_some())
                }
                Insn::Call(CallTarget::Kfunc(idx)) => usize::try_from(idx)
                    .ok()
                    .and_then(|i| kfuncs.get(i))
                    .is_some_and(|n| {
                        crate::graph::GraphKfunc::from_name(n)
                            == Some(crate::graph::GraphKfunc::RbAdd)
                            // An iterator's `next`: its loop converges
                            // there, as a callback's iterations do.
                            || crate::iter::IterKfunc::from_name(n)
                                == Some(crate::iter::IterKfunc::Next)
                    }),
                _ => false,
            };
            if runs_callback {
                self.calls_callback[pc] = true;
                self.prune_point[pc] = true;
            }
        }
    }
}

fn rel_target(pc: usize, off: i64) -> i64 {
    pc as i64 + 1 + off
}

/// Successors of `pc` inside its subprogram (calls fall through).
pub fn successors(insns: &[Insn], pc: usize) -> Vec<usize> {
    let insn = &insns[pc];
    let next = pc + insn.slots();
    match *insn {
        Insn::Exit => vec![],
        Insn::Ja { off } => vec![rel_target(pc, off as i64) as usize],
        Insn::Jmp { off, .. } | Insn::MayGoto { off } => {
            vec![next, rel_target(pc, off as i64) as usize]
        }
        _ => vec![next],
    }
}

/// Build and check the static structure. Errors carry the slot in the message
/// (the driver adds the instruction text).
pub fn build(insns: &[Insn]) -> Result<Cfg, (Option<usize>, crate::error::VerifyError)> {
    let len = insns.len();
    if len == 0 {
        return Err((
            None,
            crate::error::VerifyError::new("empty", "program is empty"),
        ));
    }
    let mut entries = vec![0usize];
    for (pc, insn) in insns.iter().enumerate() {
        let target = match *insn {
            Insn::Call(CallTarget::Local(off)) => Some(rel_target(pc, off as i64)),
            Insn::LdDw {
                kind: LdDwKind::Func,
                imm,
                ..
            } => Some(rel_target(pc, imm as u32 as i32 as i64)),
            _ => None,
        };
        if let Some(t) = target {
            if t < 0 || t as usize >= len || insns[t as usize] == Insn::LdDwTail {
                return Err((
                    Some(pc),
                    crate::error::VerifyError::new(
                        "call_out_of_range",
                        format!("call or function pointer to insn {t} is out of range"),
                    ),
                ));
            }
            entries.push(t as usize);
        }
    }
    entries.sort_unstable();
    entries.dedup();
    let mut cfg = Cfg {
        calls: vec![Vec::new(); entries.len()],
        entries,
        prune_point: vec![false; len],
        loop_head: vec![false; len],
        calls_callback: vec![false; len],
        may_goto_before: std::iter::once(0)
            .chain(insns.iter().scan(0u32, |n, insn| {
                *n += u32::from(matches!(insn, Insn::MayGoto { .. }));
                Some(*n)
            }))
            .collect(),
    };
    check_subprogs(insns, &mut cfg).map_err(|(pc, e)| (Some(pc), e))?;
    check_reachable(insns, &cfg).map_err(|(pc, e)| (Some(pc), e))?;
    Ok(cfg)
}

fn fail(pc: usize, rule: &'static str, msg: String) -> (usize, crate::error::VerifyError) {
    (pc, crate::error::VerifyError::new(rule, msg))
}

fn check_subprogs(insns: &[Insn], cfg: &mut Cfg) -> Result<(), (usize, crate::error::VerifyError)> {
    let len = insns.len();
    for idx in 0..cfg.entries.len() {
        let start = cfg.entries[idx];
        let end = cfg.subprog_end(idx, len);
        cfg.prune_point[start] = true;
        for pc in start..end {
            let insn = &insns[pc];
            if let Some(t) = insn.jump_target(pc) {
                if t < start as i64 || t >= end as i64 {
                    return Err(fail(
                        pc,
                        "jump_out_of_range",
                        format!("jump out of range from insn {pc} to {t}"),
                    ));
                }
                let t = t as usize;
                if insns[t] == Insn::LdDwTail {
                    return Err(fail(
                        pc,
                        "jump_into_lddw",
                        format!("jump from insn {pc} into the middle of an lddw at {t}"),
                    ));
                }
                cfg.prune_point[t] = true;
                if t <= pc {
                    cfg.loop_head[t] = true;
                }
                if matches!(insn, Insn::Jmp { .. } | Insn::MayGoto { .. }) && pc + 1 < end {
                    cfg.prune_point[pc + 1] = true;
                }
                // The kernel's `visit_insn`: a `may_goto` is a prune point
                // where a state is always recorded (`mark_force_checkpoint`):
                // its loop converges there.
                if matches!(insn, Insn::MayGoto { .. }) {
                    cfg.prune_point[pc] = true;
                }
            }
            if let Insn::Call(CallTarget::Local(off)) = *insn {
                let t = rel_target(pc, off as i64) as usize;
                let callee = cfg.subprog_of(t);
                if !cfg.calls[idx].contains(&callee) {
                    cfg.calls[idx].push(callee);
                }
                if pc + 1 < end {
                    cfg.prune_point[pc + 1] = true;
                }
            }
            if let Insn::Call(CallTarget::Helper(_)) = *insn {
                if pc + 1 < end {
                    cfg.prune_point[pc + 1] = true;
                }
            }
        }
        // The last instruction must not fall into the next subprogram.
        let mut last = end - 1;
        if insns[last] == Insn::LdDwTail && last > start {
            last -= 1;
        }
        match insns[last] {
            Insn::Exit | Insn::Ja { .. } => {}
            _ => {
                return Err(fail(
                    last,
                    "fallthrough_out",
                    format!("last insn {last} of the subprogram at {start} is not an exit or jump"),
                ))
            }
        }
    }
    // Recursion: a cycle in the call graph.
    let n = cfg.entries.len();
    let mut state = vec![0u8; n];
    fn visit(v: usize, calls: &[Vec<usize>], state: &mut [u8]) -> Option<usize> {
        state[v] = 1;
        for &w in &calls[v] {
            if state[w] == 1 {
                return Some(w);
            }
            if state[w] == 0 {
                if let Some(c) = visit(w, calls, state) {
                    return Some(c);
                }
            }
        }
        state[v] = 2;
        None
    }
    for v in 0..n {
        if state[v] == 0 {
            if let Some(c) = visit(v, &cfg.calls, &mut state) {
                let e = cfg.entries[c];
                return Err(fail(
                    e,
                    "recursion",
                    format!("recursive call to the subprogram at insn {e}"),
                ));
            }
        }
    }
    Ok(())
}

fn check_reachable(insns: &[Insn], cfg: &Cfg) -> Result<(), (usize, crate::error::VerifyError)> {
    let mut seen = vec![false; insns.len()];
    let mut work: Vec<usize> = cfg.entries.clone();
    while let Some(pc) = work.pop() {
        if pc >= insns.len() || seen[pc] {
            continue;
        }
        seen[pc] = true;
        work.extend(successors(insns, pc));
    }
    for (pc, insn) in insns.iter().enumerate() {
        if !seen[pc] && *insn != Insn::LdDwTail {
            return Err(fail(pc, "unreachable", format!("unreachable insn {pc}")));
        }
    }
    Ok(())
}
