//! Several objects, one deployment (Katran's root/xdp_root pattern),
//! against the kernel: a small root XDP program in one object tail-calls,
//! through a PROG_ARRAY pinned by name, a balancer loaded from another
//! object; both count into a statistics map pinned by name, so it is one
//! map. The kernel side is libbpf with a temporary bpffs pin root and the
//! prog array filled with the balancer's fd; bpfjet's interpreter and JIT
//! must give the same action, bytes and maps. Bad deployments (an unknown
//! OBJECT:PROGRAM, pinned maps declared differently, a tail call from xdp
//! into xdp.frags) are refused with a clear message, as the kernel does.

mod support;

use support::{bpfjet, BpfjetRun, Scratch};

/// The root: counts every packet in stats[0], hands it to whatever
/// root_array[0] holds, and passes it when the slot is empty.
const ROOT: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
    __uint(type, BPF_MAP_TYPE_PROG_ARRAY);
    __uint(max_entries, 4);
    __type(key, __u32);
    __type(value, __u32);
    __uint(pinning, LIBBPF_PIN_BY_NAME);
} root_array SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 4);
    __type(key, __u32);
    __type(value, __u64);
    __uint(pinning, LIBBPF_PIN_BY_NAME);
} STATS_NAME SEC(".maps");

__u32 root_hits = 0;

SEC("xdp")
int xdp_root(struct xdp_md *ctx)
{
    __u32 k = 0;
    __u64 *n = bpf_map_lookup_elem(&STATS_NAME, &k);
    if (n)
        __sync_fetch_and_add(n, 1);
    root_hits++;
    bpf_tail_call(ctx, &root_array, 0);
    return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
"#;

/// The balancer: a VIP table lookup on the IPv4 destination, then the
/// backend's MAC written as destination and the frame sent back (XDP_TX);
/// counts into the shared stats[1] and its own per-VIP counters.
const BALANCER: &str = r#"
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct backend { unsigned char mac[6]; __u16 pad; __u64 packets; };

struct {
    __uint(type, BPF_MAP_TYPE_PROG_ARRAY);
    __uint(max_entries, 4);
    __type(key, __u32);
    __type(value, __u32);
    __uint(pinning, LIBBPF_PIN_BY_NAME);
} root_array SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, STATS_ENTRIES);
    __type(key, __u32);
    __type(value, __u64);
    __uint(pinning, LIBBPF_PIN_BY_NAME);
} stats SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 16);
    __type(key, __u32);
    __type(value, struct backend);
} vip_map SEC(".maps");

__u32 root_hits = 0; /* the same global as the root's: two different maps */

SEC(BALANCER_SECTION)
int balancer_ingress(struct xdp_md *ctx)
{
    void *data = (void *)(long)ctx->data;
    void *end = (void *)(long)ctx->data_end;
    struct ethhdr *eth = data;
    struct iphdr *ip = data + sizeof(*eth);
    __u32 k = 1;
    __u64 *n = bpf_map_lookup_elem(&stats, &k);
    if (n)
        __sync_fetch_and_add(n, 1);
    root_hits += 10;
    if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
        return XDP_DROP;
    __u32 vip = ip->daddr;
    struct backend *b = bpf_map_lookup_elem(&vip_map, &vip);
    if (!b)
        return XDP_DROP;
    __builtin_memcpy(eth->h_source, eth->h_dest, 6);
    __builtin_memcpy(eth->h_dest, b->mac, 6);
    __sync_fetch_and_add(&b->packets, 1);
    return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
"#;

/// An Ethernet + IPv4 + UDP frame from 10.0.0.1 to `dst`.
fn frame(dst: [u8; 4]) -> Vec<u8> {
    bpfjet_testsupport::packet::udp4([10, 0, 0, 1], dst, &(0u8..18).collect::<Vec<_>>())
}

use bpfjet_testsupport::packet::hex;

struct Built {
    dir: Scratch,
    root: String,
    balancer: String,
}

/// Compiles the two objects; `root_defines`/`lb_defines` vary them for the
/// bad-input cases.
fn build(test: &str, root_defines: &[&str], lb_defines: &[&str]) -> Built {
    let dir = Scratch::new(test);
    let with = |source: &str, defines: &[&str]| {
        let mut text = String::new();
        for d in defines {
            let (name, value) = d.split_once('=').expect("NAME=VALUE");
            text.push_str(&format!("#define {name} {value}\n"));
        }
        text + source
    };
    let root = dir.compile_c("root", &with(ROOT, root_defines));
    let balancer = dir.compile_c("balancer", &with(BALANCER, lb_defines));
    Built {
        dir,
        root,
        balancer,
    }
}

const GOOD_ROOT: &[&str] = &["STATS_NAME=stats"];
const GOOD_LB: &[&str] = &["STATS_ENTRIES=4", "BALANCER_SECTION=\"xdp\""];

fn state(dir: &Scratch) -> String {
    // VIP 10.0.0.99 → backend MAC 02:00:00:00:00:77.
    dir.file(
        "state.json",
        r#"{
  "root_array": [{"key": "00000000", "prog": "balancer:balancer_ingress"}],
  "vip_map": [{"key": "0a000063", "value": "020000000077 0000 0000000000000000"}]
}"#,
    )
}

fn test_run(b: &Built, engine: &str, packet: &str, maps: &str) -> BpfjetRun {
    bpfjet(
        &[
            "test-run",
            &b.root,
            "--object",
            &b.balancer,
            "--prog",
            "xdp_root",
            "--data",
            packet,
            "--maps",
            maps,
            "--engine",
            engine,
            "--json",
            "--dump-maps",
        ],
        b"",
    )
}

fn outcome(run: &BpfjetRun, what: &str) -> (u64, String, serde_json::Value) {
    assert_eq!(run.code, Some(0), "{what}: {}", run.stderr);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON report");
    (
        v["retval"].as_u64().expect("retval"),
        v["data_out"].as_str().expect("data_out").to_string(),
        v["maps"].clone(),
    )
}

const XDP_DROP: u64 = 1;
const XDP_TX: u64 = 3;

#[test]
fn root_tail_calls_a_balancer_of_another_object_like_the_kernel() {
    let b = build("xobj-root", GOOD_ROOT, GOOD_LB);
    let maps = state(&b.dir);
    for (what, dst, action) in [
        ("VIP", [10, 0, 0, 99], XDP_TX),
        ("not a VIP", [10, 0, 0, 98], XDP_DROP),
    ] {
        let packet = b.dir.file("pkt.bin", frame(dst));
        let interp = outcome(&test_run(&b, "interp", &packet, &maps), "interp");
        let jit = outcome(&test_run(&b, "jit", &packet, &maps), "jit");
        assert_eq!(interp, jit, "{what}: interp vs jit");
        assert_eq!(interp.0, action, "{what}: action");
        let m = &interp.2;
        // One stats map: the root's and the balancer's counts side by side.
        assert_eq!(
            m["stats"][0]["value"], "0100000000000000",
            "{what}: root count in the shared map: {m}"
        );
        assert_eq!(m["stats"][1]["value"], "0100000000000000", "{what}: {m}");
        // Each object's own .bss: the primary keeps its name.
        assert_eq!(m[".bss"][0]["value"], "01000000", "{what}: {m}");
        assert_eq!(m["balancer:.bss"][0]["value"], "0a000000", "{what}: {m}");
        assert_eq!(
            m["root_array"][0]["prog"], "balancer:balancer_ingress",
            "{what}: {m}"
        );
        if action == XDP_TX {
            let mut expected = frame(dst);
            expected.copy_within(0..6, 6);
            expected[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 0x77]);
            assert_eq!(interp.1, hex(&expected), "{what}: rewritten frame");
        }
        match bpfjet_kernel::kernel_available() {
            Ok(()) => {
                let kernel = outcome(&test_run(&b, "kernel", &packet, &maps), "kernel");
                assert_eq!(interp, kernel, "{what}: bpfjet vs kernel");
            }
            Err(why) => support::skip("cross-object deployment vs kernel", &why),
        }
    }
}

/// Runs every engine on a bad deployment: each must refuse it, the kernel
/// included (when available), and bpfjet's message must contain `expect`.
fn refused(b: &Built, maps: &str, expect: &str) {
    let packet = b.dir.file("pkt.bin", frame([10, 0, 0, 99]));
    for engine in ["interp", "jit"] {
        let run = test_run(b, engine, &packet, maps);
        // 2: the run could not start (bad input), as for any refused load.
        assert_eq!(run.code, Some(2), "{engine}: {}{}", run.stdout, run.stderr);
        assert!(
            run.stderr.contains(expect),
            "{engine}: expected {expect:?} in: {}",
            run.stderr
        );
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    }
    match bpfjet_kernel::kernel_available() {
        Ok(()) => {
            let run = test_run(b, "kernel", &packet, maps);
            assert_eq!(
                run.code,
                Some(2),
                "the kernel: {}{}",
                run.stdout,
                run.stderr
            );
        }
        Err(why) => support::skip("bad deployment vs kernel", &why),
    }
}

#[test]
fn prog_array_entry_naming_an_unknown_program_is_refused() {
    let b = build("xobj-unknown", GOOD_ROOT, GOOD_LB);
    let maps = b.dir.file(
        "bad.json",
        r#"{"root_array": [{"key": "00000000", "prog": "balancer:no_such_prog"}]}"#,
    );
    refused(&b, &maps, "no_such_prog");
    let maps = b.dir.file(
        "bad2.json",
        r#"{"root_array": [{"key": "00000000", "prog": "nolb:balancer_ingress"}]}"#,
    );
    refused(&b, &maps, "nolb:balancer_ingress");
}

#[test]
fn pinned_maps_declared_differently_are_refused_naming_both() {
    let lb = ["STATS_ENTRIES=8", "BALANCER_SECTION=\"xdp\""];
    let b = build("xobj-pin", GOOD_ROOT, &lb);
    let maps = state(&b.dir);
    refused(&b, &maps, "map \"stats\" is pinned by name");
    let packet = b.dir.file("pkt.bin", frame([10, 0, 0, 99]));
    let run = test_run(&b, "interp", &packet, &maps);
    assert!(
        run.stderr
            .contains("root has array key 4 value 8 max_entries 4")
            && run
                .stderr
                .contains("balancer has array key 4 value 8 max_entries 8"),
        "both declarations named: {}",
        run.stderr
    );
}

#[test]
fn tail_call_into_another_program_type_is_refused() {
    // The kernel lets a PROG_ARRAY hold only programs of its users' type:
    // an xdp root cannot enter an xdp.frags balancer.
    let lb = ["STATS_ENTRIES=4", "BALANCER_SECTION=\"xdp.frags\""];
    let b = build("xobj-frags", GOOD_ROOT, &lb);
    let maps = state(&b.dir);
    refused(&b, &maps, "frags flag");
    // Nor a program for devmap entries (expected attach type BPF_XDP_DEVMAP).
    let lb = ["STATS_ENTRIES=4", "BALANCER_SECTION=\"xdp/devmap\""];
    let b = build("xobj-devmap", GOOD_ROOT, &lb);
    let maps = state(&b.dir);
    refused(&b, &maps, "(xdp/devmap) cannot be put into it");
}

/// `bpfjet run` with the deployment: every generated packet enters the
/// root, which tail-calls the balancer; packets to the VIP are sent back
/// (TX), the others dropped — on the interpreter and the JIT alike.
#[test]
fn run_drives_the_deployment_on_generated_traffic() {
    let b = build("xobj-run", GOOD_ROOT, GOOD_LB);
    let maps = state(&b.dir);
    for engine in ["interp", "jit"] {
        for (dst, action) in [("10.0.0.99", "TX"), ("10.0.0.98", "DROP")] {
            let name = format!("xobj-run-{engine}-{action}-{}", std::process::id());
            let gen = format!("proto=udp,dst={dst}:80,flows=8,count=2000");
            let run = bpfjet(
                &[
                    "run",
                    &b.root,
                    "--object",
                    &b.balancer,
                    "--maps",
                    &maps,
                    "--engine",
                    engine,
                    "--name",
                    &name,
                    "--json",
                    "--gen",
                    &gen,
                ],
                b"",
            );
            assert_eq!(run.code, Some(0), "{engine} {dst}: {}", run.stderr);
            let summary: serde_json::Value =
                serde_json::from_str(run.stdout.lines().last().unwrap_or_default())
                    .expect("run --json summary");
            assert_eq!(summary["packets"], 2000, "{engine} {dst}: {summary}");
            assert_eq!(
                summary["actions"][action], 2000,
                "{engine} {dst}: {summary}"
            );
        }
    }
}
