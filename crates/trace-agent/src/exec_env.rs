//! The traced tree's settings carried through every `exec`.
//!
//! An executed program gets the agent through its environment
//! (`LD_PRELOAD` and the `BPFJET_TRACE_*` settings, config.rs). A program
//! that executes another with an environment of its own making (`env -i`,
//! `execle`, a `subprocess` with `env=`) would drop them and start
//! untraced, where the kernel's probes go on seeing it. So when an `exec`'s
//! environment lacks them, it is executed with a copy that has them: the
//! program's own entries, less any `BPFJET_TRACE_*` of its own, the
//! settings, and `LD_PRELOAD` with the agent first (the program's own
//! `LD_PRELOAD` after it). An environment that has them already, as
//! inherited ones do, is used as it is.
//!
//! The copy is built where the `exec` is made — the SIGSYS handler, or
//! the hook on libc's exec functions — so without allocating: one
//! anonymous mapping holding the pointer array and the new `LD_PRELOAD`
//! string, unmapped if the `exec` fails. The settings are read once, at
//! the agent's start.

use std::ffi::CString;
use std::sync::OnceLock;

struct Settings {
    /// `NAME=VALUE` of every `BPFJET_TRACE_*` setting.
    entries: Vec<CString>,
    /// The agent's file (what `LD_PRELOAD` must name).
    agent: Vec<u8>,
}

static SETTINGS: OnceLock<Settings> = OnceLock::new();

const PRELOAD: &[u8] = b"LD_PRELOAD=";
const OURS: &[u8] = b"BPFJET_TRACE_";

/// Reads the settings to carry (the agent's environment after its start
/// made it the tree's: `BPFJET_TRACE_JOIN` and `_ROOT` set) and the
/// agent's own file.
pub fn prepare() {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr reads the address of a function of this library.
    let found = unsafe { libc::dladdr(prepare as *const libc::c_void, &mut info) } != 0;
    if !found || info.dli_fname.is_null() {
        return;
    }
    // SAFETY: dladdr's file name is a NUL-terminated string of the loader.
    let agent = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) }
        .to_bytes()
        .to_vec();
    use std::os::unix::ffi::OsStrExt;
    let entries = std::env::vars_os()
        .filter(|(k, _)| k.as_bytes().starts_with(OURS))
        .filter_map(|(k, v)| {
            let mut e = k.as_bytes().to_vec();
            e.push(b'=');
            e.extend_from_slice(v.as_bytes());
            CString::new(e).ok()
        })
        .collect();
    let _ = SETTINGS.set(Settings { entries, agent });
}

/// The bytes of the NUL-terminated string at `p`.
///
/// # Safety
/// `p` is a NUL-terminated string the program passed to `exec`.
unsafe fn c_bytes<'a>(p: *const u8) -> &'a [u8] {
    // SAFETY: the caller's.
    unsafe { std::ffi::CStr::from_ptr(p.cast()) }.to_bytes()
}

/// Whether the `:`/space-separated list `value` names `agent`.
fn names_agent(value: &[u8], agent: &[u8]) -> bool {
    value
        .split(|&b| b == b':' || b == b' ')
        .any(|part| part == agent)
}

/// [`bpfjet_probe::syscalls::ExecEnvHook`]: the environment to execute
/// with instead of `envp`, or None when it carries the settings.
pub fn envp_for_exec(envp: u64) -> Option<(u64, usize)> {
    let s = SETTINGS.get()?;
    let list = envp as *const *const u8;
    // What the program's environment has: its length, its LD_PRELOAD, and
    // how many of the settings it has exactly (and whether any other).
    let mut n = 0usize;
    let mut preload: Option<&[u8]> = None;
    let mut same = 0usize;
    let mut foreign = false;
    if !list.is_null() {
        loop {
            // SAFETY: the program passed a NULL-terminated array of
            // strings (the kernel reads it the same way).
            let p = unsafe { *list.add(n) };
            if p.is_null() {
                break;
            }
            // SAFETY: as above.
            let e = unsafe { c_bytes(p) };
            if let Some(v) = e.strip_prefix(PRELOAD) {
                preload = Some(v);
            } else if e.starts_with(OURS) {
                if s.entries.iter().any(|o| o.as_bytes() == e) {
                    same += 1;
                } else {
                    foreign = true;
                }
            }
            n += 1;
        }
    }
    let preloads_agent = preload.is_some_and(|v| names_agent(v, &s.agent));
    if preloads_agent && same == s.entries.len() && !foreign {
        return None;
    }
    // The copy: pointers (kept entries, the settings, LD_PRELOAD, NULL)
    // then the LD_PRELOAD string: the program's if it names the agent,
    // else the agent and then the program's.
    let program_preload = preload.filter(|v| !v.is_empty());
    let value_len = match program_preload {
        Some(v) if preloads_agent => v.len(),
        Some(v) => s.agent.len() + 1 + v.len(),
        None => s.agent.len(),
    };
    let new_preload_len = PRELOAD.len() + value_len + 1;
    let slots = n + s.entries.len() + 2;
    let bytes = slots * 8 + new_preload_len;
    // SAFETY: a fresh anonymous mapping (mmap is async-signal-safe).
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return None;
    }
    let out = base as *mut *const u8;
    let text = unsafe { (base as *mut u8).add(slots * 8) };
    let mut k = 0usize;
    let mut push = |p: *const u8| {
        // SAFETY: fewer than `slots` pointers are written.
        unsafe { *out.add(k) = p };
        k += 1;
    };
    for i in 0..n {
        // SAFETY: as in the count above.
        let p = unsafe { *list.add(i) };
        let e = unsafe { c_bytes(p) };
        if e.starts_with(PRELOAD) || e.starts_with(OURS) {
            continue;
        }
        push(p);
    }
    for e in &s.entries {
        push(e.as_ptr().cast());
    }
    // LD_PRELOAD=<agent>[:<the program's>]
    let mut w = 0usize;
    let mut put = |b: &[u8]| {
        // SAFETY: `new_preload_len` bytes were reserved after the array.
        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), text.add(w), b.len()) };
        w += b.len();
    };
    put(PRELOAD);
    match program_preload {
        Some(v) if preloads_agent => put(v),
        Some(v) => {
            put(&s.agent);
            put(b":");
            put(v);
        }
        None => put(&s.agent),
    }
    put(b"\0");
    push(text);
    push(std::ptr::null());
    Some((base as u64, bytes))
}

/// For the hook on libc's exec functions (no system call traced): the
/// copy made for this thread's `exec`, unmapped if it returns.
pub fn forget_copy(copy: Option<(u64, usize)>) {
    if let Some((p, len)) = copy {
        // SAFETY: the mapping `envp_for_exec` made.
        unsafe { libc::munmap(p as *mut libc::c_void, len) };
    }
}
