/* A uprobe inside tests/trace/tiny_target.c's loop_sum, at +2: an `add`
 * whose next instruction is the loop's branch target, so no jump can go
 * there (TARGET_EXE given with -D). Slots of `counts`: 0 hits, 1 sum of
 * rdi there (the argument n). */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define COUNTS_SLOTS 2
#include "counts.h"

SEC("uprobe/" TARGET_EXE ":loop_sum+0x2")
int BPF_KPROBE(on_loop_head, int n)
{
	bump(0, 1);
	bump(1, n);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
