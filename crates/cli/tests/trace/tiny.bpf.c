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
#define COUNTS_SLOTS 16
#include "counts.h"
#include "by_ip.h"

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

/* A return with a value (libbpf's glob has no [zi]: one section each). */
static __always_inline int value_return(struct pt_regs *ctx, int ret)
{
	bump(2, 1);
	bump(3, ret);
	count_ip(ctx);
	return 0;
}

SEC("uretprobe.multi/" TARGET_EXE ":tiny_z*")
int BPF_KRETPROBE(on_zero_return, int ret)
{
	return value_return(ctx, ret);
}

SEC("uretprobe.multi/" TARGET_EXE ":tiny_i*")
int BPF_KRETPROBE(on_inc_return, int ret)
{
	return value_return(ctx, ret);
}

SEC("uretprobe.multi/" TARGET_EXE ":tiny_void")
int BPF_KRETPROBE(on_void_return)
{
	bump(2, 1);
	count_ip(ctx);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
