/* A uprobe on hazard_fn of HAZARD_TARGET (tests/trace/hazard_target.c). */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

__u64 hits;

SEC("uprobe/" HAZARD_TARGET ":hazard_fn")
int BPF_KPROBE(on_hazard)
{
	__sync_fetch_and_add(&hits, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
