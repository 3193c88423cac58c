// SPDX-License-Identifier: GPL-2.0
// Flow expiry with one bpf_timer per flow (tests/preload/timer.sh): the
// first packet of a flow adds it with its timer armed for the idle
// timeout, every packet re-arms it, and the callback deletes the idle flow
// and counts it. A second map holds a periodic tick started and stopped by
// command packets.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define CLOCK_MONOTONIC 1
#define IDLE_NS (300 * 1000 * 1000ULL)
#define TICK_NS (20 * 1000 * 1000ULL)

struct flow {
	__u64 packets;
	__u64 bytes;
	struct bpf_timer idle;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct flow);
} flows SEC(".maps");

struct tick {
	__u64 ticks;
	__u64 running;
	struct bpf_timer t;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tick);
} ticker SEC(".maps");

/* [0] flows expired, [1] flows added, [2] errors of the timer helpers. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static void bump(__u32 i)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &i);
	if (c)
		__sync_fetch_and_add(c, 1);
}

static int expire(void *map, __u32 *key, struct flow *f)
{
	bpf_map_delete_elem(map, key);
	bump(0);
	return 0;
}

static int tick(void *map, __u32 *key, struct tick *t)
{
	t->ticks++;
	if (t->running)
		bpf_timer_start(&t->t, TICK_NS, 0);
	return 0;
}

SEC("xdp")
int flow_timers(struct xdp_md *ctx)
{
	__u8 *d = (void *)(long)ctx->data;
	if ((void *)(d + 2) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	__u32 zero = 0;
	if (d[0] == 0xff) {
		/* Ticker command: d[1] = 1 start, 0 stop. */
		struct tick *t = bpf_map_lookup_elem(&ticker, &zero);
		if (!t)
			return XDP_ABORTED;
		if (d[1]) {
			long e = bpf_timer_init(&t->t, &ticker, CLOCK_MONOTONIC);
			if (e && e != -16)
				bump(2);
			if (bpf_timer_set_callback(&t->t, tick))
				bump(2);
			t->running = 1;
			if (bpf_timer_start(&t->t, TICK_NS, 0))
				bump(2);
		} else {
			t->running = 0;
			return bpf_timer_cancel(&t->t) == 1 ? XDP_DROP : XDP_PASS;
		}
		return XDP_PASS;
	}
	__u32 key = d[0];
	struct flow *f = bpf_map_lookup_elem(&flows, &key);
	if (!f) {
		struct flow fresh = {};
		if (bpf_map_update_elem(&flows, &key, &fresh, BPF_NOEXIST))
			return XDP_ABORTED;
		f = bpf_map_lookup_elem(&flows, &key);
		if (!f)
			return XDP_ABORTED;
		if (bpf_timer_init(&f->idle, &flows, CLOCK_MONOTONIC) ||
		    bpf_timer_set_callback(&f->idle, expire))
			bump(2);
		bump(1);
	}
	f->packets++;
	f->bytes += ctx->data_end - ctx->data;
	/* -EINVAL when a control plane's update freed the timer. */
	return bpf_timer_start(&f->idle, IDLE_NS, 0) ? XDP_DROP : XDP_PASS;
}

char _license[] SEC("license") = "GPL";
