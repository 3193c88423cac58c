//! Programs a tracer starts run with its instance's probe links.
//!
//! On the kernel a uprobe or a system-call tracepoint sees every process,
//! so a tracer that starts its target itself (bpftrace's `-c CMD`,
//! filtering on `cpid`) sees it. Under `bpfjet exec` the programs run only
//! in processes that carry bpfjet's trace agent: once this process has
//! instance has had such a link (its link generation moved), a program a
//! control plane executes gets the agent (`libbpfjet_trace.so`, next to this library)
//! with the instance as its control plane, as `bpfjet trace --instance
//! NAME -- CMD` would start it, in the same process (its pid is the one
//! the tracer filters on). Its report goes nowhere: the tracer reads the
//! maps. Where the instance links nothing for it, the agent does nothing
//! (`BPFJET_TRACE_IF_LINKED`).
//!
//! Interposed: `execve`, `execv`, `execvp`, `execvpe`, `posix_spawn`,
//! `posix_spawnp` (glibc's `system` and `popen` spawn through its
//! internal entry and are not seen: such programs start untraced). A program already traced
//! (its environment names an agent's object or control plane) and the
//! bpfjet binary itself are left as they are. Links made after the
//! program started do not reach it (no `bpfjet trace` watches it).
//!
//! The child may be between a raw `clone` and its `exec` (bpftrace's
//! way), where another thread of its parent may have held the allocator's
//! lock: nothing here allocates there. The settings are prepared when the
//! server starts ([`prepare`]), the new environment is built in pages
//! from `mmap`.

use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::OnceLock;

/// The environment entries a started program gets, prepared in advance.
struct ChildSettings {
    /// `NAME=VALUE` of the agent's settings.
    settings: Vec<CString>,
    /// The agent's path, appended to `LD_PRELOAD`.
    agent: CString,
    /// The line written on stderr (after the program's path).
    note: CString,
    /// The instance's link generation (`links.gen`): non-zero once a
    /// probe link was made in it.
    generation: CString,
}

static CHILD: OnceLock<Option<ChildSettings>> = OnceLock::new();

/// Prepares what a started program gets, for instance `instance` under
/// `run_dir`. Called when the server starts, before any link exists.
pub(crate) fn prepare(ns: &bpfjet_server::Namespace) {
    let (instance, run_dir) = (ns.name(), ns.run_dir());
    CHILD.get_or_init(|| {
        let agent = own_dir()?.join("libbpfjet_trace.so");
        if !agent.exists() {
            return None;
        }
        let settings: Vec<String> = vec![
            format!("BPFJET_TRACE_CONTROL_PLANE={instance}"),
            format!("BPFJET_RUN_DIR={}", run_dir.display()),
            "BPFJET_TRACE_ENGINE=jit".into(),
            "BPFJET_TRACE_REPORT=/dev/null".into(),
            // No agent at all where the instance links nothing for it.
            "BPFJET_TRACE_IF_LINKED=1".into(),
        ];
        Some(ChildSettings {
            settings: settings
                .into_iter()
                .filter_map(|s| CString::new(s).ok())
                .collect(),
            agent: CString::new(agent.as_os_str().as_encoded_bytes()).ok()?,
            note: CString::new(format!(
                " runs with the probe links of bpfjet instance {instance} (a program the tracer \
                 started)\n"
            ))
            .ok()?,
            generation: CString::new(
                bpfjet_server::links_generation(ns)
                    .as_os_str()
                    .as_encoded_bytes(),
            )
            .ok()?,
        })
    });
}

/// Whether a probe link was ever made in the instance: its link
/// generation, read with plain system calls (no allocation).
fn links_made(child: &ChildSettings) -> bool {
    // SAFETY: a C string path; a buffer of 8 bytes we own.
    unsafe {
        let fd = libc::open(child.generation.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let mut g = [0u8; 8];
        let n = libc::read(fd, g.as_mut_ptr() as *mut libc::c_void, 8);
        libc::close(fd);
        n == 8 && u64::from_ne_bytes(g) != 0
    }
}

/// The directory this library was loaded from.
fn own_dir() -> Option<std::path::PathBuf> {
    // SAFETY: dladdr fills `info` for an address inside this library.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let here = own_dir as *const () as *const libc::c_void;
    // SAFETY: as above.
    if unsafe { libc::dladdr(here, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated name owned by the loader.
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    use std::os::unix::ffi::OsStrExt;
    let path = std::path::Path::new(std::ffi::OsStr::from_bytes(name.to_bytes()));
    path.canonicalize().ok()?.parent().map(|p| p.to_path_buf())
}

/// Pages from `mmap` that hold the new environment: never freed when the
/// `exec` succeeds (the image goes), unmapped when it fails.
struct Pages {
    base: *mut u8,
    len: usize,
    used: usize,
}

impl Pages {
    fn new(len: usize) -> Option<Pages> {
        // SAFETY: an anonymous private mapping.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        (p != libc::MAP_FAILED).then_some(Pages {
            base: p as *mut u8,
            len,
            used: 0,
        })
    }

    /// Room for `n` bytes aligned to 8, or None.
    fn take(&mut self, n: usize) -> Option<*mut u8> {
        let at = self.used.next_multiple_of(8);
        if at + n > self.len {
            return None;
        }
        self.used = at + n;
        // SAFETY: within the mapping.
        Some(unsafe { self.base.add(at) })
    }

    /// A copy of the concatenation of `parts`, NUL-terminated.
    fn string(&mut self, parts: &[&[u8]]) -> Option<*const c_char> {
        let n: usize = parts.iter().map(|p| p.len()).sum();
        let dst = self.take(n + 1)?;
        let mut at = 0;
        for p in parts {
            // SAFETY: `dst` has n + 1 bytes.
            unsafe { std::ptr::copy_nonoverlapping(p.as_ptr(), dst.add(at), p.len()) };
            at += p.len();
        }
        // SAFETY: as above.
        unsafe { *dst.add(n) = 0 };
        Some(dst as *const c_char)
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        // SAFETY: our mapping.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// The entries of a NULL-terminated `envp`.
///
/// # Safety
/// `envp` is NULL or a NULL-terminated array of C strings.
unsafe fn entries<'a>(envp: *const *const c_char) -> impl Iterator<Item = &'a CStr> {
    let mut i = 0;
    std::iter::from_fn(move || {
        if envp.is_null() {
            return None;
        }
        // SAFETY: the caller's contract.
        let p = unsafe { *envp.add(i) };
        if p.is_null() {
            return None;
        }
        i += 1;
        // SAFETY: as above.
        Some(unsafe { CStr::from_ptr(p) })
    })
}

const STATIC_NOTE: &[u8] = b" is statically linked: the probe links of the tracer's instance \
cannot run in it (bpfjet's agent needs the dynamic loader); it runs untraced\n";

/// Whether the ELF file at `path` has no program interpreter (a static
/// executable), read with plain system calls into a stack buffer. A file
/// that is not ELF (a script: its interpreter gets the agent), or that
/// cannot be read (a name `execvp` searches `PATH` for), counts as not.
///
/// # Safety
/// `path` is a C string.
unsafe fn statically_linked(path: *const c_char) -> bool {
    let mut buf = [0u8; 4096];
    // SAFETY: a C string path; a buffer we own.
    let n = unsafe {
        let fd = libc::open(path, libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let n = libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len());
        libc::close(fd);
        n
    };
    if n < 64 || buf[..4] != *b"\x7fELF" || buf[4] != 2 {
        return false;
    }
    let half = |at: usize| u16::from_le_bytes([buf[at], buf[at + 1]]) as usize;
    let phoff = u64::from_le_bytes(buf[32..40].try_into().unwrap_or_default()) as usize;
    let (phentsize, phnum) = (half(54), half(56));
    if phentsize < 56 {
        return false;
    }
    // PT_INTERP (3) among the program headers that fit the buffer; without
    // one (static, static-pie) the loader never runs.
    let mut saw_all = true;
    for i in 0..phnum {
        let at = phoff + i * phentsize;
        if at + 4 > n as usize {
            saw_all = false;
            break;
        }
        if u32::from_le_bytes(buf[at..at + 4].try_into().unwrap_or_default()) == 3 {
            return false;
        }
    }
    saw_all
}

/// The environment for starting `path` with the agent, when it should
/// get it (the pages holding it must live until the `exec`).
///
/// # Safety
/// `path` is a C string, `envp` as for [`entries`].
unsafe fn child_env(
    path: *const c_char,
    envp: *const *const c_char,
) -> Option<(Pages, *const *const c_char)> {
    if path.is_null() {
        return None;
    }
    let child = CHILD.get()?.as_ref()?;
    if !links_made(child) {
        return None;
    }
    // SAFETY: the caller's contract.
    let program = unsafe { CStr::from_ptr(path) }.to_bytes();
    let base = program.rsplit(|&b| b == b'/').next().unwrap_or(program);
    if base == b"bpfjet" {
        return None;
    }
    // SAFETY: `path` is a C string.
    if unsafe { statically_linked(path) } {
        // The loader never reads LD_PRELOAD there: said, not hidden.
        for part in [b"bpfjet exec: ".as_slice(), program, STATIC_NOTE] {
            // SAFETY: writing bytes we own to stderr.
            unsafe { libc::write(2, part.as_ptr() as *const libc::c_void, part.len()) };
        }
        return None;
    }
    let mut n = 0;
    let mut preload: Option<&[u8]> = None;
    // SAFETY: the caller's contract.
    for e in unsafe { entries(envp) } {
        let e = e.to_bytes();
        if e.starts_with(b"BPFJET_TRACE_OBJ=") || e.starts_with(b"BPFJET_TRACE_CONTROL_PLANE=") {
            // Already traced, as its starter said.
            return None;
        }
        if let Some(v) = e.strip_prefix(b"LD_PRELOAD=") {
            preload = Some(v);
        }
        n += 1;
    }
    let mut size = (n + child.settings.len() + 2) * 8 + 64;
    size += preload.map_or(0, |p| p.len()) + child.agent.as_bytes().len() + 16;
    size += child
        .settings
        .iter()
        .map(|s| s.as_bytes().len() + 8)
        .sum::<usize>();
    let mut pages = Pages::new(size.next_multiple_of(4096))?;
    let array = pages.take((n + child.settings.len() + 2) * 8)? as *mut *const c_char;
    let mut k = 0;
    let mut push = |p: *const c_char| {
        // SAFETY: the array has room for every entry and the NULL.
        unsafe { *array.add(k) = p };
        k += 1;
    };
    // SAFETY: the caller's contract.
    for e in unsafe { entries(envp) } {
        let b = e.to_bytes();
        // Replaced: LD_PRELOAD and the names `settings` sets.
        let set = |s: &CString| {
            let s = s.as_bytes();
            s.iter()
                .position(|&c| c == b'=')
                .is_some_and(|eq| b.starts_with(&s[..=eq]))
        };
        if b.starts_with(b"LD_PRELOAD=") || child.settings.iter().any(set) {
            continue;
        }
        push(e.as_ptr());
    }
    let agent = child.agent.as_bytes();
    let value = match preload {
        Some(p) if !p.is_empty() => pages.string(&[b"LD_PRELOAD=", p, b":", agent])?,
        _ => pages.string(&[b"LD_PRELOAD=", agent])?,
    };
    push(value);
    for s in &child.settings {
        push(s.as_ptr());
    }
    push(std::ptr::null());
    let note = [b"bpfjet exec: ", program, child.note.as_bytes()];
    for part in note {
        // SAFETY: writing bytes we own to stderr.
        unsafe { libc::write(2, part.as_ptr() as *const libc::c_void, part.len()) };
    }
    Some((pages, array as *const *const c_char))
}

type Execve =
    unsafe extern "C" fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int;

/// libc's `execve` and `execvpe`, looked up when this library is loaded
/// (single-threaded then: a child after a raw `clone` must not take the
/// loader's lock).
static REAL_EXECVE: OnceLock<Execve> = OnceLock::new();
static REAL_EXECVPE: OnceLock<Execve> = OnceLock::new();

fn lookup(name: &CStr) -> Execve {
    // SAFETY: looking up libc's definition of an exec function with
    // execve's signature.
    let f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    assert!(!f.is_null(), "libbpfjet: {name:?} not found in libc");
    // SAFETY: see above.
    unsafe { std::mem::transmute::<*mut libc::c_void, Execve>(f) }
}

extern "C" fn look_up_exec_functions() {
    REAL_EXECVE.get_or_init(|| lookup(c"execve"));
    REAL_EXECVPE.get_or_init(|| lookup(c"execvpe"));
}

#[used]
#[link_section = ".init_array"]
static LOOK_UP_AT_LOAD: extern "C" fn() = look_up_exec_functions;

fn real_execve() -> Execve {
    *REAL_EXECVE.get_or_init(|| lookup(c"execve"))
}

fn real_execvpe() -> Execve {
    *REAL_EXECVPE.get_or_init(|| lookup(c"execvpe"))
}

extern "C" {
    static environ: *const *const c_char;
}

/// `real` (libc's `execve` or `execvpe`) with the environment a started
/// program gets.
///
/// # Safety
/// The C `execve` contract.
unsafe fn exec_with(
    real: Execve,
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    // SAFETY: the caller's contract; the pages live until the call ends.
    let env = unsafe { child_env(path, envp) };
    let e = env.as_ref().map_or(envp, |(_, e)| *e);
    // SAFETY: as above.
    unsafe { real(path, argv, e) }
}

/// # Safety
/// The C `execve` contract.
#[no_mangle]
pub unsafe extern "C" fn execve(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { exec_with(real_execve(), path, argv, envp) }
}

/// # Safety
/// The C `execv` contract.
#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: *const *const c_char) -> c_int {
    // SAFETY: the caller's contract; `environ` is the process's.
    unsafe { execve(path, argv, environ) }
}

/// # Safety
/// The C `execvpe` contract.
#[no_mangle]
pub unsafe extern "C" fn execvpe(
    file: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { exec_with(real_execvpe(), file, argv, envp) }
}

/// # Safety
/// The C `execvp` contract.
#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int {
    // SAFETY: the caller's contract; `environ` is the process's.
    unsafe { execvpe(file, argv, environ) }
}

type PosixSpawn = unsafe extern "C" fn(
    *mut libc::pid_t,
    *const c_char,
    *const libc::posix_spawn_file_actions_t,
    *const libc::posix_spawnattr_t,
    *const *const c_char,
    *const *const c_char,
) -> c_int;

/// libc's `posix_spawn` or `posix_spawnp` (called in the parent: a
/// lookup is safe here).
fn real_spawn(name: &CStr) -> PosixSpawn {
    // SAFETY: looking up libc's definition, which has this signature.
    let f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    assert!(!f.is_null(), "libbpfjet: {name:?} not found in libc");
    // SAFETY: see above.
    unsafe { std::mem::transmute::<*mut libc::c_void, PosixSpawn>(f) }
}

/// A spawn through libc's `name` with the environment a started program
/// gets.
///
/// # Safety
/// The C `posix_spawn` contract.
unsafe fn spawn(
    name: &CStr,
    pid: *mut libc::pid_t,
    path: *const c_char,
    actions: *const libc::posix_spawn_file_actions_t,
    attr: *const libc::posix_spawnattr_t,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    // SAFETY: the caller's contract; the environment lives until the
    // child has executed (posix_spawn returns after the exec).
    let env = unsafe { child_env(path, envp) };
    let e = env.as_ref().map_or(envp, |(_, e)| *e);
    // SAFETY: as above.
    unsafe { real_spawn(name)(pid, path, actions, attr, argv, e) }
}

/// # Safety
/// The C `posix_spawn` contract.
#[no_mangle]
pub unsafe extern "C" fn posix_spawn(
    pid: *mut libc::pid_t,
    path: *const c_char,
    actions: *const libc::posix_spawn_file_actions_t,
    attr: *const libc::posix_spawnattr_t,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { spawn(c"posix_spawn", pid, path, actions, attr, argv, envp) }
}

/// # Safety
/// The C `posix_spawnp` contract.
#[no_mangle]
pub unsafe extern "C" fn posix_spawnp(
    pid: *mut libc::pid_t,
    file: *const c_char,
    actions: *const libc::posix_spawn_file_actions_t,
    attr: *const libc::posix_spawnattr_t,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { spawn(c"posix_spawnp", pid, file, actions, attr, argv, envp) }
}
