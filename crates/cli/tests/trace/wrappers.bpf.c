/* Every system call of one thread inside a window, by number: how many
 * entered, how many returned and the sum of their raw results
 * (crates/cli/tests/trace_wrappers.rs). The window is opened and closed by
 * the thread's getpriority calls (tests/trace/wrappers_target.c makes no
 * other). Slots of `counts`: [nr] entries, [NR + nr] exits, [2 NR + nr]
 * summed results. Without EXITS only entries are counted (the fast path's
 * return then runs no program). With the kernel, `target_tgid` (set by the
 * loader) keeps other processes out. */
#include <linux/bpf.h>
#include <asm/unistd.h>
#include <bpf/bpf_helpers.h>

#define NR 512

const volatile __u32 target_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 3 * NR);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

/* Slot 0: the window's thread id (0: closed). Slot 1: the number of the
 * call the thread is in (exit has only the result). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} window SEC(".maps");

static __always_inline void bump(__u32 slot, __u64 by)
{
	__u64 *v = bpf_map_lookup_elem(&counts, &slot);
	if (v)
		__sync_fetch_and_add(v, by);
}

static __always_inline __u64 *slot(__u32 k)
{
	return bpf_map_lookup_elem(&window, &k);
}

SEC("raw_tracepoint/sys_enter")
int on_enter(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 nr = ctx->args[1];
	__u64 *open = slot(0), *in = slot(1);
	if (!open || !in)
		return 0;
	if (target_tgid && (id >> 32) != target_tgid)
		return 0;
	if (nr == __NR_getpriority) {
		/* The marker: opens the window on this thread, or closes it. */
		*open = *open ? 0 : (__u32)id;
		*in = nr;
		return 0;
	}
	if (*open != (__u32)id || nr >= NR)
		return 0;
	*in = nr;
	bump(nr, 1);
	return 0;
}

#ifdef EXITS
SEC("raw_tracepoint/sys_exit")
int on_exit(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 *open = slot(0), *in = slot(1);
	if (!open || !in || *open != (__u32)id)
		return 0;
	if (target_tgid && (id >> 32) != target_tgid)
		return 0;
	__u64 nr = *in;
	if (nr == __NR_getpriority || nr >= NR)
		return 0;
	bump(NR + nr, 1);
	bump(2 * NR + nr, ctx->args[1]);
	return 0;
}
#endif

char LICENSE[] SEC("license") = "GPL";
