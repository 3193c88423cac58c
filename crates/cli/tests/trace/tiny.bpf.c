/* Entry and return probes on tests/trace/tiny_target.c's functions shorter
 * than a jump (TARGET_EXE given with -D), as uprobe.multi sections so that
 * the kernel side is tests/trace/multi_loader.c. Slots of `counts`: 0
 * entries of tiny_*, 1 sum of their first argument at tiny_inc entries,
 * 2 returns of tiny_*, 3 sum of tiny_zero and tiny_inc return values.
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

SEC("uprobe.multi/" TARGET_EXE ":tiny_*")
int BPF_KPROBE(on_tiny_entry, int x)
{
	bump(0, 1);
	count_ip(ctx);
	return 0;
}

SEC("uprobe.multi/" TARGET_EXE ":tiny_inc")
int BPF_KPROBE(on_inc_entry, int x)
{
	bump(1, x);
	return 0;
}

SEC("uretprobe.multi/" TARGET_EXE ":tiny_z*")
int BPF_KRETPROBE(on_zero_return, int ret)
{
	bump(2, 1);
	bump(3, ret);
	count_ip(ctx);
	return 0;
}

SEC("uretprobe.multi/" TARGET_EXE ":tiny_i*")
int BPF_KRETPROBE(on_inc_return, int ret)
{
	bump(2, 1);
	bump(3, ret);
	count_ip(ctx);
	return 0;
}

SEC("uretprobe.multi/" TARGET_EXE ":tiny_void")
int BPF_KRETPROBE(on_void_return)
{
	bump(2, 1);
	count_ip(ctx);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
