// rw-tracer: one event per read(2)/write(2) of the traced process through a
// 256 KiB ring buffer, as in the eBPF-libraries study. The event is sent at
// the system call's exit, with the arguments saved at its entry, so it
// carries the result and the latency.
//
// Built with -DWITH_DATA it is rw-tracer-all: each event also carries up to
// 4 KiB of the bytes read or written (copied from the caller's buffer with
// bpf_probe_read_user at the exit, when a read's data is there).
//
// Built with -DWITH_DATA -DDYNPTR it is rw-tracer-dyn: the same events,
// each record only as long as its data (a dynptr reservation of the event
// plus data_len bytes, written from a per-CPU scratch event), where
// rw-tracer-all reserves 4 KiB of data for every event.
#include "trace.h"

#ifdef WITH_DATA
typedef struct rw_data_event record_t;
#define EVENT(r) (&(r)->ev)
#else
typedef struct rw_event record_t;
#define EVENT(r) (r)
#endif

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u64);
	__type(value, struct rw_args);
} inflight SEC(".maps");

DECLARE_RB_STATS

#ifdef DYNPTR
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, record_t);
} scratch SEC(".maps");

/* The event and its data_len bytes of data, as one record. */
static __always_inline void send(record_t *r)
{
	struct bpf_dynptr dp;
	__u32 n = sizeof(r->ev) + r->ev.data_len;

	if (n > sizeof(*r))
		n = sizeof(*r);
	/* The reservation is a reference even when it fails: discard it. */
	if (bpf_ringbuf_reserve_dynptr(&events, n, 0, &dp)) {
		bpf_ringbuf_discard_dynptr(&dp, 0);
		rb_stat(STAT_DROPPED);
		return;
	}
	bpf_dynptr_write(&dp, 0, r, n, 0);
	bpf_ringbuf_submit_dynptr(&dp, 0);
}
#endif

static __always_inline int enter(struct trace_event_raw_sys_enter *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct rw_args a = {};

	if (!traced())
		return 0;
	a.ts_ns = bpf_ktime_get_ns();
	a.fd = (__s64)BPF_CORE_READ(ctx, args[0]);
	a.buf = BPF_CORE_READ(ctx, args[1]);
	a.count = BPF_CORE_READ(ctx, args[2]);
	bpf_map_update_elem(&inflight, &id, &a, BPF_ANY);
	return 0;
}

static __always_inline int leave(struct trace_event_raw_sys_exit *ctx, __u32 op)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct rw_args *a = bpf_map_lookup_elem(&inflight, &id);
	record_t *r;
	struct rw_event *e;
	__u64 now;
	__s64 ret = BPF_CORE_READ(ctx, ret);

	if (!a)
		return 0;
	rb_stat(STAT_ATTEMPTED);
#ifdef DYNPTR
	__u32 zero = 0;
	r = bpf_map_lookup_elem(&scratch, &zero);
#else
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
#endif
	if (!r) {
		rb_stat(STAT_DROPPED);
		bpf_map_delete_elem(&inflight, &id);
		return 0;
	}
	e = EVENT(r);
	now = bpf_ktime_get_ns();
	e->ts_ns = now;
	e->latency_ns = now - a->ts_ns;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->uid = (__u32)bpf_get_current_uid_gid();
	e->op = op;
	e->fd = a->fd;
	e->buf = a->buf;
	e->count = a->count;
	e->ret = ret;
	e->data_len = 0;
#ifdef WITH_DATA
	if (ret > 0) {
		__u32 len = ret > DATA_MAX ? DATA_MAX : (__u32)ret;

		if (bpf_probe_read_user(r->data, len, (void *)a->buf) == 0)
			e->data_len = len;
	}
#endif
	e->cpu = bpf_get_smp_processor_id();
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	__builtin_memset(e->reserved, 0, sizeof(e->reserved));
#ifdef DYNPTR
	send(r);
#else
	bpf_ringbuf_submit(r, 0);
#endif
	bpf_map_delete_elem(&inflight, &id);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_read")
int rw_enter_read(struct trace_event_raw_sys_enter *ctx) { return enter(ctx); }

SEC("tracepoint/syscalls/sys_enter_write")
int rw_enter_write(struct trace_event_raw_sys_enter *ctx) { return enter(ctx); }

SEC("tracepoint/syscalls/sys_exit_read")
int rw_exit_read(struct trace_event_raw_sys_exit *ctx) { return leave(ctx, RW_READ); }

SEC("tracepoint/syscalls/sys_exit_write")
int rw_exit_write(struct trace_event_raw_sys_exit *ctx) { return leave(ctx, RW_WRITE); }

char LICENSE[] SEC("license") = "GPL";
