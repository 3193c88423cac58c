//! Ring buffer fds as libbpf's `ring_buffer__new` and
//! `user_ring_buffer__new` use them: `mmap` with the kernel's offsets
//! (consumer page at 0 — read-write for a RINGBUF, read-only for a
//! USER_RINGBUF; producer page and the data twice at one page — read-only
//! for a RINGBUF, read-write for a USER_RINGBUF), and epoll wake-ups
//! (readable while records wait; for a USER_RINGBUF writable while there
//! is room, woken by drains).
//!
//! A bpfjet map fd names a shared-memory file, which epoll refuses (EPERM
//! for regular files). So `epoll_ctl` on a ring buffer fd registers, in
//! its place and with the caller's event data, an eventfd that a thread of
//! this process signals on the ring's wake-ups ([`WakeupFd`]: producers
//! may run in other processes). The kernel's ring fd is level-triggered —
//! readable while records wait — so every `epoll_wait` first re-arms the
//! eventfds: cleared, then signalled again if a record is ready.

use crate::{next_symbol, set_errno, INSIDE, SERVER};
use bpfjet_maps::WakeupFd;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

type MmapFn = unsafe extern "C" fn(
    *mut libc::c_void,
    usize,
    libc::c_int,
    libc::c_int,
    libc::c_int,
    libc::off_t,
) -> *mut libc::c_void;
type EpollCtlFn = unsafe extern "C" fn(
    libc::c_int,
    libc::c_int,
    libc::c_int,
    *mut libc::epoll_event,
) -> libc::c_int;
type EpollWaitFn = unsafe extern "C" fn(
    libc::c_int,
    *mut libc::epoll_event,
    libc::c_int,
    libc::c_int,
) -> libc::c_int;
type EpollPwaitFn = unsafe extern "C" fn(
    libc::c_int,
    *mut libc::epoll_event,
    libc::c_int,
    libc::c_int,
    *const libc::sigset_t,
) -> libc::c_int;

fn real<T: Copy>(cell: &OnceLock<usize>, name: &std::ffi::CStr) -> T {
    let p = *cell.get_or_init(|| next_symbol(name) as usize);
    // SAFETY: `T` is the libc function type of `name` (callers' contract).
    unsafe { std::mem::transmute_copy::<usize, T>(&p) }
}

fn real_mmap() -> MmapFn {
    static R: OnceLock<usize> = OnceLock::new();
    real(&R, c"mmap")
}

/// Eventfds standing in for ring buffer fds in epoll sets, by ring fd.
static WATCHES: Mutex<Option<HashMap<i32, WakeupFd>>> = Mutex::new(None);
/// Whether any watch exists (so epoll_wait of other programs costs nothing).
static ANY_WATCH: AtomicBool = AtomicBool::new(false);

fn inside() -> bool {
    INSIDE.with(|i| i.get())
}

/// Run bpfjet's own code: its mmaps, closes and epoll calls are its own
/// (opening a map object maps it, which must not come back here).
fn as_bpfjet<T>(f: impl FnOnce() -> T) -> Option<T> {
    INSIDE.with(|i| i.set(true));
    let r = catch_unwind(AssertUnwindSafe(f)).ok();
    INSIDE.with(|i| i.set(false));
    r
}

/// `mmap` of a bpfjet ring buffer fd, or None for any other fd.
///
/// # Safety
/// As libc's `mmap()`.
pub(crate) unsafe fn mmap(
    addr: *mut libc::c_void,
    len: usize,
    prot: libc::c_int,
    flags: libc::c_int,
    fd: libc::c_int,
    offset: libc::off_t,
) -> Option<*mut libc::c_void> {
    if fd < 0 || offset < 0 || inside() {
        return None;
    }
    let Some(Ok(server)) = SERVER.get() else {
        return None;
    };
    let writable = prot & libc::PROT_WRITE != 0 && flags & libc::MAP_SHARED != 0;
    let plan = as_bpfjet(|| server.ringbuf_mmap(fd, offset as u64, len, writable))??;
    let segments = match plan {
        Ok(s) => s,
        Err(e) => {
            set_errno(e.0);
            return Some(libc::MAP_FAILED);
        }
    };
    // One reservation for the whole range, then the pieces over it, so the
    // second copy of the data lands right behind the first.
    let total: usize = segments.iter().map(|s| s.len).sum();
    let place = flags & (libc::MAP_FIXED | libc::MAP_FIXED_NOREPLACE);
    let base = real_mmap()(
        addr,
        total,
        libc::PROT_NONE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | place,
        -1,
        0,
    );
    if base == libc::MAP_FAILED {
        return Some(base);
    }
    let piece_flags = (flags & !libc::MAP_FIXED_NOREPLACE) | libc::MAP_FIXED;
    let mut at = base.cast::<u8>();
    for s in &segments {
        let p = real_mmap()(
            at.cast(),
            s.len,
            prot,
            piece_flags,
            fd,
            s.file_off as libc::off_t,
        );
        if p == libc::MAP_FAILED {
            let e = *libc::__errno_location();
            libc::munmap(base, total);
            set_errno(e);
            return Some(libc::MAP_FAILED);
        }
        at = at.add(s.len);
    }
    Some(base)
}

/// The eventfd registered in `fd`'s place (and whether it stands for
/// "writable", a USER_RINGBUF's), creating it on first use; None when `fd`
/// is no bpfjet ring buffer.
fn watch_fd(fd: i32) -> Option<Result<(i32, bool), i32>> {
    if inside() {
        return None;
    }
    let Some(Ok(server)) = SERVER.get() else {
        return None;
    };
    // A ring buffer map, or a perf buffer reader's perf output event.
    let source = match as_bpfjet(|| server.ringbuf_map(fd))? {
        Some(map) => Ok(map),
        None => Err(as_bpfjet(|| server.perf_output_ring(fd))??),
    };
    let mut watches = WATCHES.lock().unwrap_or_else(PoisonError::into_inner);
    let watches = watches.get_or_insert_with(HashMap::new);
    if let Some(w) = watches.get(&fd) {
        return Some(Ok((w.fd(), w.signals_writable())));
    }
    let made = as_bpfjet(|| match source {
        Ok(map) => WakeupFd::new(map),
        Err(ring) => ring.and_then(|r| WakeupFd::for_perf_ring(std::sync::Arc::new(r))),
    })?;
    match made {
        Ok(w) => {
            let efd = (w.fd(), w.signals_writable());
            watches.insert(fd, w);
            ANY_WATCH.store(true, Ordering::Release);
            Some(Ok(efd))
        }
        Err(e) => Some(Err(e.raw_os_error().unwrap_or(libc::ENOMEM))),
    }
}

/// The ring fd is being closed: its eventfd goes too (and with it the
/// epoll registrations, as the kernel drops a closed file from epoll sets).
pub(crate) fn forget(fd: i32) {
    if !ANY_WATCH.load(Ordering::Acquire) {
        return;
    }
    let gone = WATCHES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_mut()
        .and_then(|w| w.remove(&fd));
    as_bpfjet(|| drop(gone));
}

/// Level-triggered readiness, as the kernel's ring fd: clear each eventfd
/// and signal it again where a record waits.
fn rearm_all() {
    if !ANY_WATCH.load(Ordering::Acquire) {
        return;
    }
    let watches = WATCHES.lock().unwrap_or_else(PoisonError::into_inner);
    for w in watches.iter().flat_map(|m| m.values()) {
        w.rearm();
    }
}

/// libc's `epoll_ctl()`, interposed: a bpfjet ring buffer fd is registered
/// as its eventfd.
///
/// # Safety
/// As libc's `epoll_ctl()`.
#[no_mangle]
pub unsafe extern "C" fn epoll_ctl(
    epfd: libc::c_int,
    op: libc::c_int,
    fd: libc::c_int,
    event: *mut libc::epoll_event,
) -> libc::c_int {
    static R: OnceLock<usize> = OnceLock::new();
    let f: EpollCtlFn = real(&R, c"epoll_ctl");
    let (target, writable) = match catch_unwind(|| watch_fd(fd)).ok().flatten() {
        None => (fd, false),
        Some(Ok(efd)) => efd,
        Some(Err(e)) => {
            set_errno(e);
            return -1;
        }
    };
    if writable && !event.is_null() {
        // A USER_RINGBUF fd is never readable (the kernel's
        // ringbuf_map_poll_user); its eventfd is readable while the ring
        // is full, so only EPOLLOUT may be asked of it.
        let mut ev = *event;
        ev.events &= !((libc::EPOLLIN | libc::EPOLLRDNORM) as u32);
        if ev.events & libc::EPOLLWRNORM as u32 != 0 {
            ev.events |= libc::EPOLLOUT as u32;
        }
        return f(epfd, op, target, &mut ev);
    }
    f(epfd, op, target, event)
}

/// libc's `epoll_wait()`, interposed to re-arm ring buffer eventfds.
///
/// # Safety
/// As libc's `epoll_wait()`.
#[no_mangle]
pub unsafe extern "C" fn epoll_wait(
    epfd: libc::c_int,
    events: *mut libc::epoll_event,
    maxevents: libc::c_int,
    timeout: libc::c_int,
) -> libc::c_int {
    static R: OnceLock<usize> = OnceLock::new();
    let _ = catch_unwind(rearm_all);
    let f: EpollWaitFn = real(&R, c"epoll_wait");
    f(epfd, events, maxevents, timeout)
}

/// libc's `epoll_pwait()`, interposed like [`epoll_wait`].
///
/// # Safety
/// As libc's `epoll_pwait()`.
#[no_mangle]
pub unsafe extern "C" fn epoll_pwait(
    epfd: libc::c_int,
    events: *mut libc::epoll_event,
    maxevents: libc::c_int,
    timeout: libc::c_int,
    sigmask: *const libc::sigset_t,
) -> libc::c_int {
    static R: OnceLock<usize> = OnceLock::new();
    let _ = catch_unwind(rearm_all);
    let f: EpollPwaitFn = real(&R, c"epoll_pwait");
    f(epfd, events, maxevents, timeout, sigmask)
}
