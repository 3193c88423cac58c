// SPDX-License-Identifier: GPL-2.0
/* Ring-buffer producer for rb_demo.c: every run of the XDP program writes
 * an event in place (reserve/submit), reserves and discards one, and
 * copies a variable-size record with bpf_ringbuf_output (every other one
 * without wake-up); failures and the ring's bpf_ringbuf_query values go
 * to `stats`. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} events SEC(".maps");

enum {
	ST_RUNS,
	ST_RESERVE_FAILED,
	ST_OUTPUT_FAILED,
	ST_AVAIL_DATA,
	ST_PROD_POS,
	ST_CONS_POS,
	ST_RING_SIZE,
	ST_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ST_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

struct event {
	__u64 run;
	__u32 len;
	__u32 kind;
	__u8 head[16];
};

struct small {
	__u64 run;
	__u8 fill[32];
};

static __always_inline void set(__u32 key, __u64 v)
{
	__u64 *p = bpf_map_lookup_elem(&stats, &key);

	if (p)
		*p = v;
}

static __always_inline void bump(__u32 key)
{
	__u64 *p = bpf_map_lookup_elem(&stats, &key);

	if (p)
		__sync_fetch_and_add(p, 1);
}

SEC("xdp")
int rb_emit(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 key = ST_RUNS;
	__u64 *runs = bpf_map_lookup_elem(&stats, &key);
	struct event *e;
	struct small s;
	__u64 run;
	int i;

	if (!runs)
		return XDP_ABORTED;
	run = __sync_fetch_and_add(runs, 1);

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (e) {
		e->run = run;
		e->len = end - data;
		e->kind = 1;
		if (data + 16 <= end)
			__builtin_memcpy(e->head, data, 16);
		else
			__builtin_memset(e->head, 0, 16);
		bpf_ringbuf_submit(e, 0);
	} else {
		bump(ST_RESERVE_FAILED);
	}

	e = bpf_ringbuf_reserve(&events, 40, 0);
	if (e)
		bpf_ringbuf_discard(e, BPF_RB_NO_WAKEUP);
	else
		bump(ST_RESERVE_FAILED);

	s.run = run;
	for (i = 0; i < 32; i++)
		s.fill[i] = run + i;
	if (bpf_ringbuf_output(&events, &s, 12 + (run & 3) * 8, (run & 1) ? BPF_RB_NO_WAKEUP : 0))
		bump(ST_OUTPUT_FAILED);

	set(ST_AVAIL_DATA, bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA));
	set(ST_PROD_POS, bpf_ringbuf_query(&events, BPF_RB_PROD_POS));
	set(ST_CONS_POS, bpf_ringbuf_query(&events, BPF_RB_CONS_POS));
	set(ST_RING_SIZE, bpf_ringbuf_query(&events, BPF_RB_RING_SIZE));
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
