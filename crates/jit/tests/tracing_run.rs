//! Tracing programs run on contexts the test builds (`tests/progs/
//! uprobe_run.bpf.c`, compiled with clang-19 at test time): a uprobe-style
//! program on `PtRegs` and a syscalls tracepoint program, on the
//! interpreter and on the JIT, which must agree; the tracing helpers'
//! results checked against the process (`getpid`/`gettid`, `getuid`, the
//! thread name, a fault-safe read of an unmapped address, a frame-pointer
//! stack built in the test); per-CPU counts exact under many threads.

use bpfjet_jit::{load_tracing, JitOptions};
use bpfjet_runtime::tracing::{ProbeSite, PtRegs, SysEnterCtx, TracingObject, TracingOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `struct result` of the C program.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Result_ {
    pid_tgid: u64,
    uid_gid: u64,
    func_ip: u64,
    cookie: u64,
    read_ret: i64,
    str_ret: i64,
    kernel_ret: i64,
    stack_ret: i64,
    frames: [u64; 4],
    comm: [u8; 16],
    buf: [u8; 8],
    str_: [u8; 8],
    arg_sum: u64,
}

fn build() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT.get_or_init(compile).clone()
}

fn compile() -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/progs/uprobe_run.bpf.c");
    let dir = std::env::temp_dir().join(format!("bpfjet-uprobe-run-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("uprobe_run.bpf.o");
    let status = std::process::Command::new("clang-19")
        .args(["-O2", "-g", "-target", "bpf", "-D__TARGET_ARCH_x86"])
        .arg(format!(
            "-I/usr/include/{}-linux-gnu",
            std::env::consts::ARCH
        ))
        .arg("-c")
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .status()
        .expect("clang-19 (scripts/setup.sh)");
    assert!(status.success(), "clang-19 failed on {}", src.display());
    out
}

fn objects() -> (TracingObject, TracingObject) {
    let obj = bpfjet_obj::load_file(build()).expect("loading the object");
    let opts = TracingOptions::default();
    let interp = TracingObject::load(&obj, &opts).expect("interpreter load");
    let jit = load_tracing(&obj, &opts, &JitOptions::default()).expect("JIT load");
    assert!(jit.programs().iter().all(|p| p.is_native()));
    assert!(interp.programs().iter().all(|p| !p.is_native()));
    (interp, jit)
}

fn result_of(t: &TracingObject, tid: u32) -> Result_ {
    let map = t.loaded().map("results").expect("results map");
    let bytes = map
        .lookup_copy(&tid.to_ne_bytes())
        .expect("the program stored a result for this thread");
    assert_eq!(bytes.len(), std::mem::size_of::<Result_>());
    // SAFETY: plain data of exactly this size.
    unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) }
}

fn per_cpu_sum(t: &TracingObject, map: &str) -> u64 {
    let bytes = t
        .loaded()
        .map(map)
        .unwrap()
        .lookup_copy(&0u32.to_ne_bytes())
        .unwrap();
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
        .sum()
}

/// A frame-pointer chain on the heap: `[next_fp, return address]` pairs.
struct FakeStack {
    words: Box<[u64; 4]>,
}

impl FakeStack {
    fn new() -> FakeStack {
        let mut words = Box::new([0u64; 4]);
        let base = words.as_ptr() as u64;
        words[0] = base + 16; // frame 0 -> frame 1
        words[1] = 0x1111;
        words[2] = 0; // frame 1 ends the chain
        words[3] = 0x2222;
        FakeStack { words }
    }

    fn fp(&self) -> u64 {
        self.words.as_ptr() as u64
    }
}

fn run_probe(t: &TracingObject, buf: u64, s: u64, stack: &FakeStack) -> (u64, Result_) {
    let id = t.program_id("probe").expect("probe program");
    let p = &t.programs()[id];
    p.check_ctx_size(p.attach_ctx_size().unwrap()).unwrap();
    let mut regs = PtRegs::with_args(&[7, buf, s, 100, 1000, 10000]);
    regs.ip = 0x40_1000;
    regs.sp = 0x7fff_0000;
    regs.bp = stack.fp();
    let site = ProbeSite {
        func_ip: 0x40_1000,
        cookie: 0xc00c1e,
        regs: 0,
        ret_at_sp: false,
    };
    let r0 = t.run_regs(id, &mut regs, &site);
    let (_, tid) = bpfjet_runtime::tracing::current_tgid_tid();
    (r0, result_of(t, tid))
}

#[test]
fn uprobe_program_on_pt_regs_interp_and_jit_agree() {
    let (interp, jit) = objects();
    let data = *b"ABCDEFGH";
    let text = b"hello, world\0";
    let stack = FakeStack::new();
    let (r0_i, res_i) = run_probe(&interp, data.as_ptr() as u64, text.as_ptr() as u64, &stack);
    let (r0_j, res_j) = run_probe(&jit, data.as_ptr() as u64, text.as_ptr() as u64, &stack);
    assert_eq!(r0_i, 7 * 3 + 100);
    assert_eq!(r0_i, r0_j);
    assert_eq!(res_i, res_j, "interpreter and JIT differ");

    // SAFETY: no preconditions.
    let (pid, tid, uid, gid) = unsafe {
        (
            libc::getpid() as u64,
            libc::gettid() as u64,
            libc::getuid() as u64,
            libc::getgid() as u64,
        )
    };
    let r = res_j;
    assert_eq!(r.pid_tgid, pid << 32 | tid);
    assert_eq!(r.uid_gid, gid << 32 | uid);
    assert_eq!(r.func_ip, 0x40_1000);
    assert_eq!(r.cookie, 0xc00c1e);
    assert_eq!(r.read_ret, 0);
    assert_eq!(&r.buf, b"ABCDEFGH");
    assert_eq!(r.str_ret, 8, "cut to the buffer, NUL included");
    assert_eq!(&r.str_, b"hello, \0");
    assert_eq!(r.kernel_ret, -14, "no kernel memory in a process");
    assert_eq!(r.stack_ret, 24, "ip and two return addresses");
    assert_eq!(r.frames, [0x40_1000, 0x1111, 0x2222, 0]);
    assert_eq!(r.arg_sum, 7 + 100 + 1000 + 10000 + 0x7fff_0000 + stack.fp());
    let mut name = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes.
    unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr(), 0, 0, 0) };
    assert_eq!(r.comm, name);
    assert_eq!(interp.faults().0 + jit.faults().0, 0);
}

#[test]
fn probe_read_user_of_unmapped_memory_is_efault_not_a_crash() {
    let (interp, jit) = objects();
    let stack = FakeStack::new();
    for t in [&interp, &jit] {
        // Page 0 and a kernel address: never mapped in a process.
        for bad in [8u64, 0xffff_8000_0000_0000] {
            let (_, r) = run_probe(t, bad, bad, &stack);
            assert_eq!(r.read_ret, -14);
            assert_eq!(r.buf, [0; 8], "zero-filled on a fault");
            assert_eq!(r.str_ret, -14);
            assert_eq!(r.str_, [0; 8]);
        }
    }
    assert_eq!(interp.faults().0 + jit.faults().0, 0);
}

#[test]
fn identity_is_the_calling_thread_and_per_cpu_counts_are_exact() {
    let (interp, jit) = objects();
    let data = *b"01234567";
    let text = b"x\0";
    const THREADS: usize = 8;
    const RUNS: u64 = 2000;
    for t in [Arc::new(interp), Arc::new(jit)] {
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let t = Arc::clone(&t);
                let (buf, s) = (data.as_ptr() as u64, text.as_ptr() as u64);
                std::thread::spawn(move || {
                    let stack = FakeStack::new();
                    let mut last = Result_::default();
                    for _ in 0..RUNS {
                        last = run_probe(&t, buf, s, &stack).1;
                    }
                    // SAFETY: no preconditions.
                    let (pid, tid) = unsafe { (libc::getpid() as u64, libc::gettid() as u64) };
                    assert_eq!(last.pid_tgid, pid << 32 | tid);
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(per_cpu_sum(&t, "hits"), THREADS as u64 * RUNS);
        assert_eq!(t.missed_runs(), 0);
    }
}

#[test]
fn syscalls_tracepoint_reads_the_record() {
    let (interp, jit) = objects();
    for t in [&interp, &jit] {
        let id = t.program_id("on_write").unwrap();
        let p = &t.programs()[id];
        assert_eq!(p.attach_ctx_size(), Ok(64));
        p.check_ctx_size(64).unwrap();
        let mut rec = SysEnterCtx::new(1, [2, 0xdead, 42, 0, 0, 0]);
        assert_eq!(t.run_sys_enter(id, &mut rec, &ProbeSite::default()), 0);
        let map = t.loaded().map("syscalls").unwrap();
        let get = |k: u32| {
            u64::from_ne_bytes(
                map.lookup_copy(&k.to_ne_bytes()).unwrap()[..8]
                    .try_into()
                    .unwrap(),
            )
        };
        assert_eq!((get(0), get(1), get(2)), (1, 2, 42));
        // A uprobe entry refuses a tracepoint program (and vice versa).
        let mut regs = PtRegs::default();
        assert_eq!(t.run_regs(id, &mut regs, &ProbeSite::default()), 0);
        assert!(t.faults().1.unwrap().contains("not a kprobe program"));
    }
}
