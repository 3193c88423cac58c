/* A system-call tracepoint with a program the agent refuses only once
 * loaded in the process (a uretprobe at an offset: `bpfjet trace --pid`
 * computes its address fine; crates/cli/tests/trace_pid.rs). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

__u64 calls;

SEC("tracepoint/syscalls/sys_enter_getpid")
int enter_getpid(void *ctx)
{
	__sync_fetch_and_add(&calls, 1);
	return 0;
}

SEC("uretprobe/libc.so.6:getpid+4")
int getpid_return(void *ctx)
{
	__sync_fetch_and_add(&calls, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
