/* Ring-buffer events: reserve/submit, reserve/discard, output. */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} events SEC(".maps");

SEC("xdp")
int emit(struct xdp_md *ctx)
{
	struct vals *r = get(&out);
	__u64 word = 0x1122334455667788ULL;

	if (!r)
		return XDP_ABORTED;
	__u64 *s = bpf_ringbuf_reserve(&events, 8, 0);
	if (s) {
		*s = ctx->data_end - ctx->data;
		bpf_ringbuf_submit(s, 0);
	}
	__u64 *d = bpf_ringbuf_reserve(&events, 8, 0);
	if (d)
		bpf_ringbuf_discard(d, 0);
	r->v[0] = bpf_ringbuf_output(&events, &word, sizeof(word), 0);
	r->v[1] = bpf_ringbuf_output(&events, &word, sizeof(word), 8);
	r->v[2] = bpf_ringbuf_reserve(&events, 8, 1) == 0;
	r->v[3] = bpf_ringbuf_query(&events, BPF_RB_RING_SIZE);
	r->v[4] = bpf_ringbuf_reserve(&events, 5000, 0) == 0;
	return XDP_PASS;
}
