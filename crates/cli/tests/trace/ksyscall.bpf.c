/* Kernel probes on system-call entry points, as libbpf programs write
 * them: `ksyscall/write` with BPF_KSYSCALL (arguments read through the
 * user registers the kernel function gets), `kretsyscall/write`, and the
 * same entry point named as a kernel function (`kprobe/__x64_sys_write`,
 * PT_REGS_PARM*_CORE_SYSCALL). Slots of `counts` (ksyscall_target.c's
 * calls; `target_tgid`, set by the kernel loader, keeps other processes
 * out):
 *  0 writes to fd 77 seen by ksyscall/write, 1 their summed `count`,
 *  2 the summed first byte of their buffers (bpf_probe_read_user),
 *  3 writes to fd 78 (closed) seen by ksyscall/write,
 *  4 kretsyscall/write's summed positive results, 5 its failures,
 *  6 failures that were -EBADF,
 *  7 writes to fd 77 seen by kprobe/__x64_sys_write, 8 their summed count,
 *  9 bpf_get_func_ip of kprobe/__x64_sys_write, 10 PT_REGS_IP - func ip,
 *  11 kretprobe/__x64_sys_write's summed positive results,
 *  12 bpf_get_func_ip of the kretprobe,
 *  13 getppid calls (ksyscall/getppid),
 *  14 ksyscall/write runs whose user stack had at least two frames (the
 *     target keeps frame pointers),
 *  15 1 if the kprobe's context says kernel mode (cs & 3 == 0),
 *  16 clone entries (ksyscall/clone), 17 its returns in the parent,
 *  18 its returns in the child (none: a forked child never returns
 *     through the entry point's kernel function). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#define COUNTS_SLOTS 24
#include "counts.h"

const volatile __u32 target_tgid = 0;

static __always_inline int ours(void)
{
	return !target_tgid || (bpf_get_current_pid_tgid() >> 32) == target_tgid;
}

static __always_inline void put(__u32 slot, __u64 v)
{
	bpf_map_update_elem(&counts, &slot, &v, BPF_ANY);
}

SEC("ksyscall/write")
int BPF_KSYSCALL(ks_write, int fd, const char *buf, size_t count)
{
	__u64 stack[4];
	char first = 0;

	if (!ours())
		return 0;
	if (fd == 78) {
		bump(3, 1);
		return 0;
	}
	if (fd != 77)
		return 0;
	bump(0, 1);
	bump(1, count);
	if (bpf_probe_read_user(&first, 1, buf) == 0)
		bump(2, first);
	if (bpf_get_stack(ctx, stack, sizeof(stack), BPF_F_USER_STACK) >= 16)
		bump(14, 1);
	return 0;
}

SEC("kretsyscall/write")
int BPF_KRETPROBE(ks_write_ret, long ret)
{
	if (!ours())
		return 0;
	if (ret > 0) {
		bump(4, ret);
	} else {
		bump(5, 1);
		if (ret == -9)
			bump(6, 1);
	}
	return 0;
}

SEC("kprobe/__x64_sys_write")
int BPF_KPROBE(kp_write, struct pt_regs *regs)
{
	__u64 ip;

	if (!ours())
		return 0;
	if (PT_REGS_PARM1_CORE_SYSCALL(regs) == 77) {
		bump(7, 1);
		bump(8, PT_REGS_PARM3_CORE_SYSCALL(regs));
	}
	ip = bpf_get_func_ip(ctx);
	put(9, ip);
	put(10, PT_REGS_IP(ctx) - ip);
	put(15, (ctx->cs & 3) == 0);
	return 0;
}

SEC("kretprobe/__x64_sys_write")
int BPF_KRETPROBE(krp_write, long ret)
{
	if (!ours())
		return 0;
	if (ret > 0)
		bump(11, ret);
	put(12, bpf_get_func_ip(ctx));
	return 0;
}

SEC("ksyscall/getppid")
int BPF_KSYSCALL(ks_getppid)
{
	if (ours())
		bump(13, 1);
	return 0;
}

SEC("ksyscall/clone")
int BPF_KSYSCALL(ks_clone)
{
	if (ours())
		bump(16, 1);
	return 0;
}

SEC("kretsyscall/clone")
int BPF_KRETPROBE(ks_clone_ret, long ret)
{
	if (ours())
		bump(ret == 0 ? 18 : 17, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
