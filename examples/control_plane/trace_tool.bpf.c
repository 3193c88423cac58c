// The BPF side of trace_tool.c: a libbpf tracing tool that is run unchanged
// against the kernel and under `bpfjet exec`, its programs then running
// inside `bpfjet trace -- trace_target` (tests/preload/tracer.sh).
//
// - on_begin / on_end (uprobes on target_begin / target_end) open and close
//   a `gate`: the syscall programs record only while it is open, because
//   the dynamic loader's syscalls before main run before bpfjet's agent and
//   only the kernel would see them;
// - on_step / on_step_ret (uprobe / uretprobe on target_step) count calls
//   per argument (`steps`), sum the return values (`ret_sum`) and count
//   hits in a per-CPU array (`hits`);
// - the openat tracepoints report every open through the `events` ring
//   buffer, the exit joined to its enter through `open_paths`;
// - the sys_enter raw tracepoint counts a few syscalls (`sys_counts`).
//
// Every program ignores tasks whose comm is not `targ_comm`: a uprobe with
// pid -1 and the syscall tracepoints fire for the whole system under the
// kernel.
//
// No vmlinux.h: the tracepoint records are declared here from
// /sys/kernel/tracing/events/syscalls/sys_{enter,exit}_openat/format.
//
// Build with -D__TARGET_ARCH_x86 (or _arm64): a BPF target has no host
// architecture of its own, and both the uprobe argument registers and the
// syscall numbers depend on it.
#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
// libbpf's USDT support: argument specs in its maps, found by the cookie.
#include <bpf/usdt.bpf.h>

// libbpf before 1.2 has no BPF_UPROBE / BPF_URETPROBE; for user-space
// probes they are the kprobe macros under another name.
#ifndef BPF_UPROBE
#define BPF_UPROBE(name, args...) BPF_KPROBE(name, ##args)
#endif
#ifndef BPF_URETPROBE
#define BPF_URETPROBE(name, args...) BPF_KRETPROBE(name, ##args)
#endif

#define PATH_LEN 64
#define COMM_LEN 16

enum { EV_ENTER = 1, EV_EXIT = 2 };

// Numbers of the syscalls the target makes deterministically.
#if defined(bpf_target_x86)
enum { NR_READ = 0, NR_WRITE = 1, NR_CLOSE = 3, NR_GETPID = 39, NR_OPENAT = 257 };
#elif defined(bpf_target_arm64)
enum { NR_READ = 63, NR_WRITE = 64, NR_CLOSE = 57, NR_GETPID = 172, NR_OPENAT = 56 };
#else
#error "syscall numbers of this architecture are not listed"
#endif

// trace_event_raw_sys_enter: __syscall_nr is an int at offset 8, padded to
// 8 bytes; the arguments start at 16.
struct sys_enter_rec {
	unsigned long long unused;
	long id;
	unsigned long args[6];
};

// trace_event_raw_sys_exit: the return value is at offset 16.
struct sys_exit_rec {
	unsigned long long unused;
	long id;
	long ret;
};

struct event {
	__u32 kind;
	__s32 ret;
	char path[PATH_LEN];
};

const volatile char targ_comm[COMM_LEN] = {};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} gate SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} steps SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __s64);
} ret_sum SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

// The BPF cookies user space attached on_step (slot 0) and on_step_ret
// (slot 1) with, as the programs read them.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} cookies SEC(".maps");

// One sample per return of target_step, through libbpf's perf buffer: the
// return value, as a u32 (the reader counts them per value).
struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} perf_rets SEC(".maps");

// The USDT probe trace_target:step(i, x): x by i.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} usdt_steps SEC(".maps");

// Hits of the USDT probe trace_target:guarded, which fires only while its
// semaphore is raised.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} guarded SEC(".maps");

static __always_inline void note_cookie(void *ctx, __u32 slot)
{
	__u64 c = bpf_get_attach_cookie(ctx);

	bpf_map_update_elem(&cookies, &slot, &c, BPF_ANY);
}

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

struct path_buf {
	char path[PATH_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, struct path_buf);
} open_paths SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} sys_counts SEC(".maps");

// The comm of the current task equals targ_comm. Compared up to the first
// NUL of targ_comm: bpf_get_current_comm pads with NULs, but an emulation
// need not, and what lies after the terminator does not name the task.
static __always_inline int is_target(void)
{
	char comm[COMM_LEN];

	if (bpf_get_current_comm(comm, sizeof(comm)))
		return 0;
	for (int i = 0; i < COMM_LEN; i++) {
		if (comm[i] != targ_comm[i])
			return 0;
		if (!targ_comm[i])
			break;
	}
	return 1;
}

static __always_inline int gate_open(void)
{
	__u32 zero = 0, *g = bpf_map_lookup_elem(&gate, &zero);

	return g && *g == 1;
}

static __always_inline void set_gate(__u32 v)
{
	__u32 zero = 0;

	bpf_map_update_elem(&gate, &zero, &v, BPF_ANY);
}

// Insert-or-add: the first update may race with another CPU's, so a failed
// BPF_NOEXIST insert falls back to the add.
static __always_inline void count(void *map, __u32 key)
{
	__u64 one = 1, *v = bpf_map_lookup_elem(map, &key);

	if (!v) {
		if (!bpf_map_update_elem(map, &key, &one, BPF_NOEXIST))
			return;
		v = bpf_map_lookup_elem(map, &key);
		if (!v)
			return;
	}
	__sync_fetch_and_add(v, 1);
}

SEC("uprobe")
int BPF_UPROBE(on_begin)
{
	if (is_target())
		set_gate(1);
	return 0;
}

SEC("uprobe")
int BPF_UPROBE(on_end)
{
	if (is_target())
		set_gate(0);
	return 0;
}

SEC("uprobe")
int BPF_UPROBE(on_step, int x)
{
	__u32 zero = 0;
	__u64 *h;

	if (!is_target())
		return 0;
	count(&steps, (__u32)x);
	note_cookie(ctx, 0);
	// Per-CPU: no atomic needed, the slot belongs to this CPU.
	h = bpf_map_lookup_elem(&hits, &zero);
	if (h)
		*h += 1;
	return 0;
}

SEC("usdt")
int BPF_USDT(on_usdt_step, int i, int x)
{
	__u32 key = i;
	__u64 value = x;

	if (!is_target())
		return 0;
	bpf_map_update_elem(&usdt_steps, &key, &value, BPF_ANY);
	return 0;
}

SEC("usdt")
int BPF_USDT(on_usdt_guarded, int i)
{
	__u32 zero = 0;
	__u64 *n;

	if (!is_target())
		return 0;
	n = bpf_map_lookup_elem(&guarded, &zero);
	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}

SEC("uretprobe")
int BPF_URETPROBE(on_step_ret, int ret)
{
	__u32 zero = 0;
	__s64 *sum;

	if (!is_target())
		return 0;
	sum = bpf_map_lookup_elem(&ret_sum, &zero);
	if (sum)
		__sync_fetch_and_add(sum, (__s64)ret);
	note_cookie(ctx, 1);
	bpf_perf_event_output(ctx, &perf_rets, BPF_F_CURRENT_CPU, &ret, sizeof(ret));
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_openat")
int on_openat_enter(struct sys_enter_rec *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct path_buf pb = {};
	struct event *e;

	if (!is_target() || !gate_open())
		return 0;
	bpf_probe_read_user_str(pb.path, sizeof(pb.path), (const void *)ctx->args[1]);
	// Kept for the exit, which has only the return value.
	bpf_map_update_elem(&open_paths, &id, &pb, BPF_ANY);

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e)
		return 0;
	e->kind = EV_ENTER;
	e->ret = 0;
	__builtin_memcpy(e->path, pb.path, sizeof(e->path));
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_openat")
int on_openat_exit(struct sys_exit_rec *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct path_buf *pb;
	struct event *e;

	if (!is_target() || !gate_open())
		return 0;
	pb = bpf_map_lookup_elem(&open_paths, &id);
	if (!pb)
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (e) {
		e->kind = EV_EXIT;
		e->ret = (__s32)ctx->ret;
		__builtin_memcpy(e->path, pb->path, sizeof(e->path));
		bpf_ringbuf_submit(e, 0);
	}
	// After the copy: the value pointer is not to be used once deleted.
	bpf_map_delete_elem(&open_paths, &id);
	return 0;
}

SEC("raw_tracepoint/sys_enter")
int on_sys_enter(struct bpf_raw_tracepoint_args *ctx)
{
	// sys_enter(struct pt_regs *regs, long id)
	long nr = (long)ctx->args[1];

	if (!is_target() || !gate_open())
		return 0;
	// Only calls the target makes itself, a fixed number of times; others
	// (e.g. from libc's buffering or locale code) would vary between libcs.
	switch (nr) {
	case NR_READ:
	case NR_WRITE:
	case NR_CLOSE:
	case NR_GETPID:
	case NR_OPENAT:
		count(&sys_counts, (__u32)nr);
		break;
	}
	return 0;
}

char _license[] SEC("license") = "GPL";
