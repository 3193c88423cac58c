//! libbpfjet.so: serves a process's `bpf()` calls with bpfjet.
//!
//! It interposes libc's `syscall()` (libbpf and bpftool call
//! `syscall(__NR_bpf, cmd, attr, size)`) and `close()`. A `bpf()` call is
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
    if n == libc::SYS_close {
        bpfjet_forget_fd(a1 as libc::c_int);
    }
    real_syscall()(n, a1, a2, a3, a4, a5, a6)
}

/// libc's `close()`, interposed: an fd that held a bpfjet object forgets it.
///
/// # Safety
/// As libc's `close()`.
#[no_mangle]
pub unsafe extern "C" fn close(fd: libc::c_int) -> libc::c_int {
    bpfjet_forget_fd(fd);
    real_close()(fd)
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
    let mut offset = offset;
    if fd >= 0 && !INSIDE.with(|i| i.get()) {
        if let Some(Ok(server)) = SERVER.get() {
            let writable = prot & libc::PROT_WRITE != 0 && flags & libc::MAP_SHARED != 0;
            match catch_unwind(AssertUnwindSafe(|| server.mmap_offset(fd, writable))) {
                Ok(Some(Ok(extra))) => offset += extra as libc::off_t,
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

/// Forget what `fd` held (called before it is closed).
#[no_mangle]
pub extern "C" fn bpfjet_forget_fd(fd: libc::c_int) {
    if INSIDE.with(|i| i.get()) {
        return;
    }
    let Some(Ok(server)) = SERVER.get() else {
        return;
    };
    // errno must survive: close() sets it itself.
    // SAFETY: errno is thread-local.
    let saved = unsafe { *libc::__errno_location() };
    let _ = catch_unwind(AssertUnwindSafe(|| server.forget_fd(fd)));
    ringbuf::forget(fd);
    set_errno(saved);
}
