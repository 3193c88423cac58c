/* Entry and return probes on a function and on the function it tail-calls
 * (tests/trace/tail_target.c). Slots of `counts`: 0 outer entries,
 * 1 outer returns, 2 inner entries, 3 inner returns, 4 sum of outer's
 * return values, 5 sum of inner's. */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "counts.h"

SEC("uprobe/" TARGET_EXE ":outer")
int BPF_KPROBE(outer_entry)
{
	bump(0, 1);
	return 0;
}

SEC("uretprobe/" TARGET_EXE ":outer")
int BPF_KRETPROBE(outer_return, long ret)
{
	bump(1, 1);
	bump(4, ret);
	return 0;
}

SEC("uprobe/" TARGET_EXE ":inner")
int BPF_KPROBE(inner_entry)
{
	bump(2, 1);
	return 0;
}

SEC("uretprobe/" TARGET_EXE ":inner")
int BPF_KRETPROBE(inner_return, long ret)
{
	bump(3, 1);
	bump(5, ret);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
