/* uprobe.multi / uretprobe.multi programs on tests/trace/multi_target.c
 * (TARGET_EXE given with -D). Slots of `counts`: 0 entries of mf_*, 1 sum
 * of their argument, 2 sum of bpf_get_attach_cookie at entries, 3 returns
 * of mf_?e*, 4 sum of their return values, 5 entries of m?_gamm? .
 * `by_ip`: hits per bpf_get_func_ip (entries and returns). */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#define COUNTS_SLOTS 16
#include "counts.h"
#include "by_ip.h"

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
