/* read(2)/write(2) pairs on tests/trace/fusion_signal_target.c
 * (tests/trace_fusion_compile.rs). The hand-off map `args` keeps each
 * call's byte count by thread; the exit counts the calls that found their
 * entry by (operation, count) — the target's calls differ by count: 1 the
 * pipe, 16 the signal handler's read, 64 the plain calls, others the
 * helper thread's /proc reads — and the exits that found none. The read
 * pair is the only program of its calls (it compiles into one function);
 * the write has a second enter program (`write_calls`), so its pair does
 * not. `seen` slots: OP * 8 + size class found; 16 + OP: not found;
 * 20 + OP: found and the result equals the count; 24: write entries;
 * 25 + OP: results -EBADF. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u64);
} args SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 32);
	__type(key, __u32);
	__type(value, __u64);
} seen SEC(".maps");

struct sys_enter_ctx {
	__u64 common;
	long id;
	unsigned long args[6];
};

struct sys_exit_ctx {
	__u64 common;
	long id;
	long ret;
};

static __always_inline void add(__u32 k, __u64 v)
{
	__u64 *p = bpf_map_lookup_elem(&seen, &k);
	if (p)
		__sync_fetch_and_add(p, v);
}

static __always_inline int enter(struct sys_enter_ctx *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), count = ctx->args[2];

	bpf_map_update_elem(&args, &id, &count, BPF_ANY);
	return 0;
}

static __always_inline int leave(struct sys_exit_ctx *ctx, __u32 op)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 *count = bpf_map_lookup_elem(&args, &id);
	__u32 class;

	if (!count) {
		add(16 + op, 1);
		return 0;
	}
	class = *count == 1 ? 0 : *count == 16 ? 1 : *count == 64 ? 2 : *count == 7 ? 4 : 3;
	add(op * 8 + class, 1);
	if ((long)*count == ctx->ret)
		add(20 + op, 1);
	if (ctx->ret == -9) /* -EBADF */
		add(25 + op, 1);
	bpf_map_delete_elem(&args, &id);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_read")
int read_enter(struct sys_enter_ctx *ctx) { return enter(ctx); }

SEC("tracepoint/syscalls/sys_exit_read")
int read_exit(struct sys_exit_ctx *ctx) { return leave(ctx, 0); }

SEC("tracepoint/syscalls/sys_enter_write")
int write_enter(struct sys_enter_ctx *ctx) { return enter(ctx); }

SEC("tracepoint/syscalls/sys_enter_write")
int write_calls(struct sys_enter_ctx *ctx)
{
	add(24, 1);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_write")
int write_exit(struct sys_exit_ctx *ctx) { return leave(ctx, 1); }

char LICENSE[] SEC("license") = "GPL";
