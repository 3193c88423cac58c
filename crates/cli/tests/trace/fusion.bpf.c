/* Entry/exit pairs on tests/trace/fusion_target.c (TARGET_EXE, given with
 * -D at build time) whose hand-off maps pairwise fusion keeps per thread.
 * Everything reported is deterministic (arguments, return values, helper
 * results, counts), so a fused run must report exactly what an unfused
 * run reports. Slots of `stats`: see the S_* names. `update_rc[OP * 32 +
 * -rc]` counts the results of each pair's hand-off update. */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define ENOENT 2

#define HASH(name, n, key_t)                                                   \
	struct {                                                               \
		__uint(type, BPF_MAP_TYPE_HASH);                               \
		__uint(max_entries, n);                                        \
		__type(key, key_t);                                            \
		__type(value, __u64);                                          \
	} name SEC(".maps")

HASH(work_args, 1024, __u64);
HASH(rec_depth, 64, __u32); /* keyed by the thread id (low half) */
HASH(rec_ne, 64, __u64);
HASH(rec_ex, 64, __u64);
HASH(held, 4, __u64); /* fewer entries than fusion_target's 8 holders */
HASH(jumps, 64, __u64);
HASH(rw_args, 1024, __u64); /* shared by the read and the write pairs */

enum {
	S_WORK_FOUND, S_WORK_MISSED, S_WORK_SUM,
	S_REC_FOUND, S_REC_SUM, S_REC_MISSED, S_REC_DEL_OK, S_REC_DEL_ENOENT,
	S_NE_FOUND, S_NE_SUM, S_NE_MISSED,
	S_EX_FOUND, S_EX_MISSED, S_EX_DEL_ENOENT,
	S_HOLD_FOUND, S_HOLD_SUM, S_HOLD_MISSED,
	S_JUMP_RETURNED,
	S_READ_SAME, S_WRITE_SAME, S_READ_FOUND, S_WRITE_FOUND,
	S_MAX
};

enum { OP_WORK, OP_NOEXIST, OP_EXIST, OP_HOLD, OP_MAX };

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, S_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, OP_MAX * 32);
	__type(key, __u32);
	__type(value, __u64);
} update_rc SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} events SEC(".maps");

struct work_event {
	__u64 arg;
	__u64 ret;
};

static __always_inline void add(__u32 slot, __u64 by)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &slot);

	if (v)
		__sync_fetch_and_add(v, by);
}

static __always_inline void rc(__u32 op, long r)
{
	__u32 slot = op * 32 + ((-r) & 31);
	__u64 *v = bpf_map_lookup_elem(&update_rc, &slot);

	if (v)
		__sync_fetch_and_add(v, 1);
}

SEC("uprobe/" TARGET_EXE ":work")
int BPF_KPROBE(work_entry, long x)
{
	__u64 id = bpf_get_current_pid_tgid(), v = x;

	rc(OP_WORK, bpf_map_update_elem(&work_args, &id, &v, BPF_ANY));
	return 0;
}

SEC("uretprobe/" TARGET_EXE ":work")
int BPF_KRETPROBE(work_exit, long ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 *arg = bpf_map_lookup_elem(&work_args, &id);
	struct work_event *e;

	if (!arg) {
		add(S_WORK_MISSED, 1);
		return 0;
	}
	add(S_WORK_FOUND, 1);
	add(S_WORK_SUM, *arg * 7 + ret);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (e) {
		e->arg = *arg;
		e->ret = ret;
		bpf_ringbuf_submit(e, 0);
	}
	bpf_map_delete_elem(&work_args, &id);
	return 0;
}

/* Recursion, key = the thread id: the inner entry overwrites the outer's
 * value, the inner exit deletes it, the outer exits find nothing. */
SEC("uprobe/" TARGET_EXE ":rec")
int BPF_KPROBE(rec_entry, long depth)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 v = depth;

	bpf_map_update_elem(&rec_depth, &tid, &v, BPF_ANY);
	return 0;
}

SEC("uretprobe/" TARGET_EXE ":rec")
int BPF_KRETPROBE(rec_exit, long ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 *d = bpf_map_lookup_elem(&rec_depth, &tid);
	long r;

	if (d) {
		add(S_REC_FOUND, 1);
		add(S_REC_SUM, *d + 100 * ret);
	} else {
		add(S_REC_MISSED, 1);
	}
	r = bpf_map_delete_elem(&rec_depth, &tid);
	add(r == 0 ? S_REC_DEL_OK : S_REC_DEL_ENOENT, 1);
	return 0;
}

/* BPF_NOEXIST: the inner entries fail with EEXIST, the outer value stays
 * until the innermost exit deletes it. */
SEC("uprobe/" TARGET_EXE ":rec_noexist")
int BPF_KPROBE(ne_entry, long depth)
{
	__u64 id = bpf_get_current_pid_tgid(), v = depth;

	rc(OP_NOEXIST, bpf_map_update_elem(&rec_ne, &id, &v, BPF_NOEXIST));
	return 0;
}

SEC("uretprobe/" TARGET_EXE ":rec_noexist")
int BPF_KRETPROBE(ne_exit, long ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 *d = bpf_map_lookup_elem(&rec_ne, &id);

	if (d) {
		add(S_NE_FOUND, 1);
		add(S_NE_SUM, *d + 100 * ret);
	} else {
		add(S_NE_MISSED, 1);
	}
	bpf_map_delete_elem(&rec_ne, &id);
	return 0;
}

/* BPF_EXIST on an empty slot: ENOENT every time, nothing to find. */
SEC("uprobe/" TARGET_EXE ":rec_exist")
int BPF_KPROBE(ex_entry, long depth)
{
	__u64 id = bpf_get_current_pid_tgid(), v = depth;

	rc(OP_EXIST, bpf_map_update_elem(&rec_ex, &id, &v, BPF_EXIST));
	return 0;
}

SEC("uretprobe/" TARGET_EXE ":rec_exist")
int BPF_KRETPROBE(ex_exit, long ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 *d = bpf_map_lookup_elem(&rec_ex, &id);

	add(d ? S_EX_FOUND : S_EX_MISSED, 1);
	if (bpf_map_delete_elem(&rec_ex, &id) == -ENOENT)
		add(S_EX_DEL_ENOENT, 1);
	return 0;
}

/* Eight threads inside hold() at once, four entries: E2BIG for four. */
SEC("uprobe/" TARGET_EXE ":hold")
int BPF_KPROBE(hold_entry, long x)
{
	__u64 id = bpf_get_current_pid_tgid(), v = x;

	rc(OP_HOLD, bpf_map_update_elem(&held, &id, &v, BPF_ANY));
	return 0;
}

SEC("uretprobe/" TARGET_EXE ":hold")
int BPF_KRETPROBE(hold_exit, long ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 *v = bpf_map_lookup_elem(&held, &id);

	if (v) {
		add(S_HOLD_FOUND, 1);
		add(S_HOLD_SUM, ret - *v);
	} else {
		add(S_HOLD_MISSED, 1);
	}
	bpf_map_delete_elem(&held, &id);
	return 0;
}

/* jump() leaves by longjmp: its entries stay in the map (the report
 * shows one per thread that jumped). */
SEC("uprobe/" TARGET_EXE ":jump")
int BPF_KPROBE(jump_entry, long x)
{
	__u64 id = bpf_get_current_pid_tgid(), v = x;

	bpf_map_update_elem(&jumps, &id, &v, BPF_ANY);
	return 0;
}

SEC("uretprobe/" TARGET_EXE ":jump")
int BPF_KRETPROBE(jump_exit, long ret)
{
	__u64 id = bpf_get_current_pid_tgid();

	if (bpf_map_lookup_elem(&jumps, &id))
		add(S_JUMP_RETURNED, 1);
	bpf_map_delete_elem(&jumps, &id);
	return 0;
}

/* read(2) and write(2): two syscall pairs, one shared hand-off map. */
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

static __always_inline int rw_enter(struct sys_enter_ctx *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), count = ctx->args[2];

	/* read (0) and write (1) on x86-64: always false here; with --fuse
	 * fold the JIT folds ctx->id to the attach point's number. */
	if (ctx->id > 1)
		return 0;
	bpf_map_update_elem(&rw_args, &id, &count, BPF_ANY);
	return 0;
}

static __always_inline int rw_exit(struct sys_exit_ctx *ctx, __u32 same, __u32 found)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 *count = bpf_map_lookup_elem(&rw_args, &id);

	if (!count || ctx->id > 1)
		return 0;
	add(found, 1);
	if ((long)*count == ctx->ret)
		add(same, 1);
	bpf_map_delete_elem(&rw_args, &id);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_read")
int read_enter(struct sys_enter_ctx *ctx) { return rw_enter(ctx); }

SEC("tracepoint/syscalls/sys_enter_write")
int write_enter(struct sys_enter_ctx *ctx) { return rw_enter(ctx); }

SEC("tracepoint/syscalls/sys_exit_read")
int read_exit(struct sys_exit_ctx *ctx) { return rw_exit(ctx, S_READ_SAME, S_READ_FOUND); }

SEC("tracepoint/syscalls/sys_exit_write")
int write_exit(struct sys_exit_ctx *ctx) { return rw_exit(ctx, S_WRITE_SAME, S_WRITE_FOUND); }

char LICENSE[] SEC("license") = "GPL";
