/* One uprobe counting hits of the benchmark's hit() (BENCH_EXE given with
 * -D), the minimal program a probe cost is measured with; the same on
 * short_hit (a one-byte function: an int3 under bpfjet). */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

static __always_inline int count_hit(void)
{
	__u32 k = 0;
	__u64 *v = bpf_map_lookup_elem(&counts, &k);
	if (v)
		__sync_fetch_and_add(v, 1);
	return 0;
}

SEC("uprobe/" BENCH_EXE ":hit")
int BPF_KPROBE(on_hit)
{
	return count_hit();
}

SEC("uprobe/" BENCH_EXE ":short_hit")
int BPF_KPROBE(on_short_hit)
{
	return count_hit();
}

char LICENSE[] SEC("license") = "GPL";
