/* Entry and return probes on tests/trace/strip_target.c, stripped
 * (TARGET_EXE given with -D), as uprobe.multi sections for
 * tests/trace/multi_loader.c, which names the functions from the debug
 * file. Slots of `counts`: 0 entries of hidden_step, 1 sum of its
 * argument, 2 entries of tail_call, 3 sum of tail_call's return values. */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "counts.h"

SEC("uprobe.multi/" TARGET_EXE ":hidden_step")
int BPF_KPROBE(on_hidden, int x)
{
	bump(0, 1);
	bump(1, x);
	return 0;
}

SEC("uprobe.multi/" TARGET_EXE ":tail_call")
int BPF_KPROBE(on_tail)
{
	bump(2, 1);
	return 0;
}

SEC("uretprobe.multi/" TARGET_EXE ":tail_call")
int BPF_KRETPROBE(on_tail_return, int ret)
{
	bump(3, ret);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
