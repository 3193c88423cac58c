//! Loading a shared object into another, running process with ptrace
//! (`bpfjet trace --pid`).
//!
//! The sequence, each step checked before the next changes anything:
//!
//! 1. [`check_target`]: the process exists, is a 64-bit x86-64 dynamically
//!    linked program, is not traced already, this process may ptrace it
//!    (`/proc/sys/kernel/yama/ptrace_scope` is named in the error), and its
//!    libc exports `dlopen` (glibc 2.34+), whose run-time address is the
//!    libc mapping's load bias (from `/proc/PID/maps`) plus the symbol.
//! 2. [`inject_dlopen`]: every thread is `PTRACE_SEIZE`d and
//!    `PTRACE_INTERRUPT`ed (the task list is read again until no new thread
//!    appears). A thread stopped inside the dynamic loader (it may hold the
//!    loader lock `dlopen` takes), inside the bytes a patch will displace,
//!    or with a frame on its stack returning into them ([`patch_hazards`])
//!    is not a safe point: all threads are resumed for a moment and
//!    stopped again.
//! 3. One thread calls `dlopen(PATH, RTLD_NOW)`: its full register set
//!    (including `orig_rax`) and its whole extended state (x87, SSE, AVX
//!    and AVX-512 upper halves: `NT_X86_XSTATE`) are saved; the path is
//!    written below its stack pointer past the red zone, a return address
//!    of 0 is pushed, and it is resumed at `dlopen` with `orig_rax` = -1
//!    (so the kernel does not treat the stop as an interrupted system call
//!    to restart at the new `rip`). The return faults at address 0: that
//!    `SIGSEGV` stop is where the result is read; the signal is never
//!    delivered.
//! 4. The registers are restored and every thread detached. The injected
//!    thread is detached from a signal-delivery stop with its original
//!    `orig_rax` and `rax`, so a system call the interrupt broke
//!    (`-ERESTARTSYS`, `-ERESTARTNOHAND`, `-ERESTARTNOINTR`,
//!    `-ERESTART_RESTARTBLOCK`) is restarted by the kernel exactly as it
//!    would have been after the interrupt; a thread that was stopped while
//!    a signal was being delivered to it gets that signal back at detach.
//!
//! 5. With system-call tracing ([`inject_dlopen_then`]), before step 4,
//!    every thread calls the agent's per-thread enable function the same
//!    way (registers and extended state saved and restored, a return to 0,
//!    its stop kept for the detach), each at a safe point that also
//!    excludes libc's allocator ([`Hazards::allocator`]: the function
//!    allocates the thread's block of the agent's thread-locals). A thread
//!    that already uses Syscall User Dispatch is refused first, nothing
//!    changed. [`disable_dispatch`] turns dispatch off in every thread
//!    with `PTRACE_SET_SYSCALL_USER_DISPATCH_CONFIG` at the detach.
//!
//! While the injected call runs, the other threads stay stopped, so the
//! loaded object's constructor runs alone. If `dlopen` has not returned
//! after [`SOLO_TIMEOUT`] (another stopped thread holds a lock it needs),
//! the other threads are resumed and the call is waited for up to
//! [`CALL_TIMEOUT`]; [`Injection::others_resumed`] says so.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long the injected call runs with every other thread stopped.
pub const SOLO_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the injected call may take in all.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Attempts at finding every thread outside the loader and the windows.
const SAFE_POINT_ATTEMPTS: usize = 200;

/// A process checked for injection.
#[derive(Debug, Clone)]
pub struct Target {
    pub pid: i32,
    /// The executable (`/proc/PID/exe`'s target).
    pub exe: PathBuf,
    /// `dlopen`'s run-time address in the target.
    pub dlopen: u64,
    /// The objects the process has mapped, with their load biases.
    pub objects: Vec<crate::LoadedObject>,
}

/// What one injection did.
#[derive(Debug)]
pub struct Injection {
    /// `dlopen`'s result (0: it failed).
    pub handle: u64,
    /// Threads stopped during the call.
    pub threads: usize,
    /// The call did not return within [`SOLO_TIMEOUT`] and the other
    /// threads were resumed while it ran.
    pub others_resumed: bool,
    /// Times the threads were resumed and stopped again before a safe
    /// point was found.
    pub retries: usize,
    /// From the first thread stopped to the last detached (what the
    /// process lost to the attach, loading and attaching included).
    pub stopped_for: Duration,
}

fn ptrace_scope() -> String {
    match std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope") {
        Ok(s) => {
            let v = s.trim();
            let meaning = match v {
                "0" => "classic: same uid",
                "1" => "restricted: only a parent, CAP_SYS_PTRACE or a PR_SET_PTRACER exception",
                "2" => "admin-only: CAP_SYS_PTRACE",
                "3" => "no attach at all",
                _ => "unknown",
            };
            format!("/proc/sys/kernel/yama/ptrace_scope is {v} ({meaning})")
        }
        Err(_) => "no Yama ptrace_scope".into(),
    }
}

/// bpfjet's trace agent among a process's objects, if it is loaded there.
pub fn agent_object(objects: &[crate::LoadedObject]) -> Option<&crate::LoadedObject> {
    objects.iter().find(|o| {
        o.path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("libbpfjet_trace"))
    })
}

/// The objects mapped in `pid` (a file mapped at offset 0) and their load
/// biases: the mapping's start minus the page-aligned virtual address of
/// the ELF segment at file offset 0.
pub fn process_objects(pid: i32) -> Result<Vec<crate::LoadedObject>, String> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map_err(|e| format!("/proc/{pid}/maps: {e}"))?;
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    for line in maps.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || !f[5].starts_with('/') || f[2] != "00000000" {
            continue;
        }
        let path = PathBuf::from(f[5..].join(" "));
        if !seen.insert(path.clone()) {
            continue;
        }
        let start = f[0]
            .split('-')
            .next()
            .and_then(|s| u64::from_str_radix(s, 16).ok())
            .ok_or_else(|| format!("/proc/{pid}/maps: bad line {line:?}"))?;
        // Only the headers are read (a process may map libraries of
        // hundreds of megabytes).
        let Ok(f) = std::fs::File::open(format!("/proc/{pid}/root{}", path.display())) else {
            continue;
        };
        let cache = object::ReadCache::new(f);
        let Ok(file) = object::File::parse(&cache) else {
            continue;
        };
        use object::{Object, ObjectSegment};
        let Some(first) = file.segments().find(|s| s.file_range().0 == 0) else {
            continue;
        };
        let bias = start.wrapping_sub(first.address() & !0xfff);
        let entry = crate::LoadedObject { path, bias };
        if exe.as_ref() == Some(&entry.path) {
            out.insert(0, entry);
        } else {
            out.push(entry);
        }
    }
    Ok(out)
}

/// Everything that can be checked without touching the process.
pub fn check_target(pid: i32) -> Result<Target, String> {
    if pid <= 0 {
        return Err(format!("--pid {pid}: not a process id"));
    }
    if pid as u32 == std::process::id() {
        return Err(format!("--pid {pid}: that is bpfjet itself"));
    }
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    if !proc_dir.exists() {
        return Err(format!("--pid {pid}: no such process"));
    }
    let status = std::fs::read_to_string(proc_dir.join("status"))
        .map_err(|e| format!("--pid {pid}: {e}"))?;
    if let Some(tgid) = status.lines().find_map(|l| l.strip_prefix("Tgid:")) {
        if tgid.trim() != pid.to_string() {
            return Err(format!(
                "--pid {pid}: a thread of process {}; give the process id",
                tgid.trim()
            ));
        }
    }
    let state = status
        .lines()
        .find_map(|l| l.strip_prefix("State:"))
        .unwrap_or("")
        .trim();
    if state.starts_with('Z') || state.starts_with('X') {
        return Err(format!("--pid {pid}: the process has ended ({state})"));
    }
    if state.starts_with('T') {
        // The injected call would run a thread of a stopped process, and
        // detaching would have to recreate the job-control stop.
        return Err(format!(
            "--pid {pid}: the process is stopped ({state}); continue it first (kill -CONT {pid})"
        ));
    }
    if let Some(tracer) = status.lines().find_map(|l| l.strip_prefix("TracerPid:")) {
        let tracer = tracer.trim();
        if tracer != "0" {
            return Err(format!(
                "--pid {pid}: already traced by task {tracer} (its TracerPid: a debugger or strace); a \
                 process has one tracer at a time"
            ));
        }
    }
    let exe = std::fs::read_link(proc_dir.join("exe")).map_err(|e| {
        format!(
            "--pid {pid}: cannot read its executable ({e}): no permission to inspect it \
             (bpfjet needs the rights to ptrace it; {})",
            ptrace_scope()
        )
    })?;
    let exe_file = proc_dir.join("exe");
    let mut head = Vec::with_capacity(64);
    {
        use std::io::Read;
        std::fs::File::open(&exe_file)
            .and_then(|f| f.take(64).read_to_end(&mut head))
            .map_err(|e| format!("--pid {pid}: {}: {e}", exe.display()))?;
    }
    if head.len() < 20 || &head[..4] != b"\x7fELF" {
        return Err(format!(
            "--pid {pid}: {} is not an ELF executable",
            exe.display()
        ));
    }
    if head[4] != 2 {
        return Err(format!(
            "--pid {pid}: {} is a 32-bit program; bpfjet's agent is x86-64 only",
            exe.display()
        ));
    }
    let machine = u16::from_le_bytes([head[18], head[19]]);
    if machine != 62 {
        return Err(format!(
            "--pid {pid}: {} is not an x86-64 program (e_machine {machine})",
            exe.display()
        ));
    }
    crate::symbols::check_dynamic(&exe_file).map_err(|e| {
        format!(
            "--pid {pid}: {}: {e} (a statically linked program has no dynamic loader to load \
             the agent with)",
            exe.display()
        )
    })?;
    let objects = process_objects(pid)?;
    if let Some(agent) = agent_object(&objects) {
        return Err(format!(
            "--pid {pid}: bpfjet's agent is already loaded in it ({}): an earlier `bpfjet \
             trace` attached to it; attaching twice is not supported",
            agent.path.display()
        ));
    }
    let libc = objects
        .iter()
        .find(|o| {
            o.path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("libc.so"))
        })
        .ok_or_else(|| format!("--pid {pid}: no libc.so mapped in the process"))?;
    let sym = crate::symbols::file_symbol(
        &PathBuf::from(format!("/proc/{pid}/root{}", libc.path.display())),
        "dlopen",
    )
    .map_err(|e| {
        format!(
            "--pid {pid}: {}: no dlopen ({e}); glibc 2.34 or later is needed",
            libc.path.display()
        )
    })?;
    Ok(Target {
        pid,
        exe,
        dlopen: libc.bias.wrapping_add(sym.vaddr),
        objects,
    })
}

/// Where no thread may be when the agent patches `addrs` (entry and USDT
/// patch sites) in the process.
#[derive(Debug, Default, Clone)]
pub struct Hazards {
    /// Half-open ranges: the bytes after each patched address that its
    /// jump displaces (a thread resumed there would run half a jump).
    pub windows: Vec<(u64, u64)>,
    /// Return addresses inside displaced bytes (after a short call among
    /// them): a frame on a thread's stack returning there is as bad.
    pub return_addresses: BTreeSet<u64>,
    /// libc's allocator entry points (half-open ranges), when a call the
    /// tracer injects in every thread allocates (the agent's per-thread
    /// block, for system-call tracing): a thread stopped inside one, or
    /// with a frame returning into one, may hold an arena lock its own
    /// injected call would wait for forever.
    pub allocator: Vec<(u64, u64)>,
}

/// libc's allocator functions whose frames mark a thread inside malloc.
const ALLOCATOR_FUNCTIONS: &[&str] = &[
    "malloc",
    "free",
    "calloc",
    "realloc",
    "reallocarray",
    "memalign",
    "posix_memalign",
    "aligned_alloc",
    "valloc",
    "pvalloc",
    "malloc_trim",
    "malloc_stats",
    "malloc_info",
    "mallinfo",
    "mallinfo2",
    "malloc_usable_size",
    "cfree",
];

/// The run-time addresses of those of libc's functions `names` that its
/// dynamic symbols define, in `target` (functions the agent patches by
/// itself: the system-call fast path's wrappers, `_exit`).
pub fn libc_functions(target: &Target, names: &[&str]) -> Vec<u64> {
    let Some(libc) = target.objects.iter().find(|o| {
        o.path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("libc.so"))
    }) else {
        return Vec::new();
    };
    let file = PathBuf::from(format!("/proc/{}/root{}", target.pid, libc.path.display()));
    names
        .iter()
        .filter_map(|n| crate::symbols::file_symbol(&file, n).ok())
        .map(|s| libc.bias.wrapping_add(s.vaddr))
        .collect()
}

/// The run-time ranges of libc's allocator functions in `target`
/// ([`Hazards::allocator`]), from libc's dynamic symbols.
pub fn allocator_hazards(target: &Target) -> Result<Vec<(u64, u64)>, String> {
    let pid = target.pid;
    let libc = target
        .objects
        .iter()
        .find(|o| {
            o.path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("libc.so"))
        })
        .ok_or_else(|| format!("--pid {pid}: no libc.so mapped in the process"))?;
    let mut out = Vec::new();
    for name in ALLOCATOR_FUNCTIONS {
        let file = PathBuf::from(format!("/proc/{pid}/root{}", libc.path.display()));
        if let Ok(sym) = crate::symbols::file_symbol(&file, name) {
            if sym.size == 0 {
                return Err(format!(
                    "--pid {pid}: {}: {name} has no size: cannot tell a thread inside the \
                     allocator",
                    libc.path.display()
                ));
            }
            let start = libc.bias.wrapping_add(sym.vaddr);
            out.push((start, start + sym.size));
        }
    }
    if out.is_empty() {
        return Err(format!(
            "--pid {pid}: {}: no malloc symbol",
            libc.path.display()
        ));
    }
    Ok(out)
}

/// The displaced bytes of a jump patch at each of `addrs`, decoded from the
/// process's memory as the patcher decodes them (whole instructions
/// covering 5 bytes).
pub fn patch_hazards(pid: i32, addrs: &[u64]) -> Result<Hazards, String> {
    use iced_x86::{Decoder, DecoderOptions, FlowControl};
    let mut h = Hazards::default();
    for &a in addrs {
        let mut code = [0u8; 32];
        read_memory(pid, a, &mut code)?;
        let mut dec = Decoder::with_ip(64, &code, a, DecoderOptions::NONE);
        let mut end = a;
        let mut calls = Vec::new();
        while end < a + crate::relocate::JMP_REL32_LEN as u64 && dec.can_decode() {
            let ins = dec.decode();
            if ins.is_invalid() {
                return Err(format!(
                    "undecodable instruction at {:#x} in process {pid}",
                    ins.ip()
                ));
            }
            end = ins.next_ip();
            if matches!(
                ins.flow_control(),
                FlowControl::Call | FlowControl::IndirectCall
            ) {
                calls.push(end);
            }
        }
        h.windows.push((a + 1, end));
        h.return_addresses
            .extend(calls.into_iter().filter(|&r| r > a && r < end));
    }
    Ok(h)
}

fn read_memory(pid: i32, addr: u64, buf: &mut [u8]) -> Result<(), String> {
    use std::os::unix::fs::FileExt;
    let mem = std::fs::File::open(format!("/proc/{pid}/mem"))
        .map_err(|e| format!("/proc/{pid}/mem: {e}"))?;
    mem.read_exact_at(buf, addr)
        .map_err(|e| format!("reading {} bytes at {addr:#x} of {pid}: {e}", buf.len()))
}

/// Whether a word of `tid`'s stack, from its stack pointer to the end of
/// the mapping holding it, is one of `returns`.
fn stack_returns_into(pid: i32, rsp: u64, returns: &BTreeSet<u64>) -> Option<u64> {
    if returns.is_empty() {
        return None;
    }
    stack_word(pid, rsp, &|w| returns.contains(&w))
}

/// The first word of a thread's stack, from its stack pointer to the end
/// of the mapping holding it, for which `wanted` holds.
fn stack_word(pid: i32, rsp: u64, wanted: &dyn Fn(u64) -> bool) -> Option<u64> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let top = maps.lines().find_map(|l| {
        let (a, b) = l.split_whitespace().next()?.split_once('-')?;
        let (a, b) = (
            u64::from_str_radix(a, 16).ok()?,
            u64::from_str_radix(b, 16).ok()?,
        );
        (a..b).contains(&rsp).then_some(b)
    })?;
    let len = (top - (rsp & !7)).min(16 << 20) as usize;
    let mut stack = vec![0u8; len];
    read_memory(pid, rsp & !7, &mut stack).ok()?;
    stack
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
        .find(|&w| wanted(w))
}

fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

fn ptrace(
    req: libc::c_uint,
    tid: i32,
    addr: u64,
    data: u64,
) -> Result<libc::c_long, std::io::Error> {
    // SAFETY: ptrace requests with plain values or pointers to our own
    // buffers of the size the request needs.
    let r = unsafe {
        libc::ptrace(
            req,
            tid,
            addr as *mut libc::c_void,
            data as *mut libc::c_void,
        )
    };
    if r == -1 {
        Err(errno())
    } else {
        Ok(r)
    }
}

/// How a stopped thread was stopped.
#[derive(Clone, Copy, Debug)]
enum Stop {
    /// `PTRACE_INTERRUPT`'s (or a group) event stop: resumed with no signal.
    Event,
    /// A signal was being delivered: resumed with it, so it is not lost.
    Signal(i32),
}

struct Stopped {
    pid: i32,
    threads: BTreeMap<i32, Stop>,
}

fn tasks(pid: i32) -> BTreeSet<i32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Waits for `tid`'s next stop; None when it exited.
fn wait_stop(tid: i32, deadline: Option<Instant>) -> Result<Option<(Stop, i32)>, String> {
    loop {
        let mut status = 0;
        // SAFETY: waitpid on a thread we trace.
        let r = unsafe { libc::waitpid(tid, &mut status, libc::__WALL | libc::WNOHANG) };
        if r == -1 {
            let e = errno();
            if e.raw_os_error() == Some(libc::ECHILD) {
                return Ok(None);
            }
            return Err(format!("waitpid({tid}): {e}"));
        }
        if r == 0 {
            if deadline.is_some_and(|d| Instant::now() > d) {
                return Err(format!("thread {tid} did not stop"));
            }
            std::thread::sleep(Duration::from_micros(200));
            continue;
        }
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            return Ok(None);
        }
        if libc::WIFSTOPPED(status) {
            let sig = libc::WSTOPSIG(status);
            let event = (status >> 16) & 0xff;
            if event == libc::PTRACE_EVENT_STOP {
                return Ok(Some((Stop::Event, sig)));
            }
            return Ok(Some((Stop::Signal(sig), sig)));
        }
    }
}

impl Stopped {
    /// Seizes and stops every thread of `pid`.
    fn seize(pid: i32) -> Result<Stopped, String> {
        let mut s = Stopped {
            pid,
            threads: BTreeMap::new(),
        };
        s.seize_new()?;
        if s.threads.is_empty() {
            return Err(format!("--pid {pid}: the process ended"));
        }
        Ok(s)
    }

    /// Seizes and stops the threads not seized yet, reading the task list
    /// until no new thread appears (threads keep being created until every
    /// thread that could create one is stopped).
    fn seize_new(&mut self) -> Result<(), String> {
        let pid = self.pid;
        let mut seized: BTreeSet<i32> = self.threads.keys().copied().collect();
        loop {
            let new: Vec<i32> = tasks(pid).difference(&seized).copied().collect();
            if new.is_empty() {
                return Ok(());
            }
            for tid in new {
                match ptrace(libc::PTRACE_SEIZE, tid, 0, 0) {
                    Ok(_) => {}
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) => continue,
                    Err(e) => {
                        self.detach_all();
                        let why = if e.raw_os_error() == Some(libc::EPERM) {
                            format!(
                                "not permitted ({}; root or CAP_SYS_PTRACE, or the same user \
                                 with ptrace_scope 0, can attach)",
                                ptrace_scope()
                            )
                        } else {
                            e.to_string()
                        };
                        return Err(format!("--pid {pid}: PTRACE_SEIZE of thread {tid}: {why}"));
                    }
                }
                seized.insert(tid);
                if ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0).is_err() {
                    continue;
                }
                match wait_stop(tid, Some(Instant::now() + Duration::from_secs(5))) {
                    Ok(Some((stop, _))) => {
                        self.threads.insert(tid, stop);
                    }
                    Ok(None) => {}
                    Err(e) => {
                        self.detach_all();
                        return Err(format!("--pid {pid}: {e}"));
                    }
                }
            }
        }
    }

    /// Resumes every thread but `except`.
    fn resume(&mut self, except: Option<i32>) {
        for (&tid, stop) in self.threads.iter_mut() {
            if Some(tid) == except {
                continue;
            }
            let sig = match *stop {
                Stop::Event => 0,
                Stop::Signal(s) => s,
            };
            let _ = ptrace(libc::PTRACE_CONT, tid, 0, sig as u64);
            *stop = Stop::Event;
        }
    }

    /// Stops again every thread resumed by [`Stopped::resume`] (and any
    /// new thread).
    fn restop(&mut self, except: Option<i32>) -> Result<(), String> {
        let running: Vec<i32> = self
            .threads
            .keys()
            .copied()
            .filter(|&t| Some(t) != except)
            .collect();
        for &tid in &running {
            let _ = ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0);
        }
        for tid in running {
            match wait_stop(tid, Some(Instant::now() + Duration::from_secs(5)))? {
                Some((stop, _)) => {
                    self.threads.insert(tid, stop);
                }
                None => {
                    self.threads.remove(&tid);
                }
            }
        }
        // Threads created while running.
        self.seize_new()
    }

    fn detach_all(&mut self) {
        for (&tid, stop) in &self.threads {
            let sig = match *stop {
                Stop::Event => 0,
                Stop::Signal(s) => s,
            };
            let _ = ptrace(libc::PTRACE_DETACH, tid, 0, sig as u64);
        }
        self.threads.clear();
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        self.detach_all();
    }
}

fn get_regs(tid: i32) -> Result<libc::user_regs_struct, String> {
    // SAFETY: plain-data struct filled by the kernel.
    let mut r: libc::user_regs_struct = unsafe { std::mem::zeroed() };
    ptrace(libc::PTRACE_GETREGS, tid, 0, &mut r as *mut _ as u64)
        .map_err(|e| format!("PTRACE_GETREGS of thread {tid}: {e}"))?;
    Ok(r)
}

fn set_regs(tid: i32, r: &libc::user_regs_struct) -> Result<(), String> {
    ptrace(libc::PTRACE_SETREGS, tid, 0, r as *const _ as u64)
        .map(|_| ())
        .map_err(|e| format!("PTRACE_SETREGS of thread {tid}: {e}"))
}

/// A thread's whole extended register state (x87, SSE, and the AVX /
/// AVX-512 upper halves `PTRACE_GETFPREGS` does not cover): the injected
/// call runs glibc's string functions, which use ymm registers, and the
/// thread may have been stopped in the middle of vector code.
struct ExtendedState {
    /// `NT_X86_XSTATE` as the kernel laid it out, or the FXSAVE area when
    /// the kernel has no XSAVE regset.
    bytes: Vec<u8>,
    xstate: bool,
}

const NT_X86_XSTATE: u64 = 0x202;

impl ExtendedState {
    fn save(tid: i32) -> Result<ExtendedState, String> {
        let mut buf = vec![0u8; 64 << 10];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        if ptrace(
            libc::PTRACE_GETREGSET,
            tid,
            NT_X86_XSTATE,
            &mut iov as *mut _ as u64,
        )
        .is_ok()
        {
            buf.truncate(iov.iov_len);
            return Ok(ExtendedState {
                bytes: buf,
                xstate: true,
            });
        }
        let mut fp = vec![0u8; std::mem::size_of::<libc::user_fpregs_struct>()];
        ptrace(libc::PTRACE_GETFPREGS, tid, 0, fp.as_mut_ptr() as u64)
            .map_err(|e| format!("PTRACE_GETFPREGS of thread {tid}: {e}"))?;
        Ok(ExtendedState {
            bytes: fp,
            xstate: false,
        })
    }

    fn restore(&self, tid: i32) -> Result<(), String> {
        if self.xstate {
            let mut iov = libc::iovec {
                iov_base: self.bytes.as_ptr() as *mut libc::c_void,
                iov_len: self.bytes.len(),
            };
            return ptrace(
                libc::PTRACE_SETREGSET,
                tid,
                NT_X86_XSTATE,
                &mut iov as *mut _ as u64,
            )
            .map(|_| ())
            .map_err(|e| format!("PTRACE_SETREGSET(NT_X86_XSTATE) of thread {tid}: {e}"));
        }
        ptrace(libc::PTRACE_SETFPREGS, tid, 0, self.bytes.as_ptr() as u64)
            .map(|_| ())
            .map_err(|e| format!("PTRACE_SETFPREGS of thread {tid}: {e}"))
    }
}

fn write_memory(pid: i32, addr: u64, bytes: &[u8]) -> Result<(), String> {
    use std::os::unix::fs::FileExt;
    let mem = std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/proc/{pid}/mem"))
        .map_err(|e| format!("/proc/{pid}/mem: {e}"))?;
    mem.write_all_at(bytes, addr)
        .map_err(|e| format!("writing {} bytes at {addr:#x} of {pid}: {e}", bytes.len()))
}

/// The address ranges of the dynamic loader in `pid`.
fn loader_ranges(pid: i32) -> Vec<(u64, u64)> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    maps.lines()
        .filter(|l| l.contains("/ld-linux") || l.contains("/ld-2.") || l.contains("/ld64"))
        .filter_map(|l| {
            let (a, b) = l.split_whitespace().next()?.split_once('-')?;
            Some((
                u64::from_str_radix(a, 16).ok()?,
                u64::from_str_radix(b, 16).ok()?,
            ))
        })
        .collect()
}

/// Why thread `tid` is not at a safe point, if it is not.
fn unsafe_point(
    pid: i32,
    tid: i32,
    loader: &[(u64, u64)],
    avoid: &Hazards,
) -> Result<Option<String>, String> {
    let r = get_regs(tid)?;
    if loader.iter().any(|&(a, b)| (a..b).contains(&r.rip)) {
        return Ok(Some(format!(
            "thread {tid} is in the dynamic loader ({:#x})",
            r.rip
        )));
    }
    if avoid.windows.iter().any(|&(a, b)| (a..b).contains(&r.rip)) {
        return Ok(Some(format!(
            "thread {tid} is in the bytes a patch displaces ({:#x})",
            r.rip
        )));
    }
    if let Some(ret) = stack_returns_into(pid, r.rsp, &avoid.return_addresses) {
        return Ok(Some(format!(
            "thread {tid} has a frame returning into bytes a patch displaces ({ret:#x})"
        )));
    }
    if !avoid.allocator.is_empty() {
        let inside = |a: u64| avoid.allocator.iter().any(|&(s, e)| (s..e).contains(&a));
        if inside(r.rip) {
            return Ok(Some(format!(
                "thread {tid} is in libc's allocator ({:#x})",
                r.rip
            )));
        }
        if let Some(ret) = stack_word(pid, r.rsp, &inside) {
            return Ok(Some(format!(
                "thread {tid} has a frame in libc's allocator ({ret:#x})"
            )));
        }
    }
    Ok(None)
}

/// Makes `target` call `dlopen(library, RTLD_NOW)` on one of its threads
/// and detaches (module documentation). `avoid`: where no thread may be
/// stopped while the library's constructor runs ([`patch_hazards`]).
pub fn inject_dlopen(
    target: &Target,
    library: &Path,
    avoid: &Hazards,
) -> Result<Injection, String> {
    inject_dlopen_then(target, library, avoid, None).map(|(i, _)| i)
}

/// [`inject_dlopen`], then, while every thread is still stopped, makes
/// each thread of the process call `library`'s function `per_thread` (no
/// arguments, returning an `i64`) as the `dlopen` call was made
/// ([`call_each_thread`]). With `per_thread`, a thread that already uses
/// Syscall User Dispatch (or a kernel that cannot say) is refused before
/// anything is changed.
pub fn inject_dlopen_then(
    target: &Target,
    library: &Path,
    avoid: &Hazards,
    per_thread: Option<&str>,
) -> Result<(Injection, Option<ThreadCalls>), String> {
    let pid = target.pid;
    let path = library.as_os_str().as_encoded_bytes();
    if path.contains(&0) {
        return Err(format!("{}: a path with a NUL byte", library.display()));
    }
    let first_stop = Instant::now();
    let mut stopped = Stopped::seize(pid)?;
    let loader = loader_ranges(pid);
    let retries = safe_point(&mut stopped, &loader, avoid, "the agent")?;
    if per_thread.is_some() {
        // The agent's per-thread state is found through the thread
        // pointer: threads sharing one (a raw clone without CLONE_SETTLS)
        // would share it, and one of them would go undispatched.
        let mut pointers: BTreeMap<u64, i32> = BTreeMap::new();
        for &tid in stopped.threads.keys() {
            let fs = get_regs(tid)?.fs_base;
            if let Some(other) = pointers.insert(fs, tid) {
                return Err(format!(
                    "--pid {pid}: threads {other} and {tid} share one thread pointer ({fs:#x}, \
                     a raw clone without CLONE_SETTLS): bpfjet's per-thread state cannot tell \
                     them apart to trace their system calls; nothing was changed"
                ));
            }
        }
        for &tid in stopped.threads.keys() {
            let cfg = sud_config(tid).map_err(|e| {
                format!(
                    "--pid {pid}: the kernel does not report thread {tid}'s Syscall User \
                     Dispatch (PTRACE_GET_SYSCALL_USER_DISPATCH_CONFIG: {e}; Linux 6.4 or \
                     later is needed); nothing was changed"
                )
            })?;
            if cfg.mode != 0 {
                return Err(format!(
                    "--pid {pid}: thread {tid} already uses Syscall User Dispatch (its own, \
                     selector {:#x}); bpfjet cannot trace its system calls; nothing was changed",
                    cfg.selector
                ));
            }
        }
    }
    let tid = calling_thread(&stopped)?;
    let mut path_z = path.to_vec();
    path_z.push(0);
    let (handle, others_resumed) = call_in_thread(
        &mut stopped,
        tid,
        InjectedCall {
            func: target.dlopen,
            data: &path_z,
            rsi: libc::RTLD_NOW as u64,
            what: "dlopen of the agent",
        },
    )?;
    let threads = stopped.threads.len();
    let calls = match per_thread {
        Some(symbol) if handle != 0 => Some(call_each_thread(
            &mut stopped,
            library,
            symbol,
            avoid,
            &loader,
        )?),
        _ => None,
    };
    stopped.detach_all();
    Ok((
        Injection {
            handle,
            threads,
            others_resumed,
            retries,
            stopped_for: first_stop.elapsed(),
        },
        calls,
    ))
}

/// Resumes and stops the threads again until none is at an unsafe point
/// for `what` ([`unsafe_point`]); returns how many times it took.
fn safe_point(
    stopped: &mut Stopped,
    loader: &[(u64, u64)],
    avoid: &Hazards,
    what: &str,
) -> Result<usize, String> {
    let pid = stopped.pid;
    let mut retries = 0;
    loop {
        let mut why = None;
        for &tid in stopped.threads.keys() {
            if let Some(w) = unsafe_point(pid, tid, loader, avoid)? {
                why = Some(w);
                break;
            }
        }
        // The call runs on a thread in an event stop ([`calling_thread`]):
        // one stopped while a signal was being delivered to it is resumed
        // with that signal first. A process whose only thread takes signals
        // all the time (a system call traced through Syscall User Dispatch
        // in a loop) is caught in one often; the next stop is another.
        if why.is_none() && !stopped.threads.values().any(|s| matches!(s, Stop::Event)) {
            why = Some("every thread is receiving a signal".to_string());
        }
        let Some(why) = why else {
            return Ok(retries);
        };
        retries += 1;
        if retries > SAFE_POINT_ATTEMPTS {
            return Err(format!(
                "--pid {pid}: no safe point for {what} after {SAFE_POINT_ATTEMPTS} attempts \
                 ({why}); nothing was changed"
            ));
        }
        stopped.resume(None);
        std::thread::sleep(Duration::from_millis(2));
        stopped.restop(None)?;
    }
}

/// The thread to run an injected call: one in an interrupt stop (not in
/// the middle of a signal delivery), the main thread if it is.
fn calling_thread(stopped: &Stopped) -> Result<i32, String> {
    let pid = stopped.pid;
    stopped
        .threads
        .iter()
        .filter(|(_, s)| matches!(s, Stop::Event))
        .map(|(&t, _)| t)
        .min_by_key(|&t| t != pid)
        .ok_or_else(|| format!("--pid {pid}: every thread is receiving a signal; try again"))
}

/// Makes one thread of running process `pid` call `symbol` of `library`
/// (already loaded there) with no arguments and returns its result,
/// every thread stopped at a safe point first — outside the dynamic
/// loader, `avoid`'s windows and return addresses, and its allocator
/// ranges — and all of them stopped while it runs (as `dlopen` is called
/// by [`inject_dlopen`]). `bpfjet trace` loads probe links made after a
/// process started this way.
pub fn call_in_process(
    pid: i32,
    library: &Path,
    symbol: &str,
    avoid: &Hazards,
) -> Result<i64, String> {
    call_in_process_then(pid, library, symbol, avoid, |_| None).map(|(r, _)| r)
}

/// [`call_in_process`], then, in the same stop, every thread calls the
/// function `per_thread` names for the result, if it names one (as
/// [`inject_dlopen_then`] does after the `dlopen`).
pub fn call_in_process_then(
    pid: i32,
    library: &Path,
    symbol: &str,
    avoid: &Hazards,
    per_thread: impl FnOnce(i64) -> Option<&'static str>,
) -> Result<(i64, Option<ThreadCalls>), String> {
    let func = loaded_symbol(pid, library, symbol)?;
    let mut stopped = Stopped::seize(pid)?;
    let loader = loader_ranges(pid);
    safe_point(&mut stopped, &loader, avoid, symbol)?;
    let tid = calling_thread(&stopped)?;
    let what = format!("{symbol} in process {pid}");
    let (r, _) = call_in_thread(
        &mut stopped,
        tid,
        InjectedCall {
            func,
            data: &[],
            rsi: 0,
            what: &what,
        },
    )?;
    let r = r as i64;
    let calls = match per_thread(r) {
        Some(each) => Some(call_each_thread(
            &mut stopped,
            library,
            each,
            avoid,
            &loader,
        )?),
        None => None,
    };
    stopped.detach_all();
    Ok((r, calls))
}

/// Set in the result of the agent's `bpfjet_take_new_links` when it
/// installed the system-call hooks for the new links: the caller must
/// then make every thread call `bpfjet_late_enable_thread`, as
/// [`call_in_process`]'s `per_thread` does (the low 32 bits are the count
/// of programs attached).
pub const DISPATCH_THREADS: i64 = 1 << 32;

/// What [`call_each_thread`] did.
#[derive(Debug, Default)]
pub struct ThreadCalls {
    /// Threads whose call returned 0.
    pub done: usize,
    /// Threads whose call returned 1 (the library's own threads).
    pub skipped: usize,
    /// Times the threads were resumed and stopped again (a thread not at a
    /// safe point, or whose call returned -EAGAIN).
    pub retries: usize,
    /// A call did not return within [`SOLO_TIMEOUT`]: the other threads
    /// were resumed while it ran.
    pub others_resumed: bool,
    /// From the first call to the last return (part of
    /// [`Injection::stopped_for`]).
    pub took: Duration,
}

/// The run-time address of `symbol` of `library` loaded in `pid`.
fn loaded_symbol(pid: i32, library: &Path, symbol: &str) -> Result<u64, String> {
    let real = library.canonicalize().unwrap_or(library.to_path_buf());
    let objects = process_objects(pid)?;
    let lib = objects
        .iter()
        .find(|o| o.path == real || o.path == library)
        .ok_or_else(|| format!("--pid {pid}: {} is not mapped after dlopen", real.display()))?;
    let sym = crate::symbols::file_symbol(&real, symbol)
        .map_err(|e| format!("{}: {symbol}: {e}", real.display()))?;
    Ok(lib.bias.wrapping_add(sym.vaddr))
}

/// Makes every stopped thread of the process call `symbol` of `library`
/// (loaded), one at a time, the others stopped, each at a safe point (as
/// for `dlopen`, plus [`Hazards::allocator`]). A call returning -EAGAIN
/// is retried after the threads ran for a moment; threads created
/// meanwhile are called too. Any other negative result is an error
/// naming the thread.
fn call_each_thread(
    stopped: &mut Stopped,
    library: &Path,
    symbol: &str,
    avoid: &Hazards,
    loader: &[(u64, u64)],
) -> Result<ThreadCalls, String> {
    let pid = stopped.pid;
    let func = loaded_symbol(pid, library, symbol)?;
    let started = Instant::now();
    let mut out = ThreadCalls::default();
    let mut finished: BTreeSet<i32> = BTreeSet::new();
    'rounds: loop {
        let pending: Vec<i32> = stopped
            .threads
            .keys()
            .copied()
            .filter(|t| !finished.contains(t))
            .collect();
        if pending.is_empty() {
            out.took = started.elapsed();
            return Ok(out);
        }
        let mut why = None;
        for &tid in &pending {
            if let Some(w) = unsafe_point(pid, tid, loader, avoid)? {
                why = Some(w);
                break;
            }
        }
        if why.is_none() {
            for &tid in &pending {
                let what = format!("the call injected in thread {tid}");
                let (r, resumed) = call_in_thread(
                    stopped,
                    tid,
                    InjectedCall {
                        func,
                        data: &[],
                        rsi: 0,
                        what: &what,
                    },
                )?;
                let r = r as i64;
                match r {
                    0 => {
                        out.done += 1;
                        finished.insert(tid);
                    }
                    1 => {
                        out.skipped += 1;
                        finished.insert(tid);
                    }
                    r if r == -(libc::EAGAIN as i64) => {
                        why = Some(format!("thread {tid} is inside a probe handler"));
                    }
                    r if r < 0 => {
                        return Err(format!(
                            "--pid {pid}: thread {tid}: {symbol}: {}",
                            std::io::Error::from_raw_os_error(-r as i32)
                        ));
                    }
                    r => return Err(format!("--pid {pid}: thread {tid}: {symbol} returned {r}")),
                }
                if resumed {
                    // The others ran: check them again.
                    out.others_resumed = true;
                    continue 'rounds;
                }
            }
            if why.is_none() {
                // Threads seen for the first time are picked up next round.
                continue;
            }
        }
        out.retries += 1;
        if out.retries > SAFE_POINT_ATTEMPTS {
            return Err(format!(
                "--pid {pid}: no safe point for {symbol} after {SAFE_POINT_ATTEMPTS} attempts \
                 ({})",
                why.unwrap_or_default()
            ));
        }
        stopped.resume(None);
        std::thread::sleep(Duration::from_millis(2));
        stopped.restop(None)?;
    }
}

/// Makes stopped thread `tid` call `func()` and returns its `rax` and
/// whether the other threads had to be resumed meanwhile. As the `dlopen`
/// call: registers and extended state saved and restored, a return to
/// address 0 that faults, `orig_rax` -1 during the call; the thread's
/// stop (an interrupt, or a signal being delivered) is kept for its
/// detach, so an interrupted system call restarts and a signal is not lost.
fn call_in_thread(
    stopped: &mut Stopped,
    tid: i32,
    call: InjectedCall,
) -> Result<(u64, bool), String> {
    let pid = stopped.pid;
    let what = call.what;
    let stop = stopped.threads[&tid];
    let saved = get_regs(tid)?;
    let saved_fp = ExtendedState::save(tid)?;
    // Below the red zone (128 bytes) and some margin: the data, then the
    // return address (0) so that rsp + 8 is 16-byte aligned at the entry.
    let data_at = (saved.rsp - 128 - 256 - call.data.len() as u64) & !15;
    let ret_at = data_at - 8;
    if !call.data.is_empty() {
        write_memory(pid, data_at, call.data)?;
    }
    write_memory(pid, ret_at, &0u64.to_le_bytes())?;
    let mut regs = saved;
    regs.rip = call.func;
    regs.rsp = ret_at;
    if !call.data.is_empty() {
        regs.rdi = data_at;
    }
    regs.rsi = call.rsi;
    regs.rax = 0;
    // Not a system call: no restart of the interrupted one at the new rip.
    regs.orig_rax = u64::MAX;
    // The ABI's direction flag is clear at a call.
    regs.eflags &= !0x400;
    set_regs(tid, &regs)?;
    // The SIGSEGV of the return to 0 is ours: never delivered; the thread
    // goes back to the stop it was in.
    let put_back = |stopped: &mut Stopped| -> Result<(), String> {
        set_regs(tid, &saved)?;
        saved_fp.restore(tid)?;
        stopped.threads.insert(tid, stop);
        Ok(())
    };
    ptrace(libc::PTRACE_CONT, tid, 0, 0).map_err(|e| format!("PTRACE_CONT of {tid}: {e}"))?;
    let started = Instant::now();
    let mut others_resumed = false;
    let rax = loop {
        let deadline = started
            + if others_resumed {
                CALL_TIMEOUT
            } else {
                SOLO_TIMEOUT
            };
        match wait_stop(tid, Some(deadline)) {
            Ok(None) => {
                stopped.threads.remove(&tid);
                return Err(format!(
                    "--pid {pid}: thread {tid} ended while it ran {what}"
                ));
            }
            Ok(Some((Stop::Signal(libc::SIGSEGV), _))) => {
                let r = get_regs(tid)?;
                if r.rip == 0 {
                    break r.rax;
                }
                // A real fault inside the call: the process would crash;
                // put the thread back as it was instead.
                put_back(stopped)?;
                return Err(format!(
                    "--pid {pid}: {what} faulted at {:#x} in thread {tid}; the thread was put \
                     back as it was",
                    r.rip
                ));
            }
            Ok(Some((Stop::Signal(sig), _))) => {
                // A signal for the process arrived during the call: deliver
                // it (its handler runs on top of the call, as it would on
                // top of any code).
                let _ = ptrace(libc::PTRACE_CONT, tid, 0, sig as u64);
            }
            Ok(Some((Stop::Event, _))) => {
                let _ = ptrace(libc::PTRACE_CONT, tid, 0, 0);
            }
            Err(_) if !others_resumed => {
                // Another stopped thread may hold a lock the call waits for.
                others_resumed = true;
                stopped.resume(Some(tid));
            }
            Err(_) => {
                return Err(format!(
                    "--pid {pid}: {what} did not return within {}s (thread {tid} is left in \
                     it: the process may be stuck)",
                    CALL_TIMEOUT.as_secs()
                ));
            }
        }
    };
    if others_resumed {
        stopped.restop(Some(tid))?;
    }
    put_back(stopped)?;
    Ok((rax, others_resumed))
}

/// A function call [`call_in_thread`] makes a stopped thread run.
struct InjectedCall<'a> {
    func: u64,
    /// Bytes written below the thread's stack, their address passed as the
    /// first argument (none: the first argument is left as it was).
    data: &'a [u8],
    /// The second argument.
    rsi: u64,
    /// What the call is, for errors.
    what: &'a str,
}

/// The kernel's `struct ptrace_sud_config` (Linux 6.4+).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct SudConfig {
    /// `PR_SYS_DISPATCH_OFF` (0) or on.
    pub mode: u64,
    pub selector: u64,
    pub offset: u64,
    pub len: u64,
}

const PTRACE_SET_SYSCALL_USER_DISPATCH_CONFIG: libc::c_uint = 0x4210;
const PTRACE_GET_SYSCALL_USER_DISPATCH_CONFIG: libc::c_uint = 0x4211;

/// A ptrace-stopped thread's Syscall User Dispatch settings.
fn sud_config(tid: i32) -> Result<SudConfig, std::io::Error> {
    let mut cfg = SudConfig::default();
    ptrace(
        PTRACE_GET_SYSCALL_USER_DISPATCH_CONFIG,
        tid,
        std::mem::size_of::<SudConfig>() as u64,
        &mut cfg as *mut SudConfig as u64,
    )?;
    Ok(cfg)
}

/// Turns a ptrace-stopped thread's Syscall User Dispatch off.
fn sud_off(tid: i32) -> Result<(), std::io::Error> {
    let cfg = SudConfig::default();
    ptrace(
        PTRACE_SET_SYSCALL_USER_DISPATCH_CONFIG,
        tid,
        std::mem::size_of::<SudConfig>() as u64,
        &cfg as *const SudConfig as u64,
    )
    .map(|_| ())
}

/// Each thread of `pid` and its Syscall User Dispatch settings (every
/// thread stopped for the reading, then detached).
pub fn dispatch_states(pid: i32) -> Result<Vec<(i32, SudConfig)>, String> {
    let mut stopped = Stopped::seize(pid)?;
    let mut out = Vec::new();
    for &tid in stopped.threads.keys() {
        let cfg = sud_config(tid)
            .map_err(|e| format!("thread {tid}: PTRACE_GET_SYSCALL_USER_DISPATCH_CONFIG: {e}"))?;
        out.push((tid, cfg));
    }
    stopped.detach_all();
    Ok(out)
}

/// Turns Syscall User Dispatch off in every thread of `pid` (stopped
/// together, then detached): after `bpfjet trace --pid` detached, the
/// process's system calls go straight to the kernel again. Returns how
/// many threads had it on.
pub fn disable_dispatch(pid: i32) -> Result<usize, String> {
    let mut stopped = Stopped::seize(pid)?;
    let mut were_on = 0;
    for &tid in stopped.threads.keys() {
        let cfg = sud_config(tid)
            .map_err(|e| format!("thread {tid}: PTRACE_GET_SYSCALL_USER_DISPATCH_CONFIG: {e}"))?;
        if cfg.mode != 0 {
            sud_off(tid).map_err(|e| {
                format!("thread {tid}: PTRACE_SET_SYSCALL_USER_DISPATCH_CONFIG: {e}")
            })?;
            were_on += 1;
        }
    }
    stopped.detach_all();
    Ok(were_on)
}
