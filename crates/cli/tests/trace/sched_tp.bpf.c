// A tracepoint outside the process's own system calls: `bpfjet trace`
// must refuse it before the target starts.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("tracepoint/sched/sched_switch")
int on_switch(void *ctx)
{
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
