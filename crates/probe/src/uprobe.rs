//! Entry and return probes on functions of this process.
//!
//! Attaching writes `jmp rel32` over the function's first instructions; the
//! jump lands in a per-probe page near the function holding a stub (which
//! passes the probe to the shared register-saving code) and the displaced
//! instructions relocated, followed by a jump back. The function body is
//! patched, not its symbol binding, so direct calls, calls through the PLT
//! and calls from inside its own library all hit the probe.

use crate::code_alloc;
use crate::fast_syscalls::{self, Wrapper};
use crate::patch::write_live_code;
use crate::regs::PtRegs;
use crate::relocate::{displace, jmp_rel32, JMP_REL32_LEN};
use crate::shadow::Frame;
use crate::symbols::ResolvedSymbol;
use crate::thread::{self, ProbeThread};
use crate::trampoline;
use crate::ProbeError;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Runs at a probe hit with the registers of the probed code; runs on the
/// thread that made the call, inline, and must be thread-safe.
pub type ProbeHandler = Box<dyn Fn(&mut PtRegs) + Send + Sync>;

/// What runs at one probed address.
pub struct Probe {
    pub(crate) address: u64,
    /// Relocated first instructions; where execution continues.
    pub(crate) continuation: u64,
    on_entry: Option<ProbeHandler>,
    on_return: Option<ProbeHandler>,
    pub(crate) hits: AtomicU64,
    /// A libc system-call wrapper of the fast path: its entry and return
    /// run `fast_syscalls`' handlers (which set the system-call selector
    /// themselves) instead of `on_entry`/`on_return`; other handlers run
    /// with bpfjet's calls not dispatched.
    pub(crate) wrapper: Option<Wrapper>,
    /// Hits whose handlers did not run: nested inside another handler on the
    /// same thread (as the kernel's per-program recursion check), or the
    /// shadow stack was full (return handler only).
    pub(crate) missed: AtomicU64,
    /// Bytes the stub moves the stack pointer down before saving anything
    /// (the red zone, for a probe inside a function); the handler sees the
    /// probed code's own `rsp`.
    stack_skip: u64,
}

impl Probe {
    /// A new probe at `address`, never freed (a thread may be in its
    /// handlers or trampolines whenever it is detached); its continuation
    /// is set before any thread can reach it.
    fn leaked(
        address: u64,
        on_entry: Option<ProbeHandler>,
        on_return: Option<ProbeHandler>,
        wrapper: Option<Wrapper>,
        stack_skip: u64,
    ) -> &'static Probe {
        Box::leak(Box::new(Probe {
            address,
            continuation: 0,
            on_entry,
            on_return,
            hits: AtomicU64::new(0),
            wrapper,
            missed: AtomicU64::new(0),
            stack_skip,
        }))
    }
}

/// An attached probe: counters, and `detach`.
pub struct Attachment {
    probe: &'static Probe,
    original: [u8; 5],
    /// An entry no jump could patch: an `int3` over its first byte, and
    /// why the jump could not go there.
    breakpoint: Option<(crate::breakpoint::Breakpoint, String)>,
}

impl Attachment {
    pub fn address(&self) -> u64 {
        self.probe.address
    }
    /// Times the probe was hit (for a libc wrapper of the system-call fast
    /// path: not counted here, see [`crate::fast_syscalls::fast_calls`]).
    pub fn hits(&self) -> u64 {
        self.probe.hits.load(Ordering::Relaxed)
    }
    pub fn missed(&self) -> u64 {
        self.probe.missed.load(Ordering::Relaxed)
    }
    /// Why the probe is an `int3` (no jump could patch it), not a jump.
    pub fn why_int3(&self) -> Option<&str> {
        self.breakpoint.as_ref().map(|(_, why)| why.as_str())
    }

    /// Puts the original bytes back. The trampoline page and the probe stay
    /// (a thread may still be inside them, and hooked calls still in flight
    /// return through the return trampoline), so detaching is safe at any
    /// time.
    pub fn detach(self) -> Result<(), ProbeError> {
        if let Some((bp, _)) = self.breakpoint {
            // Releases its claim itself.
            bp.detach()?;
        } else {
            write_live_code(self.probe.address, &self.original).map_err(|reason| {
                ProbeError::Unpatchable {
                    symbol: String::new(),
                    offset: 0,
                    address: self.probe.address,
                    reason,
                }
            })?;
            crate::claims::release(self.probe.address);
        }
        if let Some(set) = ATTACHED.lock().unwrap().as_mut() {
            set.remove(&self.probe.address);
        }
        Ok(())
    }
}

impl Attachment {
    /// The object holding the patched code was unloaded (`dlclose`): there
    /// is nothing to restore, and a later mapping may reuse the address.
    /// The probe and its trampoline page stay, as for [`Attachment::detach`].
    pub fn forget_unmapped(self) {
        if let Some(set) = ATTACHED.lock().unwrap().as_mut() {
            set.remove(&self.probe.address);
        }
        match self.breakpoint {
            Some((bp, _)) => bp.forget_unmapped(),
            None => crate::claims::release(self.probe.address),
        }
    }
}

static ATTACHED: Mutex<Option<HashSet<u64>>> = Mutex::new(None);

/// Why `target` cannot be probed.
fn unpatchable(target: &ResolvedSymbol, reason: String) -> ProbeError {
    ProbeError::Unpatchable {
        symbol: target.symbol.clone(),
        offset: target.offset,
        address: target.address,
        reason,
    }
}

/// Attaches handlers at a resolved address. One attachment per address:
/// callers wanting several programs on one function combine them into one
/// handler.
pub fn attach(
    target: &ResolvedSymbol,
    on_entry: Option<ProbeHandler>,
    on_return: Option<ProbeHandler>,
) -> Result<Attachment, ProbeError> {
    attach_with(target, on_entry, on_return, None)
}

/// The SysV x86-64 red zone: a leaf function may keep data in the 128
/// bytes below its stack pointer, which a probe in its body must not touch.
const RED_ZONE: u64 = 128;
/// `lea rsp, [rsp-128]`
const SKIP_RED_ZONE: [u8; 5] = [0x48, 0x8d, 0x64, 0x24, 0x80];
/// `lea rsp, [rsp+128]`
const RESTORE_RED_ZONE: [u8; 8] = [0x48, 0x8d, 0xa4, 0x24, 0x80, 0x00, 0x00, 0x00];

/// Attaches an entry handler at an address inside a function (a USDT
/// probe's `nop`) starting at `function_start`: unlike a function's entry,
/// any instruction of the function may jump there, and the function's
/// frame (its red zone included) is live. So the whole function is
/// decoded and the patch refused if a branch lands inside the patched
/// bytes, and the trampoline first steps over the red zone. No return
/// handler: the address is not a function's entry.
pub fn attach_mid_function(
    target: &ResolvedSymbol,
    function_start: u64,
    on_entry: ProbeHandler,
) -> Result<Attachment, ProbeError> {
    let size = target.address - function_start + target.remaining;
    // SAFETY: the function's bytes are mapped code of this process.
    let code = unsafe { std::slice::from_raw_parts(function_start as *const u8, size as usize) };
    crate::relocate::check_no_branch_into(code, function_start, target.address).map_err(
        |reason| ProbeError::Unpatchable {
            symbol: target.symbol.clone(),
            offset: target.offset,
            address: target.address,
            reason,
        },
    )?;
    attach_at(target, Some(on_entry), None, None, Stub::MidFunction)
}

pub(crate) fn attach_with(
    target: &ResolvedSymbol,
    on_entry: Option<ProbeHandler>,
    on_return: Option<ProbeHandler>,
    wrapper: Option<Wrapper>,
) -> Result<Attachment, ProbeError> {
    attach_at(target, on_entry, on_return, wrapper, Stub::Entry)
}

/// A libc system-call wrapper's call-through stub
/// ([`crate::call_through`]) in place of the entry and return probes.
pub(crate) fn attach_call_through(
    target: &ResolvedSymbol,
    wrapper: Wrapper,
) -> Result<Attachment, ProbeError> {
    attach_at(target, None, None, Some(wrapper), Stub::CallThrough)
}

/// What the jump at the patched address leads to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stub {
    /// The entry trampoline at a function's entry (and the return
    /// trampoline through the shadow stack).
    Entry,
    /// The entry trampoline inside a function, past its red zone.
    MidFunction,
    /// A call-through stub: entry half, call of the relocated function,
    /// exit half, in one frame.
    CallThrough,
}

fn attach_at(
    target: &ResolvedSymbol,
    on_entry: Option<ProbeHandler>,
    on_return: Option<ProbeHandler>,
    wrapper: Option<Wrapper>,
    kind: Stub,
) -> Result<Attachment, ProbeError> {
    let mid_function = kind == Stub::MidFunction;
    let address = target.address;
    let unpatchable = |reason: String| unpatchable(target, reason);
    crate::thread::prepare_for_fork();
    let mut attached = ATTACHED.lock().unwrap();
    let attached = attached.get_or_insert_with(HashSet::new);
    if attached.contains(&address) {
        return Err(unpatchable("already attached".into()));
    }
    // Decode the rest of the function when its size is known (to find jumps
    // back into the displaced bytes); otherwise just enough to relocate. A
    // function shorter than the jump can only take an int3.
    let span = if target.remaining == 0 {
        32
    } else {
        target.remaining.min(1 << 20) as usize
    };
    // SAFETY: the symbol's bytes are mapped code of this process.
    let code = unsafe { std::slice::from_raw_parts(address as *const u8, span) };
    // The bytes a jump replaces, read before anything is written.
    let mut original = [0u8; 5];
    original[..span.min(5)].copy_from_slice(&code[..span.min(5)]);
    if code[0] == 0xCC {
        return Err(unpatchable(
            "the function starts with int3: a kernel uprobe or a debugger breakpoint is active on it"
                .into(),
        ));
    }
    if code[0] == 0xE9 && crate::symbols::file_code(target, 5).as_deref() != Some(&original[..]) {
        // Another in-process patcher (or a previous bpfjet) was here: the
        // file has other bytes (a tail-call stub's own `jmp` is fine).
        return Err(unpatchable(
            "the function already starts with a jmp rel32 patch".into(),
        ));
    }
    // An entry probe (not a libc wrapper's, whose stubs need the jump) may
    // fall back to an int3 where the jump cannot go.
    let int3_allowed = kind == Stub::Entry && wrapper.is_none();
    let page = code_alloc::alloc_near(address)?;
    let stack_skip = if mid_function { RED_ZONE } else { 0 };
    let probe = Probe::leaked(address, on_entry, on_return, wrapper, stack_skip);
    let mut stub = Vec::new();
    if mid_function {
        stub.extend_from_slice(&SKIP_RED_ZONE);
    }
    // Flags are dead only at a function's first instruction.
    let inside = mid_function || target.offset != 0;
    if kind == Stub::CallThrough {
        stub.extend(crate::call_through::stub(probe as *const Probe as u64));
    } else if wrapper.is_some() && !inside {
        // A libc wrapper's entry: integer arguments only, a lighter
        // restore (trampoline.rs).
        stub.extend(trampoline::wrapper_entry_stub(probe as *const Probe as u64));
    } else {
        stub.extend(trampoline::entry_stub(probe as *const Probe as u64, inside));
    }
    let continuation = page + stub.len().next_multiple_of(16) as u64;
    let restore: &[u8] = if mid_function { &RESTORE_RED_ZONE } else { &[] };
    let reloc_at = continuation + restore.len() as u64;
    let displaced = if target.symbol.is_empty() {
        // A raw offset: no function bounds to check a jump against.
        Err(format!(
            "file offset {:#x} is in no function bpfjet can name",
            target.offset
        ))
    } else if span < JMP_REL32_LEN {
        Err(format!(
            "the function is {} bytes long, too short for a 5-byte jump",
            target.remaining
        ))
    } else {
        displace(code, address, reloc_at)
    };
    let mut displaced = match displaced {
        Ok(d) => d,
        Err(reason) if int3_allowed => {
            return attach_int3(target, probe, page, code, reason).inspect(|_| {
                attached.insert(address);
            })
        }
        Err(reason) => return Err(unpatchable(reason)),
    };
    displaced.code.splice(0..0, restore.iter().copied());
    // SAFETY: fresh writable page of PAGE bytes; the code is far smaller.
    unsafe {
        let p = page as *mut u8;
        std::ptr::copy_nonoverlapping(stub.as_ptr(), p, stub.len());
        std::ptr::copy_nonoverlapping(
            displaced.code.as_ptr(),
            p.add((continuation - page) as usize),
            displaced.code.len(),
        );
        // The probe is not reachable by any thread yet: set its continuation.
        let pm = probe as *const Probe as *mut Probe;
        (*pm).continuation = continuation;
    }
    code_alloc::seal(page)?;
    // The bytes written and the instructions copied are this probe's.
    crate::claims::claim(address, displaced.len.max(5) as u64).map_err(unpatchable)?;
    if let Err(e) = write_live_code(address, &jmp_rel32(address, page)) {
        crate::claims::release(address);
        return Err(unpatchable(e));
    }
    attached.insert(address);
    Ok(Attachment {
        probe,
        original,
        breakpoint: None,
    })
}

/// An `int3` probe at `target` (any instruction: a function's entry, or
/// inside a function where a jump cannot go and the instruction is not a
/// `nop`), the instruction it replaces executed out of line; a return
/// handler takes the address for a function's entry (`[rsp]` the return
/// address), as the kernel's uretprobes do.
pub fn attach_int3_at(
    target: &ResolvedSymbol,
    on_entry: Option<ProbeHandler>,
    on_return: Option<ProbeHandler>,
    why: String,
) -> Result<Attachment, ProbeError> {
    let address = target.address;
    crate::thread::prepare_for_fork();
    let mut attached = ATTACHED.lock().unwrap();
    let attached = attached.get_or_insert_with(HashSet::new);
    if attached.contains(&address) {
        return Err(unpatchable(target, "already attached".into()));
    }
    let span = if target.remaining == 0 {
        32
    } else {
        target.remaining.min(64) as usize
    };
    // SAFETY: the bytes are mapped code of this process.
    let code = unsafe { std::slice::from_raw_parts(address as *const u8, span) };
    let page = code_alloc::alloc_near(address)?;
    let probe = Probe::leaked(address, on_entry, on_return, None, 0);
    attach_int3(target, probe, page, code, why).inspect(|_| {
        attached.insert(address);
    })
}

/// An entry probe where the jump cannot go (`why`): an `int3` over the
/// function's first byte, the instruction it replaces relocated to `page`
/// (the probe's continuation) with a jump back after it. `code`: the
/// function's bytes (its first instruction is whole in them).
fn attach_int3(
    target: &ResolvedSymbol,
    probe: &'static Probe,
    page: u64,
    code: &[u8],
    why: String,
) -> Result<Attachment, ProbeError> {
    let address = target.address;
    let first = code[0];
    let unpatchable = |reason: String| unpatchable(target, reason);
    let one = crate::relocate::relocate_one(code, address, page)
        .map_err(|e| unpatchable(format!("{why}; and no int3 either: {e}")))?;
    // SAFETY: fresh writable page; one instruction and a jump fit.
    unsafe {
        std::ptr::copy_nonoverlapping(one.code.as_ptr(), page as *mut u8, one.code.len());
        // The probe is not reachable by any thread yet.
        let pm = probe as *const Probe as *mut Probe;
        (*pm).continuation = page;
    }
    code_alloc::seal(page)?;
    let bp = crate::breakpoint::attach_entry(address, first, probe as *const Probe as u64)
        .map_err(|e| match e {
            ProbeError::Unpatchable { reason, .. } => {
                unpatchable(format!("{why}; and no int3 either: {reason}"))
            }
            e => e,
        })?;
    let why = if target.symbol.is_empty() {
        why
    } else {
        format!("{}+{:#x}: {why}", target.symbol, target.offset)
    };
    Ok(Attachment {
        probe,
        original: [first, 0, 0, 0, 0],
        breakpoint: Some((bp, why)),
    })
}

/// Marks the thread as running a handler; false if it already was.
#[inline]
pub(crate) fn enter_handler(t: *mut ProbeThread) -> bool {
    // SAFETY: `t` is this thread's block (the callers').
    unsafe { !std::mem::replace(&mut (*t).in_handler, true) }
}

#[inline]
pub(crate) fn leave_handler(t: *mut ProbeThread) {
    // SAFETY: as in `enter_handler`.
    unsafe { (*t).in_handler = false };
}

/// Called by the entry trampoline; returns where execution continues.
pub(crate) fn on_entry(probe: u64, regs: &mut PtRegs) -> u64 {
    // SAFETY: the stub passes a leaked, never-freed Probe.
    let p = unsafe { &*(probe as *const Probe) };
    regs.rip = p.address;
    regs.rsp += p.stack_skip;
    if p.wrapper.is_none() {
        // A wrapper's hits are the system calls `fast_syscalls` counts:
        // one locked add per hit, not two.
        p.hits.fetch_add(1, Ordering::Relaxed);
    }
    // One thread-local lookup for the whole hit.
    let t = thread::current();
    if !enter_handler(t) {
        p.missed.fetch_add(1, Ordering::Relaxed);
        return p.continuation;
    }
    let mut to = p.continuation;
    if let Some(w) = p.wrapper {
        to = on_wrapper_entry(t, p, probe, w, regs);
    } else {
        if let Some(h) = &p.on_entry {
            // bpfjet's own system calls in the handler are not the target's.
            crate::syscalls::allowed_in(t, || h(regs));
        }
        if p.on_return.is_some() {
            let slot = regs.rsp;
            // SAFETY: at function entry [rsp] is the return address.
            let ret = unsafe { *(slot as *const u64) };
            // SAFETY: this thread's block; no other use of it is live.
            let pushed = unsafe { thread::stacks(t) }
                .is_some_and(|s| s.shadow.push(Frame { slot, ret, probe }));
            if pushed {
                // SAFETY: the thread's own stack slot.
                unsafe { *(slot as *mut u64) = trampoline::return_trampoline() };
            } else {
                p.missed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    leave_handler(t);
    to
}

/// The entry of a libc wrapper of the fast path. The return is hooked
/// first: the wrapper's handler lets the call through (selector ALLOW) only
/// when its return will set BLOCK again; with the shadow stack full the
/// call takes the slow path (SIGSYS), which traces it too. Returns where
/// the call continues: the relocated first instructions, or the wrapper's
/// copy in the allowed range.
fn on_wrapper_entry(
    t: *mut ProbeThread,
    p: &Probe,
    probe: u64,
    w: Wrapper,
    regs: &mut PtRegs,
) -> u64 {
    if w.copy != 0 && !crate::syscalls::exit_traced(w.number(regs)) {
        // Runs in the copy and nothing runs at its return: no return hook,
        // so no shadow-stack frame. The stacks must exist (the fast path
        // counts its calls there).
        // SAFETY: this thread's block; no other use of it is live.
        let _ = unsafe { thread::stacks(t) };
        let (_, in_copy) = fast_syscalls::on_wrapper_entry(t, w, regs);
        return if in_copy { w.copy } else { p.continuation };
    }
    let slot = regs.rsp;
    // SAFETY: at function entry [rsp] is the return address.
    let ret = unsafe { *(slot as *const u64) };
    // SAFETY: this thread's block; no other use of it is live.
    let pushed =
        unsafe { thread::stacks(t) }.is_some_and(|s| s.shadow.push(Frame { slot, ret, probe }));
    if !pushed {
        p.missed.fetch_add(1, Ordering::Relaxed);
        return p.continuation;
    }
    let (hook, in_copy) = fast_syscalls::on_wrapper_entry(t, w, regs);
    let continue_at = if in_copy { w.copy } else { p.continuation };
    let to = match hook {
        ReturnHook::None => {
            // Nothing to do at the return: unhook it.
            // SAFETY: as above; the frame just pushed is on top.
            let _ = unsafe { thread::existing_stacks(t) }.and_then(|s| s.shadow.pop(slot));
            return continue_at;
        }
        ReturnHook::Full => trampoline::return_trampoline(),
        ReturnHook::Quick => trampoline::quick_return(),
    };
    // SAFETY: the thread's own stack slot.
    unsafe { *(slot as *mut u64) = to };
    continue_at
}

/// What a probe hit's return needs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReturnHook {
    /// Nothing: the return is not hooked.
    None,
    /// The return handler, with every register ([`on_return`]).
    Full,
    /// Only the selector back to BLOCK (`bpfjet_probe_quick_return`,
    /// `trampoline.rs`): a wrapper call whose system call's exit runs
    /// nothing.
    Quick,
}

/// Called by the quick return trampoline (assembly, `trampoline.rs`)
/// when it finds no frame for the return.
pub(crate) extern "C" fn no_frame_abi() -> ! {
    no_frame()
}

#[cold]
fn no_frame() -> ! {
    // No record of this return: the stack was switched or corrupted under
    // us. Continuing would jump anywhere.
    let msg =
        b"bpfjet: return trampoline reached without a matching shadow-stack frame; aborting\n";
    // SAFETY: plain write and abort.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), msg.len());
        libc::abort();
    }
}

/// Called by the return trampoline; returns the original return address.
pub(crate) fn on_return(regs: &mut PtRegs) -> u64 {
    let slot = regs.rsp - 8;
    let t = thread::current();
    // SAFETY: this thread's block; no other use of it is live.
    let Some(frame) = (unsafe { thread::existing_stacks(t) }).and_then(|s| s.shadow.pop(slot))
    else {
        no_frame()
    };
    regs.rip = frame.ret;
    // SAFETY: as in on_entry.
    let p = unsafe { &*(frame.probe as *const Probe) };
    if enter_handler(t) {
        if let Some(w) = p.wrapper {
            fast_syscalls::on_wrapper_return(t, w, regs);
        } else if let Some(h) = &p.on_return {
            crate::syscalls::allowed_in(t, || h(regs));
        }
        leave_handler(t);
    } else {
        p.missed.fetch_add(1, Ordering::Relaxed);
    }
    frame.ret
}

/// Hooked calls of this thread that have not returned yet (tests, debugging).
pub fn shadow_depth() -> usize {
    crate::shadow::with(|s| s.depth()).unwrap_or(0)
}
