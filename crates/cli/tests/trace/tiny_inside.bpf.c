/* A uprobe inside tests/trace/tiny_target.c's loop_sum, at +2: an `add`
 * whose next instruction is the loop's branch target, so no jump can go
 * there (TARGET_EXE given with -D). Slots of `counts`: 0 hits, 1 sum of
 * rdi there (the argument n). */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

SEC("uprobe/" TARGET_EXE ":loop_sum+0x2")
int BPF_KPROBE(on_loop_head, int n)
{
	__u32 k = 0;
	__u64 *v = bpf_map_lookup_elem(&counts, &k);
	if (v)
		__sync_fetch_and_add(v, 1);
	k = 1;
	v = bpf_map_lookup_elem(&counts, &k);
	if (v)
		__sync_fetch_and_add(v, n);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
