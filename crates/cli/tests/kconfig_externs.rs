//! libbpf's own `__kconfig` externs (`LINUX_KERNEL_VERSION`,
//! `LINUX_HAS_BPF_COOKIE`, `LINUX_HAS_SYSCALL_WRAPPER`; libbpf's
//! usdt.bpf.h needs the cookie one): an XDP program copying them into a
//! map, run by `bpfjet test-run` on the interpreter, the JIT and the kernel
//! (libbpf computing the values itself), every map entry and the return
//! value equal. A strong `CONFIG_*` extern the kernel's configuration lacks
//! is refused with its name (`loader_differential.rs` checks the options
//! themselves against libbpf).

mod support;

use bpfjet_testsupport::clang::Compile;
use support::{bpfjet, Scratch};

const PROGRAM: &str = r#"
#include <stdbool.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

extern int LINUX_KERNEL_VERSION __kconfig;
extern bool LINUX_HAS_BPF_COOKIE __kconfig;
extern bool LINUX_HAS_SYSCALL_WRAPPER __kconfig;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} kconfig_seen SEC(".maps");

static __always_inline void put(__u32 k, __u64 v)
{
	bpf_map_update_elem(&kconfig_seen, &k, &v, BPF_ANY);
}

SEC("xdp")
int read_kconfig(struct xdp_md *ctx)
{
	put(0, LINUX_KERNEL_VERSION);
	put(1, LINUX_HAS_BPF_COOKIE);
	put(2, LINUX_HAS_SYSCALL_WRAPPER);
	return LINUX_HAS_BPF_COOKIE ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
"#;

fn run(obj: &str, pkt: &str, engine: &str) -> serde_json::Value {
    let r = bpfjet(
        &[
            "test-run",
            "--json",
            obj,
            "--data",
            pkt,
            "--engine",
            engine,
            "--dump-maps",
        ],
        b"",
    );
    assert_eq!(r.code, Some(0), "{engine}: {}", r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    serde_json::json!({"retval": v["retval"], "kconfig_seen": v["maps"]["kconfig_seen"]})
}

#[test]
fn kconfig_externs_match_libbpf_and_the_kernel() {
    let scratch = Scratch::new("kconfig_externs");
    let obj = Compile::text("kconfig", PROGRAM).object();
    let obj = obj.to_str().unwrap();
    let pkt = scratch.file("pkt.hex", "00".repeat(64));
    let interp = run(obj, &pkt, "interp");
    // The running kernel's version, as uname says.
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut parts = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u64>().unwrap_or(0));
    let (a, b, c) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    let version = (a << 16) + (b << 8) + c.min(255);
    assert_eq!(interp["kconfig_seen"][0]["value"], hex(version), "{interp}");
    assert_eq!(interp["kconfig_seen"][1]["value"], hex(1), "{interp}");
    assert_eq!(interp["retval"], 2, "XDP_PASS: LINUX_HAS_BPF_COOKIE");
    assert_eq!(run(obj, &pkt, "jit"), interp);
    match bpfjet_kernel::kernel_available() {
        Ok(()) => assert_eq!(
            run(obj, &pkt, "kernel"),
            interp,
            "bpfjet vs libbpf + kernel"
        ),
        Err(why) => support::skip("kconfig_externs_match_libbpf_and_the_kernel", &why),
    }
}

fn hex(v: u64) -> String {
    v.to_le_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn missing_strong_kconfig_option_is_refused_with_its_name() {
    let obj = Compile::text(
        "kconfig_unknown",
        "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n\
         extern int CONFIG_BPFJET_NO_SUCH_OPTION __kconfig;\n\
         SEC(\"xdp\") int f(struct xdp_md *ctx) \
         { return CONFIG_BPFJET_NO_SUCH_OPTION > 0 ? XDP_PASS : XDP_DROP; }\n\
         char LICENSE[] SEC(\"license\") = \"GPL\";\n",
    )
    .object();
    let r = bpfjet(&["verify", obj.to_str().unwrap()], b"");
    assert_ne!(r.code, Some(0));
    assert!(
        r.stderr.contains("CONFIG_BPFJET_NO_SUCH_OPTION")
            && r.stderr.contains("not set in the kernel configuration"),
        "{}",
        r.stderr
    );
}
