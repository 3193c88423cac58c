//! What an object must look like to load, compared with the kernel (libbpf
//! 1.x + the kernel verifier) on programs compiled here from C:
//! section names and `--prog-type`, objects without a `license` section and
//! GPL-only helpers, and commands whose reader goes away.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use support::{bpfjet, BpfjetRun, Scratch};

const HEADERS: &str = "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n";

fn kernel_or_skip(test: &str) -> bool {
    match bpfjet_kernel::kernel_available() {
        Ok(()) => true,
        Err(why) => {
            support::skip(test, &why);
            false
        }
    }
}

fn test_run(obj: &str, packet: &str, engine: &str, extra: &[&str]) -> BpfjetRun {
    let mut args = vec![
        "test-run", obj, "--data", packet, "--engine", engine, "--json",
    ];
    args.extend_from_slice(extra);
    bpfjet(&args, b"")
}

/// retval and data_out of a successful JSON run.
fn outcome(run: &BpfjetRun, what: &str) -> (u64, String) {
    assert_eq!(
        run.code,
        Some(0),
        "{what}: exit {:?}\n{}",
        run.code,
        run.stderr
    );
    let v: serde_json::Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {}", run.stdout));
    (
        v["retval"].as_u64().expect("retval"),
        v["data_out"].as_str().expect("data_out").to_string(),
    )
}

#[test]
fn unknown_sections_need_prog_type_like_bpftool() {
    let dir = Scratch::new("prog-type");
    let obj = dir.compile_c(
        "custom",
        &format!(
            "{HEADERS}
SEC(\"xdp_patch_ports\")
int patch(struct xdp_md *ctx) {{
    void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
    unsigned char *p = data;
    if (p + 4 > (unsigned char *)end) return XDP_ABORTED;
    p[0] ^= 0xff; p[3] = p[1] + p[2];
    return XDP_TX;
}}
char LICENSE[] SEC(\"license\") = \"GPL\";"
        ),
    );
    let packet = dir.file("pkt.bin", (0u8..64).collect::<Vec<u8>>());

    // Refused, with the way out in the message.
    let verify = bpfjet(&["verify", &obj], b"");
    assert_ne!(verify.code, Some(0), "{}", verify.stdout);
    assert!(
        verify.stderr.contains("--prog-type xdp") && verify.stderr.contains("type unknown"),
        "{}",
        verify.stderr
    );
    let run = test_run(&obj, &packet, "interp", &[]);
    assert!(run.stderr.contains("--prog-type xdp"), "{}", run.stderr);

    let verify = bpfjet(&["verify", &obj, "--prog-type", "xdp"], b"");
    assert_eq!(verify.code, Some(0), "{}", verify.stderr);
    let bad = bpfjet(&["verify", &obj, "--prog-type", "tc"], b"");
    assert!(bad.stderr.contains("sched_cls"), "{}", bad.stderr);

    let interp = outcome(
        &test_run(&obj, &packet, "interp", &["--prog-type", "xdp"]),
        "interp",
    );
    let jit = outcome(
        &test_run(&obj, &packet, "jit", &["--prog-type", "xdp"]),
        "jit",
    );
    assert_eq!(interp, jit);
    assert_eq!(interp.0, 3, "XDP_TX");
    // compile (AOT) needs it as well, and test-run --aot with it runs the artifact.
    let artifact = dir.path("custom.aot");
    let refused = bpfjet(&["compile", &obj, "-o", &artifact], b"");
    assert!(
        refused.stderr.contains("--prog-type xdp"),
        "{}",
        refused.stderr
    );
    let compiled = bpfjet(
        &["compile", &obj, "--prog-type", "xdp", "-o", &artifact],
        b"",
    );
    assert_eq!(compiled.code, Some(0), "{}", compiled.stderr);
    let aot = outcome(
        &test_run(
            &obj,
            &packet,
            "jit",
            &["--prog-type", "xdp", "--aot", &artifact],
        ),
        "aot",
    );
    assert_eq!(aot, interp);
    if !kernel_or_skip("prog-type against the kernel") {
        return;
    }
    // libbpf 1.x refuses the section as bpfjet does...
    let refused = test_run(&obj, &packet, "kernel", &[]);
    assert_ne!(refused.code, Some(0), "{}", refused.stdout);
    // ...and with the type forced runs it as bpfjet does.
    let kernel = outcome(
        &test_run(&obj, &packet, "kernel", &["--prog-type", "xdp"]),
        "kernel",
    );
    assert_eq!(kernel, interp, "kernel vs bpfjet");
}

#[test]
fn libbpf_section_table() {
    let dir = Scratch::new("sections");
    let mut source = HEADERS.to_string();
    for (i, section) in [
        "xdp",
        "xdp.frags",
        "xdp/devmap",
        "xdp/cpumap",
        "xdp.frags/devmap",
    ]
    .iter()
    .enumerate()
    {
        source.push_str(&format!(
            "SEC(\"{section}\") int p{i}(struct xdp_md *ctx) {{ return XDP_PASS; }}\n"
        ));
    }
    source.push_str("char LICENSE[] SEC(\"license\") = \"GPL\";\n");
    let obj = dir.compile_c("sections", &source);
    let verify = bpfjet(&["verify", &obj], b"");
    assert_eq!(verify.code, Some(0), "{}", verify.stderr);
    for i in 0..5 {
        assert!(
            verify.stdout.contains(&format!("p{i}: accepted")),
            "{}",
            verify.stdout
        );
    }
}

/// A program's verdict on bpfjet's verifier and on the kernel's (through
/// libbpf): `Ok(())` or `Err(message)`.
fn verdicts(obj: &str, packet: &str) -> (Result<(), String>, Option<Result<(), String>>) {
    let ours = bpfjet(&["verify", obj], b"");
    let ours = if ours.code == Some(0) {
        Ok(())
    } else {
        Err(ours.stderr)
    };
    let kernel = bpfjet_kernel::kernel_available().ok().map(|()| {
        let run = test_run(obj, packet, "kernel", &[]);
        if run.code == Some(0) {
            Ok(())
        } else {
            Err(run.stderr)
        }
    });
    (ours, kernel)
}

const GPL_MESSAGE: &str = "cannot call GPL-restricted function from non-GPL compatible program";

#[test]
fn license_less_objects_and_gpl_only_helpers() {
    let dir = Scratch::new("license");
    let packet = dir.file("pkt.bin", [0u8; 64]);
    // (name, license line, body, accepted)
    let cases: &[(&str, &str, &str, bool)] = &[
        (
            "none_plain",
            "",
            "return bpf_ktime_get_ns() ? XDP_PASS : XDP_DROP;",
            true,
        ),
        (
            "none_printk",
            "",
            "char f[] = \"x %d\"; bpf_trace_printk(f, sizeof(f), 1); return XDP_PASS;",
            false,
        ),
        (
            "mit_printk",
            "char LICENSE[] SEC(\"license\") = \"MIT\";",
            "char f[] = \"x %d\"; bpf_trace_printk(f, sizeof(f), 1); return XDP_PASS;",
            false,
        ),
        (
            "none_probe_read",
            "",
            "long v = 0; bpf_probe_read_kernel(&v, sizeof(v), 0); return XDP_PASS;",
            false,
        ),
        (
            "none_vprintk",
            "",
            "char f[] = \"x %d\"; __u64 a[1] = {1}; \
             bpf_trace_vprintk(f, sizeof(f), a, sizeof(a)); return XDP_PASS;",
            false,
        ),
        (
            "dual_printk",
            "char LICENSE[] SEC(\"license\") = \"Dual BSD/GPL\";",
            "char f[] = \"x %d\"; bpf_trace_printk(f, sizeof(f), 1); return XDP_PASS;",
            true,
        ),
    ];
    let mut kernel_checked = 0;
    for (name, license, body, accepted) in cases {
        let obj = dir.compile_c(
            name,
            &format!(
                "{HEADERS}SEC(\"xdp\") int prog(struct xdp_md *ctx) {{ {body} }}\n{license}\n"
            ),
        );
        let (ours, kernel) = verdicts(&obj, &packet);
        match (&ours, accepted) {
            (Ok(()), true) => {}
            (Err(why), false) => assert!(why.contains(GPL_MESSAGE), "{name}: {why}"),
            _ => panic!("{name}: bpfjet's verdict {ours:?}, expected accepted={accepted}"),
        }
        if let Some(kernel) = kernel {
            kernel_checked += 1;
            match (&kernel, accepted) {
                (Ok(()), true) => {}
                (Err(why), false) => assert!(why.contains(GPL_MESSAGE), "{name}: kernel: {why}"),
                _ => {
                    panic!("{name}: the kernel's verdict {kernel:?}, expected accepted={accepted}")
                }
            }
        }
    }
    if kernel_checked == 0 {
        support::skip("license verdicts against the kernel", "no kernel BPF");
    }
}

#[test]
fn conformance_listing_into_a_closed_pipe_ends_quietly() {
    let dir = bpfjet_isa::conformance::default_dir();
    if !dir.is_dir() {
        support::skip(
            "conformance | head",
            &format!("no conformance vectors at {}", dir.display()),
        );
        return;
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_bpfjet"))
        .args(["conformance", "-v"])
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting bpfjet");
    let mut first = String::new();
    BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut first)
        .expect("one line");
    // The reader went away (like `| head -1`).
    let out = child.wait_with_output().expect("waiting");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        first.starts_with("PASS") || first.starts_with("FAIL"),
        "{first}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.is_empty(), "quiet: {stderr}");
}

#[test]
fn maps_left_without_max_entries() {
    let dir = Scratch::new("max-entries");
    let packet = dir.file("pkt.bin", [0u8; 64]);
    // An mmapable array left at 0 entries for its loader to size, and a
    // hash with no max_entries at all.
    let obj = dir.compile_c(
        "zero",
        &format!(
            "{HEADERS}
struct {{ __uint(type, BPF_MAP_TYPE_ARRAY); __type(key, __u32); __type(value, __u64);
         __uint(map_flags, BPF_F_MMAPABLE); }} cfg SEC(\".maps\");
struct {{ __uint(type, BPF_MAP_TYPE_HASH); __type(key, __u32); __type(value, __u64);
         __uint(max_entries, 8); }} seen SEC(\".maps\");
SEC(\"xdp\") int prog(struct xdp_md *ctx) {{
    __u32 k = 3; __u64 one = 1;
    __u64 *v = bpf_map_lookup_elem(&cfg, &k);
    if (!v) return XDP_DROP;
    *v += 7;
    bpf_map_update_elem(&seen, &k, &one, BPF_ANY);
    return XDP_PASS;
}}
char LICENSE[] SEC(\"license\") = \"GPL\";"
        ),
    );
    let verify = bpfjet(&["verify", &obj], b"");
    assert_ne!(verify.code, Some(0));
    assert!(
        verify.stderr.contains("\"cfg\"") && verify.stderr.contains("max_entries is 0"),
        "{}",
        verify.stderr
    );
    let refused = test_run(&obj, &packet, "interp", &[]);
    assert!(
        refused.stderr.contains("max_entries is 0"),
        "{}",
        refused.stderr
    );

    let sized = ["--max-entries", "cfg=4", "--dump-maps"];
    let interp = test_run(&obj, &packet, "interp", &sized);
    let jit = test_run(&obj, &packet, "jit", &sized);
    let maps = |run: &BpfjetRun, what: &str| -> serde_json::Value {
        outcome(run, what);
        serde_json::from_str::<serde_json::Value>(&run.stdout).expect("JSON")["maps"].clone()
    };
    let ours = maps(&interp, "interp");
    assert_eq!(ours, maps(&jit, "jit"));
    assert_eq!(outcome(&interp, "interp").0, 2, "XDP_PASS with cfg sized");
    if !kernel_or_skip("max_entries against the kernel") {
        return;
    }
    let kernel_refused = test_run(&obj, &packet, "kernel", &[]);
    assert_ne!(kernel_refused.code, Some(0), "{}", kernel_refused.stdout);
    let kernel = test_run(&obj, &packet, "kernel", &sized);
    assert_eq!(outcome(&kernel, "kernel"), outcome(&interp, "interp"));
    assert_eq!(maps(&kernel, "kernel"), ours, "maps after the run");
}

/// A helper bpfjet does not provide, behind frozen `.rodata` that turns it
/// off (a timer path, libbpf-tools' cgroup filters): the verifier never
/// reaches the call, as the kernel's never does, so the object loads and
/// runs on both engines; reached, it is refused by name.
#[test]
fn helpers_bpfjet_lacks_load_when_configuration_makes_them_dead() {
    let dir = Scratch::new("dead-helper");
    let packet = dir.file("pkt.bin", [0u8; 64]);
    let source = |qualifier: &str| {
        format!(
            "{HEADERS}#include <linux/ip.h>\n#include <linux/tcp.h>\n\
             {qualifier} int use_timer = {};\n\
             SEC(\"xdp\") int prog(struct xdp_md *ctx) {{\n\
                 if (use_timer)\n\
                     return bpf_timer_init(0, 0, 0) == 0 ? XDP_TX : XDP_DROP;\n\
                 return XDP_PASS;\n\
             }}\n\
             char LICENSE[] SEC(\"license\") = \"GPL\";\n",
            if qualifier == "const volatile" { 0 } else { 1 }
        )
    };
    let dead = dir.compile_c("dead", &source("const volatile"));
    for engine in ["interp", "jit"] {
        let (retval, _) = outcome(&test_run(&dead, &packet, engine, &[]), engine);
        assert_eq!(retval, 2, "{engine}: XDP_PASS expected");
    }
    if kernel_or_skip("dead helper call, kernel column") {
        let (retval, _) = outcome(&test_run(&dead, &packet, "kernel", &[]), "kernel");
        assert_eq!(retval, 2);
    }
    let live = dir.compile_c("live", &source("volatile"));
    let run = test_run(&live, &packet, "interp", &[]);
    assert_ne!(
        run.code,
        Some(0),
        "a reachable call of a helper bpfjet lacks ran"
    );
    assert!(
        run.stderr.contains("169") || run.stderr.contains("timer_init"),
        "{}",
        run.stderr
    );
}

/// `__weak` kernel symbols, as libbpf resolves them: a kfunc's address
/// (`bpf_ksym_exists`) is non-NULL for one bpfjet provides (the kernel's
/// graph kfuncs here, which the kernel has too) and NULL for a missing
/// weak one, whose guarded call is then dead code; a missing weak kernel
/// variable's address is NULL. The kernel gives the same return value. A
/// missing kfunc not declared weak fails the load, naming it.
#[test]
fn weak_ksyms_resolve_as_libbpf_resolves_them() {
    let dir = Scratch::new("weak-ksyms");
    let packet = dir.file("pkt.bin", [0u8; 64]);
    let source = |missing_qualifier: &str| {
        format!(
            "{HEADERS}\
             extern void *bpf_obj_new_impl(__u64 local_type_id, void *meta) __ksym __weak;\n\
             extern int bpfjet_no_such_kfunc(int x) __ksym {missing_qualifier};\n\
             extern int bpfjet_no_such_var __ksym __weak;\n\
             SEC(\"xdp\") int prog(struct xdp_md *ctx) {{\n\
                 int r = 1;\n\
                 if (bpf_obj_new_impl) r += 2;\n\
                 if (bpfjet_no_such_kfunc) r += bpfjet_no_such_kfunc(4);\n\
                 if (&bpfjet_no_such_var) r += 100;\n\
                 return r;\n\
             }}\n\
             char LICENSE[] SEC(\"license\") = \"GPL\";\n"
        )
    };
    let weak = dir.compile_c("weak", &source("__weak"));
    for engine in ["interp", "jit"] {
        let (retval, _) = outcome(&test_run(&weak, &packet, engine, &[]), engine);
        assert_eq!(
            retval, 3,
            "{engine}: bpf_obj_new_impl present, the others missing"
        );
    }
    if kernel_or_skip("weak ksyms, kernel column") {
        let (retval, _) = outcome(&test_run(&weak, &packet, "kernel", &[]), "kernel");
        assert_eq!(retval, 3);
    }
    let strong = dir.compile_c("strong", &source(""));
    for engine in ["interp", "jit"] {
        let run = test_run(&strong, &packet, engine, &[]);
        assert_ne!(run.code, Some(0), "{engine}: a missing strong kfunc loaded");
        assert!(
            run.stderr.contains("bpfjet_no_such_kfunc"),
            "{}",
            run.stderr
        );
    }
}

/// `--global NAME=VALUE`: a loader's configuration of its program before
/// load (`obj->rodata->NAME`), the same bytes on every engine; the
/// verifier folds the frozen value, so the branch it turns off is dead.
#[test]
fn globals_configure_the_program_on_every_engine() {
    let dir = Scratch::new("globals");
    let packet = dir.file("pkt.bin", [0u8; 64]);
    let obj = dir.compile_c(
        "globals",
        &format!(
            "{HEADERS}\
             const volatile __u32 verdict = XDP_PASS;\n\
             const volatile __s16 offset = 0;\n\
             const volatile _Bool use_offset = 0;\n\
             SEC(\"xdp\") int prog(struct xdp_md *ctx) {{\n\
                 if (use_offset) return verdict + offset;\n\
                 return verdict;\n\
             }}\n\
             char LICENSE[] SEC(\"license\") = \"GPL\";\n"
        ),
    );
    let set = [
        "--global",
        "verdict=3",
        "--global",
        "use_offset=true",
        "--global",
        "offset=-2",
    ];
    let mut engines = vec!["interp", "jit"];
    if kernel_or_skip("globals, kernel column") {
        engines.push("kernel");
    }
    for engine in engines {
        let (plain, _) = outcome(&test_run(&obj, &packet, engine, &[]), engine);
        assert_eq!(plain, 2, "{engine}: the object's own values");
        let (set_, _) = outcome(&test_run(&obj, &packet, engine, &set), engine);
        assert_eq!(set_, 1, "{engine}: 3 + -2 with --global");
    }
    // A loader's struct configuration, member by member.
    let conf = dir.compile_c(
        "conf",
        &format!(
            "{HEADERS}\
             const volatile struct {{ __u32 mode; __u16 ports[4]; }} conf = {{}};\n\
             SEC(\"xdp\") int prog(struct xdp_md *ctx) {{\n\
                 return conf.mode ? conf.ports[2] : XDP_PASS;\n\
             }}\n\
             char LICENSE[] SEC(\"license\") = \"GPL\";\n"
        ),
    );
    let set_conf = ["--global", "conf.mode=1", "--global", "conf.ports[2]=3"];
    for engine in ["interp", "jit"] {
        let (v, _) = outcome(&test_run(&conf, &packet, engine, &set_conf), engine);
        assert_eq!(v, 3, "{engine}: conf.ports[2]");
    }
    if kernel_or_skip("globals in a struct, kernel column") {
        let (v, _) = outcome(&test_run(&conf, &packet, "kernel", &set_conf), "kernel");
        assert_eq!(v, 3);
    }
    for (arg, needle) in [
        ("conf.ports[4]=1", "4 elements"),
        ("conf.nope=1", "no member"),
    ] {
        let run = test_run(&conf, &packet, "interp", &["--global", arg]);
        assert_ne!(run.code, Some(0), "{arg}");
        assert!(run.stderr.contains(needle), "{arg}: {}", run.stderr);
    }
    for (arg, needle) in [
        ("nope=1", "no object has a global variable"),
        ("offset=40000", "does not fit"),
        ("verdict=x", "not an integer"),
    ] {
        let run = test_run(&obj, &packet, "interp", &["--global", arg]);
        assert_ne!(run.code, Some(0), "{arg}");
        assert!(run.stderr.contains(needle), "{arg}: {}", run.stderr);
    }
}

/// libbpf's `SEC("?xdp")`: not loaded unless asked. `test-run` without
/// `--prog` runs the one program that autoloads, its broken `?` sibling
/// unverified; naming the `?` program loads it (`bpf_program__set_autoload`)
/// and its verifier verdict is the kernel's.
#[test]
fn autoload_off_programs_load_only_when_named() {
    let dir = Scratch::new("autoload");
    let obj = dir.compile_c(
        "autoload",
        &format!(
            "{HEADERS}
SEC(\"?xdp\") int broken(struct xdp_md *c) {{ return *(volatile int *)(long)c->data; }}
SEC(\"xdp\") int fine(struct xdp_md *c) {{ return XDP_TX; }}
char _license[] SEC(\"license\") = \"GPL\";
"
        ),
    );
    let packet = dir.file("p.hex", "00".repeat(64));
    // `verify` as `bpftool prog loadall`: the `?` program only when named.
    assert_eq!(bpfjet(&["verify", &obj], b"").code, Some(0));
    assert_eq!(
        bpfjet(&["verify", &obj, "--prog", "broken"], b"").code,
        Some(1)
    );
    let mut engines = vec!["interp", "jit"];
    if kernel_or_skip("autoload_off_programs_load_only_when_named (kernel engine)") {
        engines.push("kernel");
    }
    for engine in engines {
        let (retval, _) = outcome(&test_run(&obj, &packet, engine, &[]), engine);
        assert_eq!(retval, 3, "{engine}: XDP_TX from `fine`");
        let named = test_run(&obj, &packet, engine, &["--prog", "broken"]);
        assert_ne!(named.code, Some(0), "{engine}: {}", named.stdout);
        assert!(
            named.stderr.contains("packet") || named.stderr.contains("pkt"),
            "{engine}: not the verifier's packet-bounds refusal: {}",
            named.stderr
        );
    }
}
