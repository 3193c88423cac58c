/* USDT programs on tests/trace/usdt_target.c and usdt_lib.c (TARGET_EXE,
 * TARGET_LIB given with -D), through libbpf's usdt.bpf.h unchanged
 * (BPF_USDT, bpf_usdt_arg, bpf_usdt_arg_cnt). Slots of `counts`:
 * 0 tick hits, 1..5 sums of tick's five arguments (arg 3 shifted right by
 * 33), 6 frame hits, 7..11 sums of frame's five arguments, 12 guarded hits,
 * 13 thread hits, 14 sum of step's second argument, 15 sum of
 * bpf_usdt_arg_cnt over every hit. Sums of signed arguments wrap as u64. */
#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>

/* Set by the kernel loader (the first variable of .rodata): the kernel's
 * probes fire in every process running the file (0: no filter). */
const volatile __u32 target_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

static __always_inline int mine(void)
{
	return !target_tgid || (bpf_get_current_pid_tgid() >> 32) == target_tgid;
}

static __always_inline void bump(__u32 slot, __u64 by)
{
	__u64 *v = bpf_map_lookup_elem(&counts, &slot);
	if (v)
		__sync_fetch_and_add(v, by);
}

static __always_inline void count_args(struct pt_regs *ctx)
{
	int n = bpf_usdt_arg_cnt(ctx);
	if (n > 0)
		bump(15, n);
}

SEC("usdt/" TARGET_EXE ":bpfjet:tick")
int BPF_USDT(on_tick, int i, unsigned char small, short neg, long big, int five)
{
	if (!mine())
		return 0;
	bump(0, 1);
	bump(1, i);
	bump(2, small);
	bump(3, (long)neg);
	bump(4, big >> 33);
	bump(5, five);
	count_args(ctx);
	return 0;
}

SEC("usdt/" TARGET_EXE ":bpfjet:frame")
int BPF_USDT(on_frame, long a, int b, short c, signed char d, long local)
{
	if (!mine())
		return 0;
	bump(6, 1);
	bump(7, a);
	bump(8, (long)b);
	bump(9, (long)c);
	bump(10, (long)d);
	bump(11, local);
	count_args(ctx);
	return 0;
}

SEC("usdt/" TARGET_EXE ":bpfjet:guarded")
int on_guarded(struct pt_regs *ctx)
{
	long v;

	if (!mine())
		return 0;
	if (bpf_usdt_arg(ctx, 0, &v) == 0)
		bump(12, 1);
	/* Past the last argument: -ENOENT, the value zeroed. */
	if (bpf_usdt_arg(ctx, 1, &v) != -ENOENT || v != 0)
		bump(12, 1000000);
	count_args(ctx);
	return 0;
}

SEC("usdt/" TARGET_EXE ":bpfjet:thread")
int on_thread(struct pt_regs *ctx)
{
	if (!mine())
		return 0;
	bump(13, 1);
	count_args(ctx);
	return 0;
}

SEC("usdt/" TARGET_LIB ":bpfjet_lib:step")
int BPF_USDT(on_step, int x, int x7)
{
	if (!mine())
		return 0;
	bump(14, x7);
	count_args(ctx);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
