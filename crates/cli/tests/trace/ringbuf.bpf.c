/* One ring-buffer record per write of the test target to fd 77: the
 * write's byte count and a sequence number. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct sys_enter_ctx {
	__u64 common;
	long id;
	unsigned long args[6];
};

struct event {
	__u64 seq;
	__u64 count;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

__u64 seq;

SEC("tracepoint/syscalls/sys_enter_write")
int on_write(struct sys_enter_ctx *ctx)
{
	if (ctx->args[0] != 77)
		return 0;
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e)
		return 0;
	e->seq = __sync_fetch_and_add(&seq, 1);
	e->count = ctx->args[2];
	bpf_ringbuf_submit(e, 0);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
