//! C++ exceptions (and thread cancellation) unwinding through hooked calls.
//!
//! A return probe replaces a return address with the return trampoline.
//! The unwinder looks return addresses up in the unwind tables; it finds no
//! entry for the trampoline and the exception ends in `std::terminate`.
//! So before the unwinder walks the stack (`_Unwind_RaiseException`,
//! `_Unwind_ForcedUnwind` in libgcc_s), an entry probe puts every hooked
//! return address of the thread back. Those calls' return handlers do not
//! run (as for `longjmp`); frames the exception does not unwind return
//! normally, untraced.

use crate::shadow;
use crate::symbols::{resolve, LoadedObject, UprobeTarget};
use crate::trampoline;
use crate::uprobe::{attach, Attachment};
use crate::ProbeError;

const UNWINDER: &str = "libgcc_s.so.1";
const ENTRIES: &[&str] = &["_Unwind_RaiseException", "_Unwind_ForcedUnwind"];

/// Puts back every return address this thread's return probes replaced.
pub fn restore_thread_returns() {
    let tramps = [trampoline::return_trampoline(), trampoline::quick_return()];
    let _ = shadow::with(|s| {
        s.drain(|f| {
            // SAFETY: the slot is on this thread's stack, in a frame still
            // live (it was hooked and has not returned).
            unsafe {
                let slot = f.slot as *mut u64;
                if tramps.contains(&*slot) {
                    *slot = f.ret;
                }
            }
        })
    });
}

/// Attaches the guard to the unwinder when the process has loaded it
/// (C++ programs); nothing otherwise.
pub fn attach_guard(objects: &[LoadedObject]) -> Result<Vec<Attachment>, ProbeError> {
    let loaded = objects
        .iter()
        .any(|o| o.path.file_name().is_some_and(|n| n == UNWINDER));
    if !loaded {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for symbol in ENTRIES {
        let t = UprobeTarget {
            path: UNWINDER.into(),
            symbol: (*symbol).into(),
            offset: 0,
        };
        let r = resolve(&t, objects)?;
        out.push(attach(
            &r,
            Some(Box::new(|_: &mut crate::PtRegs| restore_thread_returns())),
            None,
        )?);
    }
    Ok(out)
}
