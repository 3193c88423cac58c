//! SIGINT/SIGTERM as a stop flag, so a run ends at a batch boundary and
//! tears down (detaches XDP programs, unlinks shared memory) instead of
//! dying mid-batch.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// The flag the handler sets. A signal handler can only reach statics; the
/// `Arc` handed out points at the same flag through [`StopSignal`].
static SIGNALLED: AtomicBool = AtomicBool::new(false);
static LAST_SIGNAL: AtomicUsize = AtomicUsize::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    // Only async-signal-safe work: two atomic stores.
    LAST_SIGNAL.store(sig as usize, Ordering::Relaxed);
    SIGNALLED.store(true, Ordering::Relaxed);
}

/// Installed SIGINT/SIGTERM handlers feeding a stop flag.
#[derive(Debug)]
pub struct StopSignal {
    stop: Arc<AtomicBool>,
}

impl StopSignal {
    /// Installs the handlers (process-wide; a second call re-installs the
    /// same ones).
    pub fn install() -> std::io::Result<StopSignal> {
        for sig in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: a zeroed sigaction with a plain handler and an empty
            // mask is valid; `on_signal` only stores atomics.
            let rc = unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
                libc::sigemptyset(&mut sa.sa_mask);
                sa.sa_flags = libc::SA_RESTART;
                libc::sigaction(sig, &sa, std::ptr::null_mut())
            };
            if rc != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(StopSignal {
            stop: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The flag workers poll. [`StopSignal::poll`] copies a received
    /// signal into it.
    pub fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.stop)
    }

    /// Whether a signal arrived; if so, raises the workers' flag.
    pub fn poll(&self) -> bool {
        let got = SIGNALLED.load(Ordering::Relaxed);
        if got {
            self.stop.store(true, Ordering::Relaxed);
        }
        got
    }

    /// The signal number that arrived, if any.
    pub fn signal(&self) -> Option<i32> {
        match LAST_SIGNAL.load(Ordering::Relaxed) {
            0 => None,
            s => Some(s as i32),
        }
    }
}
