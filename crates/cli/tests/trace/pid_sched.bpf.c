/* A tracepoint that is not a system call's: refused by `bpfjet trace
 * --pid` before the process is touched (crates/cli/tests/trace_pid.rs). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

__u64 switches;

SEC("tracepoint/sched/sched_switch")
int on_switch(void *ctx)
{
	__sync_fetch_and_add(&switches, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
