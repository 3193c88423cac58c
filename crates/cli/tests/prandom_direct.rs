//! `bpf_get_prandom_u32` on the JIT is a direct call on the run's
//! generator (no helper trampoline) whose numbers look random: distinct,
//! about half their bits set. (The generator is seeded from the clock per
//! run environment, so no two engines draw the same sequence; the kernel's
//! numbers are its own.)

use bpfjet_jit::{DumpStage, JitObject, JitOptions, XdpEngine};
use bpfjet_runtime::{ObjectOptions, TestRunOptions};
use bpfjet_testsupport::Compile;

const SOURCE: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u32);
} draws SEC(".maps");

SEC("xdp")
int draw(struct xdp_md *ctx)
{
#pragma clang loop unroll(full)
	for (__u32 i = 0; i < 8; i++) {
		__u32 k = i;
		__u32 *v = bpf_map_lookup_elem(&draws, &k);
		if (v)
			*v ^= bpf_get_prandom_u32();
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
"#;

#[test]
fn prandom_is_a_direct_call_drawing_random_numbers() {
    let path = Compile::text("prandom_direct", SOURCE).object();
    let obj = bpfjet_obj::load_file(&path).unwrap();
    let opts = TestRunOptions::default();
    let frame = vec![0u8; 64];

    let jit = JitObject::load(&obj, &ObjectOptions::default(), &JitOptions::uncached()).unwrap();
    for _ in 0..5 {
        jit.test_run("draw", &frame, &opts, XdpEngine::Jit).unwrap();
    }
    let state = jit.loaded().dump_state().unwrap();
    let draws: Vec<u32> = state["draws"]
        .iter()
        .map(|e| u32::from_str_radix(e.value.as_deref().unwrap(), 16).unwrap())
        .collect();
    let distinct: std::collections::BTreeSet<_> = draws.iter().collect();
    assert_eq!(distinct.len(), 8, "{draws:x?}");
    let ones: u32 = draws.iter().map(|d| d.count_ones()).sum();
    assert!(
        (80..=176).contains(&ones),
        "{ones} of 256 bits set: {draws:x?}"
    );

    let ir = jit.dump("draw", DumpStage::OptimizedIr, true).unwrap();
    assert!(ir.contains("@bpfjet_jit_prandom("), "{ir}");
    assert!(!ir.contains("call i64 @bpfjet_jit_helper("), "{ir}");
}
