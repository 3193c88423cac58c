//! libbpf reports why an open or load failed (a bad relocation, a map the
//! kernel refused) only through its print callback. We collect those lines
//! per thread so they end up in the error of the call that caused them
//! instead of interleaving on stderr.

use libbpf_rs::PrintLevel;
use std::cell::RefCell;
use std::sync::Once;

thread_local! {
    static CAPTURED: RefCell<String> = const { RefCell::new(String::new()) };
}

fn capture(level: PrintLevel, msg: String) {
    // Debug chatter is dropped: it is noise in an error message.
    if level <= PrintLevel::Info {
        CAPTURED.with(|c| c.borrow_mut().push_str(&msg));
    }
}

/// Route libbpf's messages to the per-thread buffer (once per process).
/// The callback is process-global: an application that installs its own
/// after this call takes libbpf's messages away from our errors, nothing worse.
pub(crate) fn install() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        libbpf_rs::set_print(Some((PrintLevel::Info, capture)));
    });
}

/// Forget what this thread collected so far.
pub(crate) fn clear() {
    CAPTURED.with(|c| c.borrow_mut().clear());
}

/// What this thread collected since the last `clear`.
pub(crate) fn take() -> String {
    CAPTURED.with(|c| std::mem::take(&mut *c.borrow_mut()))
}
