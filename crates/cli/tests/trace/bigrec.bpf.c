/* One 6,000-byte ring-buffer record per write of the test target to fd
 * 77: more than the object's 4 KiB ring can ever hold, so every
 * reservation fails unless the ring is created larger (`bpfjet trace
 * --ringbuf-size events=BYTES`). counts[0]: reservations that succeeded,
 * counts[1]: reservations that failed. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct sys_enter_ctx {
	__u64 common;
	long id;
	unsigned long args[6];
};

struct big {
	__u64 count;
	__u8 fill[6000 - 8];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_write")
int on_write(struct sys_enter_ctx *ctx)
{
	__u32 key = 1;
	__u64 *n;

	if (ctx->args[0] != 77)
		return 0;
	struct big *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (e) {
		key = 0;
		e->count = ctx->args[2];
		bpf_ringbuf_submit(e, 0);
	}
	n = bpf_map_lookup_elem(&counts, &key);
	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
