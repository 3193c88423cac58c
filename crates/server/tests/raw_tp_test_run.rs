//! `BPF_PROG_TEST_RUN` of a raw-tracepoint program (what bpftrace's BEGIN
//! and END use) through both backends — the kernel's `bpf()` and
//! bpfjet's — compared call by call: retval and errnos.

mod common;
use common::insn;
use common::run;

use bpfjet_server::{BpfjetBackend, Namespace};
use bpfjet_sys::{decode, encode, Backend, Command, KernelBackend, ProgLoad, TestRun};

const RAW_TRACEPOINT: u32 = 17;
const KPROBE: u32 = 2;

/// `r0 = args[0] + args[1]; exit` (reads 16 bytes of context).
fn sum_of_two_args() -> Vec<u64> {
    vec![
        insn(0x79, 0, 1, 0, 0), // r0 = *(u64 *)(r1 + 0)
        insn(0x79, 2, 1, 8, 0), // r2 = *(u64 *)(r1 + 8)
        insn(0x0f, 0, 2, 0, 0), // r0 += r2
        insn(0x95, 0, 0, 0, 0), // exit
    ]
}

fn load(backend: &dyn Backend, prog_type: u32, insns: &[u64]) -> i64 {
    let license = c"GPL";
    run(
        backend,
        Command::ProgLoad(ProgLoad {
            prog_type,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: license.as_ptr() as u64,
            name: "sum2".into(),
            ..ProgLoad::default()
        }),
    )
    .expect("the program loads")
}

/// Each call's result and retval.
fn sequence(backend: &dyn Backend) -> Vec<(String, String)> {
    let fd = load(backend, RAW_TRACEPOINT, &sum_of_two_args());
    let args: [u64; 13] = [3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let mut steps = Vec::new();
    let cases: [(&str, u32, u32, u32, u32); 7] = [
        // (what, ctx bytes, repeat, flags, cpu)
        ("two arguments", 16, 0, 0, 0),
        ("all twelve", 96, 0, 0, 0),
        ("fewer bytes than the program reads", 8, 0, 0, 0),
        ("more than twelve arguments", 104, 0, 0, 0),
        ("repeat", 16, 1, 0, 0),
        ("on CPU 0", 16, 0, 1, 0),
        ("a CPU without BPF_F_TEST_RUN_ON_CPU", 16, 0, 0, 1),
    ];
    for (what, ctx, repeat, flags, cpu) in cases {
        let t = TestRun {
            prog_fd: fd as u32,
            ctx_in: args.as_ptr() as u64,
            ctx_size_in: ctx,
            repeat,
            flags,
            cpu,
            ..TestRun::default()
        };
        let cmd = Command::ProgTestRun(t);
        let raw = encode(&cmd);
        let decoded = decode(cmd.cmd() as u32, &raw).expect("decodes");
        let r = backend.execute(&decoded);
        let retval = match &decoded {
            Command::ProgTestRun(t) => t.retval.get(),
            _ => 0,
        };
        steps.push((
            what.to_string(),
            format!(
                "{:?} retval {}",
                r.map(|_| ()),
                if r.is_ok() { retval } else { 0 }
            ),
        ));
    }
    // A kprobe-type program has no test run.
    let kprobe = load(
        backend,
        KPROBE,
        &[insn(0xb7, 0, 0, 0, 0), insn(0x95, 0, 0, 0, 0)],
    );
    let r = run(
        backend,
        Command::ProgTestRun(TestRun {
            prog_fd: kprobe as u32,
            ..TestRun::default()
        }),
    );
    steps.push(("a kprobe program".into(), format!("{:?}", r.map(|_| ()))));
    // SAFETY: our fds.
    unsafe {
        libc::close(fd as i32);
        libc::close(kprobe as i32);
    }
    steps
}

#[test]
fn raw_tracepoint_test_runs_match_the_kernel() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        bpfjet_testsupport::report_skip("the kernel backend needs root");
        return;
    }
    let kernel = sequence(&KernelBackend);
    let run_dir = std::env::temp_dir().join(format!("bpfjet-rawtp-run-{}", std::process::id()));
    let name = format!("rawtprun{}", std::process::id());
    let jet = BpfjetBackend::new(Namespace::open(&name, &run_dir).expect("namespace"));
    let ours = sequence(&jet);
    jet.release_all();
    let _ = std::fs::remove_dir_all(&run_dir);
    let _ = bpfjet_maps::Instance::remove_stale(&name);
    // Every shared object of the instance is gone, its CPU slot table too.
    let left: Vec<String> = std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|f| f.starts_with(&format!("bpfjet.{name}.")))
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "left in /dev/shm: {left:?}");
    assert_eq!(kernel[0].1, "Ok(()) retval 7", "the kernel's own answer");
    let differences: Vec<String> = kernel
        .iter()
        .zip(&ours)
        .filter(|(k, j)| k != j)
        .map(|(k, j)| format!("{}: kernel {}, bpfjet {}", k.0, k.1, j.1))
        .collect();
    assert_eq!(kernel.len(), ours.len());
    assert!(
        differences.is_empty(),
        "differences:\n{}",
        differences.join("\n")
    );
}
