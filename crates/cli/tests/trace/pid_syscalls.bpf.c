/* A system-call tracepoint: refused by `bpfjet trace --pid`
 * (crates/cli/tests/trace_pid.rs). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

__u64 writes;

SEC("tracepoint/syscalls/sys_enter_write")
int on_write(void *ctx)
{
	__sync_fetch_and_add(&writes, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
