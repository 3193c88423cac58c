/* Counts libc's getppid in every process of a traced tree with a uprobe
 * only (no system call is traced: the agent hooks libc's exec functions
 * and _exit to see images end). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "counts.h"

SEC("uprobe/libc.so.6:getppid")
int on_getppid(void *ctx)
{
	bump(0, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
