//! One-byte probes: `int3` over a `nop`, or over the first byte of a
//! function entry no jump can patch, handled by a SIGTRAP handler.
//!
//! A USDT probe is a 1-byte `nop` in the middle of a function, and the
//! byte after it is often a branch target (a semaphore-guarded probe:
//! `if (sem) probe;` jumps over the `nop` to the next instruction). A
//! 5-byte jump there would corrupt that target, so such sites get what the
//! kernel's uprobes use everywhere: a 1-byte `int3`, written atomically.
//! The trap costs a signal delivery per hit (as a kernel uprobe costs a
//! trap), so the jump is preferred wherever it is safe
//! ([`crate::usdt::attach`]).
//!
//! The handler finds the site in a fixed lock-free table (no allocation or
//! lock in the signal handler), builds the `pt_regs` from the signal
//! context (`rip` = the probe's address), runs the site's handler and
//! resumes after the `nop` (the `int3` already advanced `rip` by one, and a
//! `nop` does nothing else). A trap at an address that is not a site is not
//! bpfjet's: the default action is restored and the signal raised again,
//! so the process ends as it would have without bpfjet. An application
//! that installs its own SIGTRAP handler replaces bpfjet's.
//!
//! A function entry where the 5-byte jump cannot go (a function shorter
//! than 5 bytes, a `ret` or a branch target within its first 5 bytes)
//! gets an `int3` too ([`attach_entry`]): the handler runs the probe's
//! entry as its jump's trampoline would ([`crate::uprobe::on_entry`]:
//! entry programs, and the return hooked through the shadow stack), then
//! resumes at the probe's out-of-line copy of the instruction the `int3`
//! replaced, which jumps back after it (as the kernel's uprobes execute
//! the probed instruction out of line).

use crate::patch::write_live_code;
use crate::regs::PtRegs;
use crate::uprobe::{enter_handler, leave_handler, ProbeHandler};
use crate::ProbeError;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, Once};

const NOP: u8 = 0x90;
const INT3: u8 = 0xCC;
/// Sites the table holds; a site's slot is never reused (a thread may be
/// in its handler when it is detached).
const MAX_SITES: usize = 4096;

struct Site {
    /// A `nop` site's handler (None for a function entry).
    handler: Option<ProbeHandler>,
    /// A function entry's probe (a leaked [`crate::uprobe::Probe`]; 0 for
    /// a `nop` site).
    entry_probe: u64,
    hits: AtomicU64,
    missed: AtomicU64,
}

static ADDRESSES: [AtomicU64; MAX_SITES] = [const { AtomicU64::new(0) }; MAX_SITES];
static SITES: [AtomicPtr<Site>; MAX_SITES] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_SITES];
static USED: Mutex<usize> = Mutex::new(0);
/// Slots the signal handler scans (lock-free copy of `USED`).
static PUBLISHED: AtomicUsize = AtomicUsize::new(0);
static INSTALL: Once = Once::new();

/// An `int3` probe: counters and `detach`.
pub struct Breakpoint {
    slot: usize,
    address: u64,
    /// The byte the `int3` replaced.
    original: u8,
}

impl Breakpoint {
    pub fn address(&self) -> u64 {
        self.address
    }
    fn site(&self) -> &'static Site {
        // SAFETY: set before the slot's address was published, never freed.
        unsafe { &*SITES[self.slot].load(Ordering::Acquire) }
    }
    pub fn hits(&self) -> u64 {
        self.site().hits.load(Ordering::Relaxed)
    }
    pub fn missed(&self) -> u64 {
        self.site().missed.load(Ordering::Relaxed)
    }

    /// Puts the original byte back. The slot keeps its address until then,
    /// so a thread that already trapped still finds it; afterwards its
    /// address is cleared (a later trap there cannot happen: the byte is
    /// back).
    pub fn detach(self) -> Result<(), ProbeError> {
        write_live_code(self.address, &[self.original]).map_err(|reason| {
            ProbeError::Unpatchable {
                symbol: String::new(),
                offset: 0,
                address: self.address,
                reason,
            }
        })?;
        ADDRESSES[self.slot].store(0, Ordering::Release);
        crate::claims::release(self.address);
        Ok(())
    }
}

impl Breakpoint {
    /// The object holding the `int3` was unloaded: forget the site.
    pub fn forget_unmapped(self) {
        ADDRESSES[self.slot].store(0, Ordering::Release);
        crate::claims::release(self.address);
    }
}

fn install_handler() -> Result<(), ProbeError> {
    let mut err = None;
    INSTALL.call_once(|| {
        if let Err(e) = crate::syscalls::install_own_handler(
            libc::SIGTRAP,
            on_sigtrap as *const () as usize,
            libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK,
        ) {
            err = Some(e);
        }
    });
    err.map_or(Ok(()), Err)
}

/// Replaces the `nop` at `address` by `int3`; `handler` runs at each hit.
pub fn attach(address: u64, handler: ProbeHandler) -> Result<Breakpoint, ProbeError> {
    place(address, NOP, Some(handler), 0)
}

/// Replaces the first byte of the function entry at `address` (which is
/// `original`) by `int3`: each hit runs `probe`'s entry (a leaked
/// [`crate::uprobe::Probe`] whose continuation is the out-of-line copy of
/// the instruction there) and resumes at that copy.
pub(crate) fn attach_entry(
    address: u64,
    original: u8,
    probe: u64,
) -> Result<Breakpoint, ProbeError> {
    place(address, original, None, probe)
}

fn place(
    address: u64,
    expected: u8,
    handler: Option<ProbeHandler>,
    entry_probe: u64,
) -> Result<Breakpoint, ProbeError> {
    let refuse = |reason: String| ProbeError::Unpatchable {
        symbol: String::new(),
        offset: 0,
        address,
        reason,
    };
    // SAFETY: the caller names mapped code of this process.
    let byte = unsafe { *(address as *const u8) };
    if byte != expected || byte == INT3 {
        return Err(refuse(if expected == NOP {
            format!(
                "expected a 1-byte nop (0x90) there, found {byte:#04x} (another tracer's int3?)"
            )
        } else {
            format!("expected {expected:#04x} there, found {byte:#04x} (another tracer's int3?)")
        }));
    }
    install_handler()?;
    crate::claims::claim(address, 1).map_err(refuse)?;
    let mut used = USED.lock().unwrap();
    if *used == MAX_SITES {
        crate::claims::release(address);
        return Err(refuse(format!("more than {MAX_SITES} int3 probes")));
    }
    let slot = *used;
    let site = Box::leak(Box::new(Site {
        handler,
        entry_probe,
        hits: AtomicU64::new(0),
        missed: AtomicU64::new(0),
    }));
    SITES[slot].store(site, Ordering::Release);
    ADDRESSES[slot].store(address, Ordering::Release);
    *used += 1;
    PUBLISHED.store(*used, Ordering::Release);
    if let Err(reason) = write_live_code(address, &[INT3]) {
        ADDRESSES[slot].store(0, Ordering::Release);
        crate::claims::release(address);
        return Err(refuse(reason));
    }
    Ok(Breakpoint {
        slot,
        address,
        original: expected,
    })
}

fn find(address: u64) -> Option<&'static Site> {
    // Slots are published site first, then address, then the count.
    (0..PUBLISHED.load(Ordering::Acquire))
        .find(|&i| ADDRESSES[i].load(Ordering::Acquire) == address)
        // SAFETY: the site pointer was stored before the address.
        .map(|i| unsafe { &*SITES[i].load(Ordering::Acquire) })
}

extern "C" fn on_sigtrap(_sig: i32, _info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes this thread's ucontext.
    let uc = unsafe { &mut *(ctx as *mut libc::ucontext_t) };
    let g = &uc.uc_mcontext.gregs;
    let r = |i: libc::c_int| g[i as usize] as u64;
    let address = r(libc::REG_RIP).wrapping_sub(1);
    let Some(site) = find(address) else {
        // Not ours: what the process would have done without bpfjet.
        // SAFETY: resetting a signal's action and re-raising it.
        unsafe {
            libc::signal(libc::SIGTRAP, libc::SIG_DFL);
            libc::raise(libc::SIGTRAP);
        }
        return;
    };
    site.hits.fetch_add(1, Ordering::Relaxed);
    let thread = crate::thread::current();
    if site.entry_probe == 0 && !enter_handler(thread) {
        site.missed.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let mut regs = PtRegs::from_signal_gregs(g, address);
    if site.entry_probe != 0 {
        // A function entry: what its jump's trampoline would do (it takes
        // the thread's handler guard itself), then the displaced
        // instruction, out of line.
        let to = crate::uprobe::on_entry(site.entry_probe, &mut regs);
        uc.uc_mcontext.gregs[libc::REG_RIP as usize] = to as i64;
        return;
    }
    if let Some(h) = &site.handler {
        crate::syscalls::allowed(|| h(&mut regs));
    }
    leave_handler(thread);
    // rip is already past the int3, i.e. past the nop it replaced.
}
