//! CO-RE relocations, differential against the kernel: programs written in
//! CO-RE style (tests/core/*.c) are compiled at test time, one against a
//! `vmlinux.h` generated from the running kernel's BTF, one against a custom
//! target BTF (`--btf`, made from the same C file with `-DTARGET`). libbpf
//! relocates them for the kernel engine, bpfjet for its interpreter and JIT;
//! return values, output frames and every map must be equal. The values the
//! relocations resolve to are written into maps by the programs, so a wrong
//! offset, size, existence, signedness, shift, type id or enum value shows
//! as a map difference. Unresolvable relocations: rejected by both only
//! where reachable, bpfjet's message naming the relocation.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;
use support::{bpfjet, skip, BpfjetRun, Scratch};

fn source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/core")
        .join(name)
}

/// The compiled objects, shared by every test of this binary.
struct Built {
    dir: Scratch,
    /// None when the kernel publishes no BTF (the vmlinux tests skip).
    vmlinux_probe: Option<String>,
    bits: String,
    bits_target: String,
    bits_unguarded: String,
}

/// bpfjet-testsupport's flags with clang's default CPU, as these programs
/// were written for, and warnings as errors.
fn compile(src: &Path, out: &str, args: &[&str]) {
    bpfjet_testsupport::Compile::file(src)
        .mcpu(None)
        .args(&["-Wall", "-Werror"])
        .args(args)
        .object_at(out);
}

/// `bpftool btf dump file /sys/kernel/btf/vmlinux format c`, or why not.
fn vmlinux_h(dir: &Scratch) -> Result<String, String> {
    let vmlinux = bpfjet_obj::core::VMLINUX_BTF;
    if !Path::new(vmlinux).exists() {
        return Err(format!(
            "{vmlinux} does not exist (kernel built without BTF)"
        ));
    }
    let out = Command::new("bpftool")
        .args(["btf", "dump", "file", vmlinux, "format", "c"])
        .output()
        .map_err(|e| format!("running bpftool: {e} (scripts/setup.sh installs it)"))?;
    if !out.status.success() {
        return Err(format!(
            "bpftool btf dump failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(dir.file("vmlinux.h", out.stdout))
}

fn built() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = Scratch::new("core-relo");
        let vmlinux_probe = match vmlinux_h(&dir) {
            Ok(header) => {
                let include = format!("-I{}", Path::new(&header).parent().unwrap().display());
                let out = dir.path("vmlinux_probe.o");
                compile(&source("vmlinux_probe.c"), &out, &[&include]);
                Some(out)
            }
            Err(why) => {
                skip("CO-RE against vmlinux.h", &why);
                None
            }
        };
        let bits = dir.path("bits.o");
        compile(&source("bits.c"), &bits, &[]);
        let bits_target = dir.path("bits_target.o");
        compile(&source("bits.c"), &bits_target, &["-DTARGET"]);
        let bits_unguarded = dir.path("bits_unguarded.o");
        compile(&source("bits.c"), &bits_unguarded, &["-DUNGUARDED"]);
        Built {
            dir,
            vmlinux_probe,
            bits,
            bits_target,
            bits_unguarded,
        }
    })
}

/// Frames the programs read: an IPv4/UDP packet (XDP_TX by enum value
/// relocation), IPv4/TCP, and bytes spread over every bit so bitfields and
/// their signs differ between frames.
fn frames() -> Vec<(&'static str, Vec<u8>)> {
    let ipv4 = |proto: u8, ihl: u8| {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        f.extend([0x40 | ihl, 0, 0, 60, 0, 1, 0, 0, 33, proto, 0, 0]);
        f.extend([10, 0, 0, 1, 10, 0, 0, 2]);
        f.extend((0..60u32).map(|i| (i * 37 + 11) as u8));
        f
    };
    let mut x: u32 = 0x9e37_79b9;
    let noise = (0..96)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect();
    vec![
        ("udp", ipv4(17, 5)),
        ("tcp", ipv4(6, 7)),
        ("noise", noise),
        ("ones", vec![0xff; 80]),
    ]
}

fn kernel_or_skip(test: &str) -> bool {
    match bpfjet_kernel::kernel_available() {
        Ok(()) => true,
        Err(why) => {
            skip(test, &why);
            false
        }
    }
}

fn test_run(object: &str, prog: &str, frame: &str, engine: &str, btf: Option<&str>) -> BpfjetRun {
    let mut args = vec![
        "test-run",
        object,
        "--prog",
        prog,
        "--data",
        frame,
        "--engine",
        engine,
        "--json",
        "--dump-maps",
    ];
    if let Some(btf) = btf {
        args.extend(["--btf", btf]);
    }
    bpfjet(&args, b"")
}

/// The parts of a report that must be equal across engines.
fn outcome(run: &BpfjetRun, what: &str) -> Value {
    assert_eq!(run.code, Some(0), "{what}: {}", run.stderr);
    let report: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {}", run.stdout));
    serde_json::json!({
        "retval": report["retval"],
        "data_out": report["data_out"],
        "maps": report["maps"],
    })
}

/// `results` as slot → value (u64, little-endian hex in the dump).
fn results(outcome: &Value) -> Vec<u64> {
    outcome["maps"]["results"]
        .as_array()
        .expect("results map dumped")
        .iter()
        .map(|e| {
            let hex = e["value"].as_str().unwrap();
            let bytes: Vec<u8> = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            u64::from_le_bytes(bytes[..8].try_into().unwrap())
        })
        .collect()
}

/// Runs `prog` on every frame with every engine; returns bpfjet's outcomes
/// after checking they equal the kernel's.
fn differential(test: &str, object: &str, prog: &str, btf: Option<&str>) -> Vec<Value> {
    let built = built();
    let mut outcomes = Vec::new();
    for (name, bytes) in frames() {
        let frame = built.dir.file(&format!("{test}-{name}.bin"), &bytes);
        let kernel = outcome(
            &test_run(object, prog, &frame, "kernel", btf),
            &format!("{prog} on {name}, kernel"),
        );
        for engine in ["interp", "jit"] {
            let ours = outcome(
                &test_run(object, prog, &frame, engine, btf),
                &format!("{prog} on {name}, {engine}"),
            );
            assert_eq!(
                ours, kernel,
                "{prog} on frame {name}: {engine} differs from the kernel"
            );
        }
        outcomes.push(kernel);
    }
    outcomes
}

#[test]
fn vmlinux_types_relocate_as_libbpf_does() {
    let test = "vmlinux_types_relocate_as_libbpf_does";
    let Some(object) = &built().vmlinux_probe else {
        return skip(test, "no vmlinux.h (see above)");
    };
    if !kernel_or_skip(test) {
        return;
    }
    let outcomes = differential(test, object, "vmlinux_probe", None);
    // Self-checks that hold on any kernel, beyond agreeing with it.
    let udp = results(&outcomes[0]);
    assert_eq!(udp[0], 94, "packet length through the 8-byte xdp_md view");
    assert_eq!(udp[1], 1, "task_struct::pid exists");
    assert_eq!(udp[2], 0, "a field no kernel has");
    assert_eq!(udp[3], 4, "pid is 4 bytes");
    assert_eq!(udp[5], 1, "pid is signed");
    assert_eq!(udp[7], 16, "comm is 16 bytes");
    assert_eq!(udp[9], 0, "a type no kernel has");
    assert_eq!((udp[12], udp[13]), (1, 4), "XDP_REDIRECT exists and is 4");
    assert_eq!(udp[14], 0, "an enumerator no kernel has");
    assert_eq!(udp[19], 1, "xdp_md::egress_ifindex exists");
    assert_eq!(udp[20], 0, "sk_buff::len is unsigned");
    assert_eq!((udp[22], udp[23], udp[24], udp[25]), (0x0800, 5, 4, 33));
    assert!(
        udp[26] > 0,
        "xdp_md's kernel type id, not bpfjet's context BTF's"
    );
    assert_eq!(udp[27], 24, "sizeof(struct xdp_md)");
    assert_eq!(
        outcomes[0]["retval"], 3,
        "UDP answered XDP_TX by enum relocation"
    );
    let tcp = results(&outcomes[1]);
    assert_eq!((tcp[23], outcomes[1]["retval"].as_u64()), (7, Some(2)));
}

#[test]
fn custom_target_btf_bitfields_enums_and_types() {
    let test = "custom_target_btf_bitfields_enums_and_types";
    if !kernel_or_skip(test) {
        return;
    }
    let b = built();
    let outcomes = differential(test, &b.bits, "bits", Some(&b.bits_target));
    let all: Vec<Vec<u64>> = outcomes.iter().map(results).collect();
    for field in 0..4 {
        let mut seen: Vec<u64> = all.iter().map(|r| r[field]).collect();
        seen.sort_unstable();
        seen.dedup();
        assert!(
            seen.len() > 1,
            "bitfield {field} reads the same in every frame: {all:?}"
        );
    }
    let noise = &all[2];
    assert_eq!(noise[6], 7, "MODE_FAST is 7 in the target");
    assert_eq!(noise[7], 0, "MODE_TURBO is not in the target");
    assert_eq!(noise[8], 8, "the target's struct header is 8 bytes");
    assert_eq!(noise[9], 0, "header___local has a field the target lacks");
    assert_eq!(noise[10], 0, "checksum is not in the target");
    assert_eq!(noise[11], 1, "b is a signed bitfield");
    let ones = results(&outcomes[3]);
    assert_eq!(
        (ones[0], ones[1] as i64, ones[2], ones[3]),
        (7, -1, (1 << 20) - 1, (1 << 9) - 1),
        "all-ones frame: unsigned fields at their maximum, the signed one -1"
    );
    assert_eq!(outcomes[3]["retval"], 1, "b < 0 drops");
}

#[test]
fn guarded_missing_field_is_dead_code_and_accepted() {
    let test = "guarded_missing_field_is_dead_code_and_accepted";
    if !kernel_or_skip(test) {
        return;
    }
    let b = built();
    differential(test, &b.bits, "guarded", Some(&b.bits_target));
}

#[test]
fn reachable_unresolved_relocation_is_rejected_naming_it() {
    let b = built();
    let frame = b.dir.file("unguarded.bin", [0u8; 64]);
    let named =
        "unresolved CO-RE relocation #0 (field byte offset of struct header___local::checksum)";
    for engine in ["interp", "jit"] {
        let run = test_run(
            &b.bits_unguarded,
            "unguarded",
            &frame,
            engine,
            Some(&b.bits_target),
        );
        assert_ne!(run.code, Some(0), "{engine}: {}", run.stdout);
        assert!(run.stderr.contains(named), "{engine}: {}", run.stderr);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    }
    let verify = bpfjet(&["verify", &b.bits_unguarded, "--btf", &b.bits_target], b"");
    assert_eq!(verify.code, Some(1), "{}", verify.stderr);
    assert!(verify.stderr.contains(named), "{}", verify.stderr);
    assert!(
        verify.stdout.contains("guarded: accepted"),
        "{}",
        verify.stdout
    );
    // Without the verifier nothing proves the poison unreachable.
    let unverified = bpfjet(
        &[
            "test-run",
            &b.bits,
            "--prog",
            "guarded",
            "--data",
            &frame,
            "--unverified",
            "--btf",
            &b.bits_target,
        ],
        b"",
    );
    assert_ne!(unverified.code, Some(0));
    assert!(
        unverified.stderr.contains("unresolved CO-RE relocation")
            && unverified.stderr.contains("drop --unverified"),
        "{}",
        unverified.stderr
    );
    if kernel_or_skip("reachable_unresolved_relocation_is_rejected_naming_it (kernel)") {
        let kernel = test_run(
            &b.bits_unguarded,
            "unguarded",
            &frame,
            "kernel",
            Some(&b.bits_target),
        );
        assert_ne!(
            kernel.code,
            Some(0),
            "the kernel accepted it: {}",
            kernel.stdout
        );
    }
}

#[test]
fn kernel_types_missing_without_btf_reject_on_both() {
    // bits.o's types exist only in the -DTARGET object: against the running
    // kernel every bitfield read is poisoned and reachable.
    let b = built();
    let frame = b.dir.file("no-btf.bin", [0u8; 64]);
    let ours = test_run(&b.bits, "bits", &frame, "interp", None);
    assert_ne!(ours.code, Some(0));
    assert!(
        ours.stderr.contains(
            "unresolved CO-RE relocation #0 (field byte offset of struct flags___local::a)"
        ),
        "{}",
        ours.stderr
    );
    if kernel_or_skip("kernel_types_missing_without_btf_reject_on_both (kernel)") {
        let kernel = test_run(&b.bits, "bits", &frame, "kernel", None);
        assert_ne!(
            kernel.code,
            Some(0),
            "the kernel accepted it: {}",
            kernel.stdout
        );
    }
}

#[test]
fn bad_btf_file_is_a_clear_error() {
    let b = built();
    let frame = b.dir.file("bad-btf.bin", [0u8; 64]);
    let junk = b.dir.file("junk.btf", b"not BTF at all");
    let run = test_run(&b.bits, "bits", &frame, "interp", Some(&junk));
    assert_ne!(run.code, Some(0));
    assert!(run.stderr.contains("junk.btf"), "{}", run.stderr);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    let missing = b.dir.path("missing.btf");
    let run = test_run(&b.bits, "bits", &frame, "interp", Some(&missing));
    assert!(run.stderr.contains("missing.btf"), "{}", run.stderr);
}

#[test]
fn compile_and_aot_take_the_same_target() {
    let b = built();
    let frame = b.dir.file("aot.bin", [0xffu8; 80]);
    let artifact = b.dir.path("bits.aot");
    let compile = bpfjet(
        &["compile", &b.bits, "--btf", &b.bits_target, "-o", &artifact],
        b"",
    );
    assert_eq!(compile.code, Some(0), "{}", compile.stderr);
    let jit = outcome(
        &test_run(&b.bits, "bits", &frame, "jit", Some(&b.bits_target)),
        "jit",
    );
    let aot = bpfjet(
        &[
            "test-run",
            &b.bits,
            "--prog",
            "bits",
            "--data",
            &frame,
            "--aot",
            &artifact,
            "--btf",
            &b.bits_target,
            "--json",
            "--dump-maps",
        ],
        b"",
    );
    assert_eq!(outcome(&aot, "aot"), jit);
}

/// `bpfjet replace` into a run started with `--btf` relocates the new
/// object against the same target: bits.o loads only with it.
#[test]
fn replace_uses_the_runs_target_btf() {
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let b = built();
    let instance = format!("core-replace-{}", std::process::id());
    let mut child = Command::new(env!("CARGO_BIN_EXE_bpfjet"))
        .args(["run", &b.bits, "--prog", "guarded", "--btf", &b.bits_target])
        .args(["--engine", "interp", "--name", &instance, "--force"])
        .args(["--gen", "size=80,count=unbounded", "--duration", "30"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting bpfjet run");
    let socket = PathBuf::from(format!("/dev/shm/bpfjet.{instance}.ctl"));
    let started = Instant::now();
    while !socket.exists() {
        if let Ok(Some(status)) = child.try_wait() {
            let out = child.wait_with_output().unwrap();
            panic!(
                "run exited early ({status}): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no control socket"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let replaced = bpfjet(
        &[
            "replace",
            "--instance",
            &instance,
            &b.bits,
            "--prog",
            "guarded",
        ],
        b"",
    );
    // SIGTERM ends the run whatever the replace did.
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let out = child.wait_with_output().unwrap();
    assert_eq!(replaced.code, Some(0), "replace: {}", replaced.stderr);
    assert!(
        out.status.success(),
        "run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// xdp_md views whose loads cannot be narrowed (pointer or signed fields):
/// poisoned by libbpf and by bpfjet alike, so both reject the program.
#[test]
fn unnarrowable_context_views_are_rejected_on_both() {
    let b = built();
    let frame = b.dir.file("views.bin", [0u8; 64]);
    for (view, reason) in [
        ("ptr", "no matching target in bpfjet's context types"),
        ("signed", "not an unsigned integer or pointer on both sides"),
    ] {
        let object = b.dir.path(&format!("view_{view}.o"));
        compile(
            &source("ctx_views.c"),
            &object,
            &[&format!("-DVIEW={view}")],
        );
        let named = format!(
            "unresolved CO-RE relocation #0 (field byte offset of struct xdp_md___{view}::data_end)"
        );
        for engine in ["interp", "jit"] {
            let run = test_run(&object, "view", &frame, engine, None);
            assert_ne!(run.code, Some(0), "{view} on {engine}: {}", run.stdout);
            assert!(
                run.stderr.contains(&named) && run.stderr.contains(reason),
                "{view} on {engine}: {}",
                run.stderr
            );
        }
        if kernel_or_skip("unnarrowable_context_views_are_rejected_on_both (kernel)") {
            let kernel = test_run(&object, "view", &frame, "kernel", None);
            assert_ne!(
                kernel.code,
                Some(0),
                "the kernel accepted {view}: {}",
                kernel.stdout
            );
        }
    }
}
