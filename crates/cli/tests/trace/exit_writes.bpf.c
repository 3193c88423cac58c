/* Writes of the target process and their results: counts[0] write
 * entries, counts[1] write exits, counts[2] bytes written. The kernel
 * loader sets `target_tgid` to the command's pid (bpfjet traces only the
 * command's tree anyway). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "counts.h"

const volatile __u32 target_tgid = 0;

struct sys_exit_ctx {
	__u64 common;
	int nr;
	int pad;
	long ret;
};

static __always_inline int ours(void)
{
	return !target_tgid || (bpf_get_current_pid_tgid() >> 32) == target_tgid;
}

SEC("tracepoint/syscalls/sys_enter_write")
int on_write(void *ctx)
{
	if (ours())
		bump(0, 1);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_write")
int on_write_exit(struct sys_exit_ctx *ctx)
{
	if (ours()) {
		bump(1, 1);
		if (ctx->ret > 0)
			bump(2, ctx->ret);
	}
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
