//! The abstract machine state: a stack of call frames (registers + stack
//! each) and the references currently held.

use crate::reg_state::{RegState, RegType};
use crate::stack::Stack;

/// Maximum call depth, the program's own frame included (kernel's MAX_CALL_FRAMES).
pub const MAX_FRAMES: usize = 8;

/// A callback frame entered from a helper (`bpf_loop`, `bpf_for_each_map_elem`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CallbackInfo {
    /// The helper that calls the callback.
    pub helper: i32,
    /// Allowed return values of the callback.
    pub ret: (i64, i64),
    /// The callback's arguments r1–r5, as its call set them up (each
    /// iteration's call sets them up again).
    pub args: [RegState; 5],
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    pub regs: [RegState; 11],
    pub stack: Stack,
    /// Slot where this frame's subprogram starts.
    pub entry: usize,
    /// Slot of the call that created this frame (0 for the program's own).
    pub callsite: usize,
    pub callback: Option<CallbackInfo>,
    /// References held when a callback frame was entered (must match on exit).
    pub refs_at_entry: usize,
    /// Iterations of the callback this frame's pending helper call has
    /// entered so far on this path (the kernel's `callback_depth`): a
    /// `bpf_loop` stops entering it again at its count's upper bound. Not
    /// compared by pruning, as in the kernel; the loop detector does.
    pub callback_depth: u32,
}

impl Frame {
    /// A fresh frame at depth `depth` with r10 set up and everything else
    /// uninitialised.
    pub fn new(depth: usize, entry: usize, callsite: usize) -> Frame {
        let mut regs = [RegState::NOT_INIT; 11];
        regs[10] = RegState::pointer(RegType::Stack { frame: depth as u8 }, 0);
        Frame {
            regs,
            stack: Stack::default(),
            entry,
            callsite,
            callback: None,
            refs_at_entry: 0,
            callback_depth: 0,
        }
    }
}

/// A reference the program holds and must release before it exits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RefInfo {
    pub id: u32,
    /// The instruction that acquired it.
    pub pc: usize,
}

/// The `bpf_spin_lock` held: which map's value, and the id of the map value
/// pointer it was taken through (the kernel's `active_lock` ptr + id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LockInfo {
    pub map: u32,
    pub id: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub frames: Vec<Frame>,
    pub refs: Vec<RefInfo>,
    pub lock: Option<LockInfo>,
    /// `may_goto` instructions this path fell through (the kernel's
    /// `may_goto_depth`): each fall-through is one more iteration of a loop
    /// the instruction bounds. Not compared by pruning, as in the kernel;
    /// the loop detector does compare it, so a `may_goto` loop is never
    /// taken for an infinite one.
    pub may_goto_depth: u32,
    /// The path verifies a timer callback on its own (`timer.rs`): its
    /// frame 0 is the callback's, which must return 0.
    pub async_callback: bool,
    /// The path verifies a global subprogram's body on its own
    /// (`global_func.rs`): its frame 0 is the function's, which must
    /// return a scalar.
    pub global_body: bool,
}

impl State {
    pub fn new_entry() -> State {
        let mut frame = Frame::new(0, 0, 0);
        frame.regs[1] = RegState::pointer(RegType::Ctx, 0);
        State::of_frame(frame)
    }

    /// A path starting in `frame` alone: no references, no lock.
    pub fn of_frame(frame: Frame) -> State {
        State {
            frames: vec![frame],
            refs: Vec::new(),
            lock: None,
            may_goto_depth: 0,
            async_callback: false,
            global_body: false,
        }
    }

    pub fn depth(&self) -> usize {
        self.frames.len() - 1
    }

    pub fn cur(&self) -> &Frame {
        &self.frames[self.frames.len() - 1]
    }

    pub fn cur_mut(&mut self) -> &mut Frame {
        let n = self.frames.len() - 1;
        &mut self.frames[n]
    }

    pub fn reg(&self, r: u8) -> &RegState {
        &self.cur().regs[r as usize]
    }

    pub fn reg_mut(&mut self, r: u8) -> &mut RegState {
        &mut self.cur_mut().regs[r as usize]
    }

    /// Every register and spilled register of every frame.
    pub fn for_each_reg(&mut self, mut f: impl FnMut(&mut RegState)) {
        for frame in &mut self.frames {
            for r in frame.regs.iter_mut() {
                f(r);
            }
            for r in frame.stack.spills_mut() {
                f(r);
            }
        }
    }

    /// A multi-line dump of the current frame for error messages.
    pub fn describe(&self) -> String {
        let frame = self.cur();
        let mut out = String::new();
        if self.frames.len() > 1 {
            out.push_str(&format!(
                "frame {} (callee at {}):",
                self.depth(),
                frame.entry
            ));
        }
        let regs: Vec<String> = frame
            .regs
            .iter()
            .enumerate()
            .filter(|(_, r)| r.is_init())
            .map(|(i, r)| format!("R{i}={r}"))
            .collect();
        out.push_str(&regs.join(" "));
        let stack = frame.stack.describe();
        if !stack.is_empty() {
            out.push_str("\nstack: ");
            out.push_str(&stack);
        }
        if !self.refs.is_empty() {
            let refs: Vec<String> = self
                .refs
                .iter()
                .map(|r| format!("id={} (acquired at {})", r.id, r.pc))
                .collect();
            out.push_str("\nheld references: ");
            out.push_str(&refs.join(", "));
        }
        if let Some(l) = self.lock {
            out.push_str(&format!(
                "\nholding bpf_spin_lock of map #{} (id={})",
                l.map, l.id
            ));
        }
        out
    }
}
