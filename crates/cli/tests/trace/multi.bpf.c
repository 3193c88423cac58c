/* uprobe.multi / uretprobe.multi programs on tests/trace/multi_target.c
 * (TARGET_EXE given with -D). Slots of `counts`: 0 entries of mf_*, 1 sum
 * of their argument, 2 sum of bpf_get_attach_cookie at entries, 3 returns
 * of mf_?e*, 4 sum of their return values, 5 entries of m?_gamm? .
 * `by_ip`: hits per bpf_get_func_ip (entries and returns). */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u64);
	__type(value, __u64);
} by_ip SEC(".maps");

static __always_inline void bump(__u32 slot, __u64 by)
{
	__u64 *v = bpf_map_lookup_elem(&counts, &slot);
	if (v)
		__sync_fetch_and_add(v, by);
}

static __always_inline void count_ip(struct pt_regs *ctx)
{
	__u64 ip = bpf_get_func_ip(ctx), one = 1;
	__u64 *v = bpf_map_lookup_elem(&by_ip, &ip);
	if (v)
		__sync_fetch_and_add(v, 1);
	else
		bpf_map_update_elem(&by_ip, &ip, &one, BPF_NOEXIST);
}

SEC("uprobe.multi/" TARGET_EXE ":mf_*")
int BPF_KPROBE(on_mf_entry, int x)
{
	bump(0, 1);
	bump(1, x);
	bump(2, bpf_get_attach_cookie(ctx));
	count_ip(ctx);
	return 0;
}

SEC("uretprobe.multi/" TARGET_EXE ":mf_?e*")
int BPF_KRETPROBE(on_mf_return, int ret)
{
	bump(3, 1);
	bump(4, ret);
	count_ip(ctx);
	return 0;
}

SEC("uprobe.multi/" TARGET_EXE ":m?_gamm?")
int on_gamma(struct pt_regs *ctx)
{
	bump(5, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
