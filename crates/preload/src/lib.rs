//! libbpfjet.so: serves a process's `bpf()` calls with bpfjet.
//!
//! It interposes libc's `syscall()` (libbpf and bpftool call
//! `syscall(__NR_bpf, cmd, attr, size)`, and `syscall(__NR_perf_event_open,
//! ...)` for uprobes and tracepoints) and `close()`. A `bpf()` call is
//! decoded ([`bpfjet_sys::decode`]), executed on [`BpfjetBackend`], and its
//! outputs written back; every other system call goes to libc's
//! `syscall()` unchanged. No panic crosses into the host: a failure
//! returns -1 with errno, like the kernel.
//!
//! # The variadic forward
//! `syscall()` is variadic and stable Rust cannot define a variadic
//! function, so it is defined with its maximum of six argument slots. On
//! the System V x86-64 and AArch64 Linux ABIs a variadic caller passes
//! integer arguments exactly where a fixed-signature callee reads them
//! (registers, then the stack), so all six slots are read the way libc's
//! own `syscall()` reads them: slots a caller did not pass hold whatever
//! was there and are ignored by the kernel. They are forwarded to libc's
//! `syscall()` (found with `dlsym(RTLD_NEXT)`) through its variadic type.

mod exec;
mod netlink;

use bpfjet_server::{BpfjetBackend, Namespace};
use bpfjet_sys::{decode, write_back, Backend, Errno};
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

mod ringbuf;

static SERVER: OnceLock<Result<BpfjetBackend, String>> = OnceLock::new();

thread_local! {
    /// Set while bpfjet's own code runs: files it closes are its own, never
    /// a caller's bpf object.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

extern "C" fn release_at_exit() {
    if let Some(Ok(server)) = SERVER.get() {
        INSIDE.with(|i| i.set(true));
        let _ = catch_unwind(AssertUnwindSafe(|| server.release_all()));
    }
}

fn server() -> Result<&'static BpfjetBackend, Errno> {
    let init = || {
        let s = Namespace::from_env().map(BpfjetBackend::new);
        if let Ok(s) = &s {
            exec::prepare(s.namespace());
        }
        // Objects whose holders ended without letting go (killed) go now,
        // as the kernel would have freed them at once.
        if let Ok(s) = &s {
            s.sweep();
        }
        // What the process still holds at exit is let go of then, like
        // the kernel closing its fds.
        // SAFETY: registering a plain extern "C" function.
        unsafe { libc::atexit(release_at_exit) };
        s
    };
    match SERVER.get_or_init(init) {
        Ok(s) => Ok(s),
        Err(why) => {
            static SAID: OnceLock<()> = OnceLock::new();
            SAID.get_or_init(|| eprintln!("bpfjet: cannot serve bpf(): {why}"));
            Err(Errno::EPERM)
        }
    }
}

fn serve(cmd: u32, attr: *mut u8, size: u32) -> Result<i64, Errno> {
    let server = server()?;
    let attr: &mut [u8] = if size == 0 {
        &mut []
    } else if attr.is_null() {
        return Err(Errno::EFAULT);
    } else {
        // SAFETY: the caller passed `size` bytes of attr to bpf().
        unsafe { std::slice::from_raw_parts_mut(attr, size as usize) }
    };
    let command = decode(cmd, attr)?;
    let r = server.execute(&command);
    write_back(&command, attr);
    r
}

fn set_errno(e: i32) {
    // SAFETY: errno is thread-local.
    unsafe { *libc::__errno_location() = e };
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("the syscall() forward assumes the x86-64 or AArch64 Linux calling convention");

type SyscallFn = unsafe extern "C" fn(libc::c_long, ...) -> libc::c_long;
type CloseFn = unsafe extern "C" fn(libc::c_int) -> libc::c_int;

fn next_symbol(name: &std::ffi::CStr) -> *mut libc::c_void {
    // SAFETY: dlsym with a valid C string.
    unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) }
}

fn real_syscall() -> SyscallFn {
    static REAL: OnceLock<usize> = OnceLock::new();
    let p = *REAL.get_or_init(|| next_symbol(c"syscall") as usize);
    // SAFETY: libc's syscall() has this type; libc is always loaded.
    unsafe { std::mem::transmute::<usize, SyscallFn>(p) }
}

fn real_close() -> CloseFn {
    static REAL: OnceLock<usize> = OnceLock::new();
    let p = *REAL.get_or_init(|| next_symbol(c"close") as usize);
    // SAFETY: libc's close() has this type.
    unsafe { std::mem::transmute::<usize, CloseFn>(p) }
}

/// libc's `syscall()`, interposed (see the crate documentation).
///
/// # Safety
/// As libc's `syscall()`.
#[no_mangle]
pub unsafe extern "C" fn syscall(
    n: libc::c_long,
    a1: libc::c_long,
    a2: libc::c_long,
    a3: libc::c_long,
    a4: libc::c_long,
    a5: libc::c_long,
    a6: libc::c_long,
) -> libc::c_long {
    if n == libc::SYS_bpf {
        return bpfjet_bpf(a1, a2, a3);
    }
    if n == libc::SYS_perf_event_open {
        if let Some(r) = perf_event_open(a1, a2, a3, a4, a5) {
            return r;
        }
    }
    if n == libc::SYS_close {
        return closing(a1 as libc::c_int, || {
            real_syscall()(n, a1, a2, a3, a4, a5, a6)
        });
    }
    real_syscall()(n, a1, a2, a3, a4, a5, a6)
}

/// libc's `close()`, interposed: an fd that held a bpfjet object forgets it.
///
/// # Safety
/// As libc's `close()`.
#[no_mangle]
pub unsafe extern "C" fn close(fd: libc::c_int) -> libc::c_int {
    netlink::forget(fd);
    closing(fd, || real_close()(fd))
}

type ReadlinkFn = unsafe extern "C" fn(*const libc::c_char, *mut libc::c_char, usize) -> isize;
type ReadlinkatFn =
    unsafe extern "C" fn(libc::c_int, *const libc::c_char, *mut libc::c_char, usize) -> isize;

/// The fd number of a `/proc/self/fd/N` (or `/proc/<our pid>/fd/N`) path.
fn proc_fd(path: *const libc::c_char) -> Option<i32> {
    if path.is_null() {
        return None;
    }
    // SAFETY: a C string passed to readlink().
    let path = unsafe { std::ffi::CStr::from_ptr(path) }.to_str().ok()?;
    let rest = path.strip_prefix("/proc/")?;
    let (who, fd) = rest.split_once("/fd/")?;
    if who != "self" && who != "thread-self" && who.parse() != Ok(std::process::id()) {
        return None;
    }
    fd.parse().ok()
}

/// What a bpfjet fd's `/proc` link reads as, copied like readlink() does.
fn bpf_link(path: *const libc::c_char, buf: *mut libc::c_char, size: usize) -> Option<isize> {
    let fd = proc_fd(path)?;
    let server = match SERVER.get() {
        Some(Ok(s)) => s,
        _ => return None,
    };
    let link = catch_unwind(AssertUnwindSafe(|| server.fd_link(fd))).ok()??;
    let n = link.len().min(size);
    // SAFETY: readlink's caller provides `size` bytes at `buf`.
    unsafe { std::ptr::copy_nonoverlapping(link.as_ptr(), buf.cast::<u8>(), n) };
    Some(n as isize)
}

/// libc's `readlink()`, interposed so that `/proc/self/fd/N` of a bpfjet
/// object reads like the kernel object's (`anon_inode:bpf-map`).
///
/// # Safety
/// As libc's `readlink()`.
#[no_mangle]
pub unsafe extern "C" fn readlink(
    path: *const libc::c_char,
    buf: *mut libc::c_char,
    size: usize,
) -> isize {
    if let Some(n) = bpf_link(path, buf, size) {
        return n;
    }
    static REAL: OnceLock<usize> = OnceLock::new();
    let p = *REAL.get_or_init(|| next_symbol(c"readlink") as usize);
    // SAFETY: libc's readlink() has this type.
    std::mem::transmute::<usize, ReadlinkFn>(p)(path, buf, size)
}

/// libc's `readlinkat()`, interposed like [`readlink`] for absolute paths.
///
/// # Safety
/// As libc's `readlinkat()`.
#[no_mangle]
pub unsafe extern "C" fn readlinkat(
    dirfd: libc::c_int,
    path: *const libc::c_char,
    buf: *mut libc::c_char,
    size: usize,
) -> isize {
    if let Some(n) = bpf_link(path, buf, size) {
        return n;
    }
    static REAL: OnceLock<usize> = OnceLock::new();
    let p = *REAL.get_or_init(|| next_symbol(c"readlinkat") as usize);
    // SAFETY: libc's readlinkat() has this type.
    std::mem::transmute::<usize, ReadlinkatFn>(p)(dirfd, path, buf, size)
}

type MmapFn = unsafe extern "C" fn(
    *mut libc::c_void,
    usize,
    libc::c_int,
    libc::c_int,
    libc::c_int,
    libc::off_t,
) -> *mut libc::c_void;

/// libc's `mmap()`, interposed: mapping a bpfjet `BPF_F_MMAPABLE` array
/// maps its values with the kernel's layout (offset 0 is element 0), so a
/// libbpf skeleton's `.data`/`.bss` pointers are the program's live memory.
///
/// # Safety
/// As libc's `mmap()`.
#[no_mangle]
pub unsafe extern "C" fn mmap(
    addr: *mut libc::c_void,
    len: usize,
    prot: libc::c_int,
    flags: libc::c_int,
    fd: libc::c_int,
    offset: libc::off_t,
) -> *mut libc::c_void {
    if let Some(mapped) = ringbuf::mmap(addr, len, prot, flags, fd, offset) {
        return mapped;
    }
    if fd >= 0 && !INSIDE.with(|i| i.get()) {
        if let Some(Ok(server)) = SERVER.get() {
            // A perf buffer reader's event: its ring file sized first.
            match catch_unwind(AssertUnwindSafe(|| server.perf_output_mmap(fd, len))) {
                Ok(Some(Err(e))) => {
                    set_errno(e.0);
                    return libc::MAP_FAILED;
                }
                Ok(Some(Ok(()))) => {
                    static REAL: OnceLock<usize> = OnceLock::new();
                    let p = *REAL.get_or_init(|| next_symbol(c"mmap") as usize);
                    // SAFETY: libc's mmap() has this type.
                    return std::mem::transmute::<usize, MmapFn>(p)(
                        addr, len, prot, flags, fd, offset,
                    );
                }
                _ => {}
            }
            let writable = prot & libc::PROT_WRITE != 0 && flags & libc::MAP_SHARED != 0;
            match catch_unwind(AssertUnwindSafe(|| server.mmap_offset(fd, writable))) {
                Ok(Some(Ok(extra))) => {
                    static REAL: OnceLock<usize> = OnceLock::new();
                    let p = *REAL.get_or_init(|| next_symbol(c"mmap") as usize);
                    // SAFETY: libc's mmap() has this type.
                    let mapped = std::mem::transmute::<usize, MmapFn>(p)(
                        addr,
                        len,
                        prot,
                        flags,
                        fd,
                        offset + extra as libc::off_t,
                    );
                    if mapped != libc::MAP_FAILED {
                        // Where the map's values are mapped: a move of the
                        // map to the kernel maps the kernel's there.
                        let _ = catch_unwind(AssertUnwindSafe(|| {
                            server.array_mapped(
                                fd,
                                mapped as usize,
                                len,
                                prot,
                                flags,
                                offset as u64,
                            )
                        }));
                    }
                    return mapped;
                }
                Ok(Some(Err(e))) => {
                    set_errno(e.0);
                    return libc::MAP_FAILED;
                }
                _ => {}
            }
        }
    }
    static REAL: OnceLock<usize> = OnceLock::new();
    let p = *REAL.get_or_init(|| next_symbol(c"mmap") as usize);
    // SAFETY: libc's mmap() has this type.
    std::mem::transmute::<usize, MmapFn>(p)(addr, len, prot, flags, fd, offset)
}

/// `mmap64` is `mmap` on 64-bit Linux.
///
/// # Safety
/// As libc's `mmap64()`.
#[no_mangle]
pub unsafe extern "C" fn mmap64(
    addr: *mut libc::c_void,
    len: usize,
    prot: libc::c_int,
    flags: libc::c_int,
    fd: libc::c_int,
    offset: libc::off_t,
) -> *mut libc::c_void {
    mmap(addr, len, prot, flags, fd, offset)
}

type UnlinkFn = unsafe extern "C" fn(*const libc::c_char) -> libc::c_int;
type UnlinkatFn =
    unsafe extern "C" fn(libc::c_int, *const libc::c_char, libc::c_int) -> libc::c_int;

/// Whether `path` is a bpfjet pin, which is then removed (unpinning).
fn unpin(path: *const libc::c_char) -> bool {
    if path.is_null() || INSIDE.with(|i| i.get()) {
        return false;
    }
    // SAFETY: a C string passed to unlink().
    let cpath = unsafe { std::ffi::CStr::from_ptr(path) };
    let Ok(path) = cpath.to_str() else {
        return false;
    };
    if !path.starts_with('/') {
        return false;
    }
    let server = match SERVER.get() {
        Some(Ok(s)) => s,
        Some(Err(_)) => return false,
        // A process whose first bpf-related call is an unlink (a cleanup
        // tool): join the namespace only for paths on bpffs.
        None if on_bpffs(path) => match server() {
            Ok(s) => s,
            Err(_) => return false,
        },
        None => return false,
    };
    INSIDE.with(|i| i.set(true));
    let removed = catch_unwind(AssertUnwindSafe(|| server.unpin(path))).unwrap_or(false);
    INSIDE.with(|i| i.set(false));
    removed
}

/// Whether `path`'s directory is on a bpf filesystem.
fn on_bpffs(path: &str) -> bool {
    const BPF_FS_MAGIC: i64 = 0xcafe_4a11;
    let dir = std::path::Path::new(path)
        .parent()
        .unwrap_or(std::path::Path::new("/"));
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: a valid C string and statfs buffer.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    (unsafe { libc::statfs(c.as_ptr(), &mut st) } == 0) && st.f_type as i64 == BPF_FS_MAGIC
}

/// libc's `unlink()`, interposed: unlinking a bpfjet pin unpins it (libbpf's
/// `bpf_map__unpin`, `bpf_object__unpin_*`).
///
/// # Safety
/// As libc's `unlink()`.
#[no_mangle]
pub unsafe extern "C" fn unlink(path: *const libc::c_char) -> libc::c_int {
    if unpin(path) {
        return 0;
    }
    static REAL: OnceLock<usize> = OnceLock::new();
    let p = *REAL.get_or_init(|| next_symbol(c"unlink") as usize);
    // SAFETY: libc's unlink() has this type.
    std::mem::transmute::<usize, UnlinkFn>(p)(path)
}

/// libc's `unlinkat()`, interposed like [`unlink`] for absolute paths.
///
/// # Safety
/// As libc's `unlinkat()`.
#[no_mangle]
pub unsafe extern "C" fn unlinkat(
    dirfd: libc::c_int,
    path: *const libc::c_char,
    flags: libc::c_int,
) -> libc::c_int {
    if flags == 0 && unpin(path) {
        return 0;
    }
    static REAL: OnceLock<usize> = OnceLock::new();
    let p = *REAL.get_or_init(|| next_symbol(c"unlinkat") as usize);
    // SAFETY: libc's unlinkat() has this type.
    std::mem::transmute::<usize, UnlinkatFn>(p)(dirfd, path, flags)
}

/// `bpf(cmd, attr, size)`, also callable directly.
#[no_mangle]
pub extern "C" fn bpfjet_bpf(
    cmd: libc::c_long,
    attr: libc::c_long,
    size: libc::c_long,
) -> libc::c_long {
    INSIDE.with(|i| i.set(true));
    let r = catch_unwind(AssertUnwindSafe(|| {
        serve(cmd as u32, attr as *mut u8, size as u32)
    }));
    INSIDE.with(|i| i.set(false));
    match r {
        Ok(Ok(v)) => v as libc::c_long,
        Ok(Err(e)) => {
            set_errno(e.0);
            -1
        }
        Err(_) => {
            eprintln!("bpfjet: internal error serving bpf() command {cmd}; returned EFAULT");
            set_errno(libc::EFAULT);
            -1
        }
    }
}

/// `perf_event_open(attr, pid, ...)` of a probe bpfjet runs in processes
/// (a uprobe, a system-call tracepoint): a stand-in fd the control plane
/// links its program to (`bpfjet_server`'s perf_events). None: the
/// kernel's event.
fn perf_event_open(
    attr: libc::c_long,
    pid: libc::c_long,
    cpu: libc::c_long,
    group_fd: libc::c_long,
    flags: libc::c_long,
) -> Option<libc::c_long> {
    // bpfjet's own call of the kernel's (a timer event's).
    if INSIDE.with(|i| i.get()) {
        return None;
    }
    let server = match server() {
        Ok(s) => s,
        Err(_) => return None,
    };
    INSIDE.with(|i| i.set(true));
    let r = catch_unwind(AssertUnwindSafe(|| {
        server.perf_event_open(
            attr as u64,
            pid as i32,
            cpu as i32,
            group_fd as i32,
            flags as u64,
        )
    }));
    INSIDE.with(|i| i.set(false));
    match r {
        Ok(None) => None,
        Ok(Some(Ok(fd))) => Some(fd as libc::c_long),
        Ok(Some(Err(e))) => {
            set_errno(e.0);
            Some(-1)
        }
        Err(_) => {
            eprintln!("bpfjet: internal error serving perf_event_open; returned EFAULT");
            set_errno(libc::EFAULT);
            Some(-1)
        }
    }
}

type IoctlFn = unsafe extern "C" fn(libc::c_int, libc::c_ulong, ...) -> libc::c_int;

/// libc's `ioctl()`, interposed for the stand-in perf event fds of
/// [`perf_event_open`] (libbpf enables and disables them); every other fd
/// goes to libc's. Variadic as `syscall()` (see the crate documentation):
/// the one argument slot ioctl requests use is read and forwarded.
///
/// # Safety
/// As libc's `ioctl()`.
#[no_mangle]
pub unsafe extern "C" fn ioctl(
    fd: libc::c_int,
    request: libc::c_ulong,
    arg: libc::c_ulong,
) -> libc::c_int {
    if let Some(Ok(server)) = SERVER.get() {
        if !INSIDE.with(|i| i.get()) {
            // bpfjet's own calls while serving it (a timer's maps mapped,
            // a kernel event's ioctl) are not the application's.
            INSIDE.with(|i| i.set(true));
            let r = catch_unwind(AssertUnwindSafe(|| {
                server.perf_event_ioctl(fd, request, arg)
            }));
            INSIDE.with(|i| i.set(false));
            match r {
                Ok(None) => {}
                Ok(Some(Ok(v))) => return v as libc::c_int,
                Ok(Some(Err(e))) => {
                    set_errno(e.0);
                    return -1;
                }
                Err(_) => {
                    set_errno(libc::EFAULT);
                    return -1;
                }
            }
        }
    }
    static REAL: OnceLock<usize> = OnceLock::new();
    let p = *REAL.get_or_init(|| next_symbol(c"ioctl") as usize);
    // SAFETY: libc's ioctl() has this type.
    let real = std::mem::transmute::<usize, IoctlFn>(p);
    real(fd, request, arg)
}

/// Close `fd` with `close`, forgetting what it held, and then let go of
/// the object: after the close, so that the fd's own lock no longer counts
/// as a holder (the object goes if nothing else holds it).
fn closing<R>(fd: libc::c_int, close: impl FnOnce() -> R) -> R {
    let server = match SERVER.get() {
        Some(Ok(s)) if !INSIDE.with(|i| i.get()) => s,
        _ => return close(),
    };
    let taken = catch_unwind(AssertUnwindSafe(|| server.take_fd(fd)))
        .ok()
        .flatten();
    ringbuf::forget(fd);
    let rc = close();
    if let Some(r) = taken {
        // errno must be close()'s.
        // SAFETY: errno is thread-local.
        let saved = unsafe { *libc::__errno_location() };
        let _ = catch_unwind(AssertUnwindSafe(|| server.release(r)));
        set_errno(saved);
    }
    rc
}

// ---- netlink (see [`netlink`]) ----------------------------------------------

type SendtoFn = unsafe extern "C" fn(
    libc::c_int,
    *const libc::c_void,
    usize,
    libc::c_int,
    *const libc::sockaddr,
    libc::socklen_t,
) -> isize;
type SendmsgFn = unsafe extern "C" fn(libc::c_int, *const libc::msghdr, libc::c_int) -> isize;
type RecvfromFn = unsafe extern "C" fn(
    libc::c_int,
    *mut libc::c_void,
    usize,
    libc::c_int,
    *mut libc::sockaddr,
    *mut libc::socklen_t,
) -> isize;
type RecvmsgFn = unsafe extern "C" fn(libc::c_int, *mut libc::msghdr, libc::c_int) -> isize;

fn real_sendto() -> SendtoFn {
    static REAL: OnceLock<usize> = OnceLock::new();
    let p = *REAL.get_or_init(|| next_symbol(c"sendto") as usize);
    // SAFETY: libc's sendto() has this type.
    unsafe { std::mem::transmute::<usize, SendtoFn>(p) }
}

fn real_sendmsg() -> SendmsgFn {
    static REAL: OnceLock<usize> = OnceLock::new();
    let p = *REAL.get_or_init(|| next_symbol(c"sendmsg") as usize);
    // SAFETY: libc's sendmsg() has this type.
    unsafe { std::mem::transmute::<usize, SendmsgFn>(p) }
}

fn real_recvfrom() -> RecvfromFn {
    static REAL: OnceLock<usize> = OnceLock::new();
    let p = *REAL.get_or_init(|| next_symbol(c"recvfrom") as usize);
    // SAFETY: libc's recvfrom() has this type.
    unsafe { std::mem::transmute::<usize, RecvfromFn>(p) }
}

fn real_recvmsg() -> RecvmsgFn {
    static REAL: OnceLock<usize> = OnceLock::new();
    let p = *REAL.get_or_init(|| next_symbol(c"recvmsg") as usize);
    // SAFETY: libc's recvmsg() has this type.
    unsafe { std::mem::transmute::<usize, RecvmsgFn>(p) }
}

/// A message sent on `fd`: Some(bytes) when bpfjet served it.
fn netlink_out(fd: libc::c_int, buf: &[u8]) -> Option<isize> {
    if INSIDE.with(|i| i.get()) {
        return None;
    }
    // Cheap test first: only netlink link requests are candidates.
    if buf.len() < 16 || !matches!(u16::from_ne_bytes([buf[4], buf[5]]), 16 | 18 | 19) {
        return None;
    }
    let server = server().ok()?;
    INSIDE.with(|i| i.set(true));
    let r = catch_unwind(AssertUnwindSafe(|| netlink::outgoing(server, fd, buf)));
    INSIDE.with(|i| i.set(false));
    r.ok().flatten().map(|n| n as isize)
}

/// libc's `sendto()`, interposed for the netlink XDP attach.
///
/// # Safety
/// As libc's `sendto()`.
#[no_mangle]
pub unsafe extern "C" fn sendto(
    fd: libc::c_int,
    buf: *const libc::c_void,
    len: usize,
    flags: libc::c_int,
    addr: *const libc::sockaddr,
    addrlen: libc::socklen_t,
) -> isize {
    if !buf.is_null() {
        // SAFETY: the caller passes `len` bytes at `buf`.
        let bytes = std::slice::from_raw_parts(buf.cast::<u8>(), len);
        if let Some(n) = netlink_out(fd, bytes) {
            return n;
        }
    }
    real_sendto()(fd, buf, len, flags, addr, addrlen)
}

/// libc's `send()`, interposed like [`sendto`].
///
/// # Safety
/// As libc's `send()`.
#[no_mangle]
pub unsafe extern "C" fn send(
    fd: libc::c_int,
    buf: *const libc::c_void,
    len: usize,
    flags: libc::c_int,
) -> isize {
    sendto(fd, buf, len, flags, std::ptr::null(), 0)
}

/// libc's `sendmsg()`, interposed like [`sendto`] (one-iovec messages, as
/// netlink libraries send them).
///
/// # Safety
/// As libc's `sendmsg()`.
#[no_mangle]
pub unsafe extern "C" fn sendmsg(
    fd: libc::c_int,
    msg: *const libc::msghdr,
    flags: libc::c_int,
) -> isize {
    if !msg.is_null() && (*msg).msg_iovlen == 1 && !(*msg).msg_iov.is_null() {
        let iov = &*(*msg).msg_iov;
        if !iov.iov_base.is_null() {
            // SAFETY: the caller's iovec.
            let bytes = std::slice::from_raw_parts(iov.iov_base.cast::<u8>(), iov.iov_len);
            if let Some(n) = netlink_out(fd, bytes) {
                return n;
            }
        }
    }
    real_sendmsg()(fd, msg, flags)
}

/// A receive bpfjet answers: the datagram, copied like the kernel copies
/// (truncated to the room, full length with `MSG_TRUNC`).
fn netlink_in(
    fd: libc::c_int,
    flags: libc::c_int,
    real: impl FnOnce(&mut [u8], i32) -> isize,
) -> Option<Result<Vec<u8>, i32>> {
    if INSIDE.with(|i| i.get()) {
        return None;
    }
    let server = match SERVER.get() {
        Some(Ok(s)) => Some(s),
        _ => None,
    };
    catch_unwind(AssertUnwindSafe(|| {
        netlink::incoming(server, fd, flags, real)
    }))
    .ok()
    .flatten()
}

fn kernel_address(addr: *mut libc::sockaddr, addrlen: *mut libc::socklen_t) {
    if addr.is_null() || addrlen.is_null() {
        return;
    }
    // SAFETY: the caller's address buffer of *addrlen bytes.
    unsafe {
        let mut nl: libc::sockaddr_nl = std::mem::zeroed();
        nl.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        let n = (*addrlen as usize).min(std::mem::size_of::<libc::sockaddr_nl>());
        std::ptr::copy_nonoverlapping(
            (&nl as *const libc::sockaddr_nl).cast::<u8>(),
            addr.cast::<u8>(),
            n,
        );
        *addrlen = std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t;
    }
}

/// libc's `recvmsg()`, interposed for netlink replies bpfjet answers.
///
/// # Safety
/// As libc's `recvmsg()`.
#[no_mangle]
pub unsafe extern "C" fn recvmsg(
    fd: libc::c_int,
    msg: *mut libc::msghdr,
    flags: libc::c_int,
) -> isize {
    if msg.is_null() {
        return real_recvmsg()(fd, msg, flags);
    }
    let real = |buf: &mut [u8], f: i32| {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: a msghdr over our own buffer.
        let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
        m.msg_iov = &mut iov;
        m.msg_iovlen = 1;
        // SAFETY: as above.
        unsafe { real_recvmsg()(fd, &mut m, f) }
    };
    match netlink_in(fd, flags, real) {
        None => real_recvmsg()(fd, msg, flags),
        Some(Err(e)) => {
            set_errno(e);
            -1
        }
        Some(Ok(d)) => {
            let m = &mut *msg;
            let mut copied = 0;
            for i in 0..m.msg_iovlen {
                let iov = &*m.msg_iov.add(i);
                let n = iov.iov_len.min(d.len() - copied);
                std::ptr::copy_nonoverlapping(d[copied..].as_ptr(), iov.iov_base.cast::<u8>(), n);
                copied += n;
            }
            m.msg_flags = if copied < d.len() { libc::MSG_TRUNC } else { 0 };
            m.msg_controllen = 0;
            let mut namelen = m.msg_namelen;
            kernel_address(m.msg_name.cast(), &mut namelen);
            m.msg_namelen = namelen;
            if flags & libc::MSG_TRUNC != 0 {
                d.len() as isize
            } else {
                copied as isize
            }
        }
    }
}

/// libc's `recvfrom()`, interposed like [`recvmsg`].
///
/// # Safety
/// As libc's `recvfrom()`.
#[no_mangle]
pub unsafe extern "C" fn recvfrom(
    fd: libc::c_int,
    buf: *mut libc::c_void,
    len: usize,
    flags: libc::c_int,
    addr: *mut libc::sockaddr,
    addrlen: *mut libc::socklen_t,
) -> isize {
    let real = |b: &mut [u8], f: i32| {
        // SAFETY: our own buffer.
        unsafe {
            real_recvfrom()(
                fd,
                b.as_mut_ptr().cast(),
                b.len(),
                f,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        }
    };
    match netlink_in(fd, flags, real) {
        None => real_recvfrom()(fd, buf, len, flags, addr, addrlen),
        Some(Err(e)) => {
            set_errno(e);
            -1
        }
        Some(Ok(d)) => {
            let n = len.min(d.len());
            if !buf.is_null() {
                std::ptr::copy_nonoverlapping(d.as_ptr(), buf.cast::<u8>(), n);
            }
            kernel_address(addr, addrlen);
            if flags & libc::MSG_TRUNC != 0 {
                d.len() as isize
            } else {
                n as isize
            }
        }
    }
}

/// libc's `recv()`, interposed like [`recvmsg`].
///
/// # Safety
/// As libc's `recv()`.
#[no_mangle]
pub unsafe extern "C" fn recv(
    fd: libc::c_int,
    buf: *mut libc::c_void,
    len: usize,
    flags: libc::c_int,
) -> isize {
    recvfrom(
        fd,
        buf,
        len,
        flags,
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    )
}
