/* The USDT benchmark's program (BENCH_EXE given with -D): counts hits of
 * either probe and sums their argument through usdt.bpf.h's
 * bpf_usdt_arg, so the spec lookup is part of the cost measured. */
#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

static __always_inline int count(struct pt_regs *ctx)
{
	__u32 k = 0;
	long arg;
	__u64 *v = bpf_map_lookup_elem(&counts, &k);
	if (v)
		__sync_fetch_and_add(v, 1);
	k = 1;
	v = bpf_map_lookup_elem(&counts, &k);
	if (v && bpf_usdt_arg(ctx, 0, &arg) == 0)
		__sync_fetch_and_add(v, arg);
	return 0;
}

SEC("usdt/" BENCH_EXE ":bench:plain")
int on_plain(struct pt_regs *ctx)
{
	return count(ctx);
}

SEC("usdt/" BENCH_EXE ":bench:guarded")
int on_guarded(struct pt_regs *ctx)
{
	return count(ctx);
}

char LICENSE[] SEC("license") = "GPL";
