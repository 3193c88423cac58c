/* Frame adjustments: cfg.v[0] = op, v[1], v[2] = offsets. */
#include "common.h"

SEC("xdp")
int adjust(struct xdp_md *ctx)
{
	struct vals *c = get(&cfg), *r = get(&out);
	long ret = -1;

	if (!c || !r)
		return XDP_ABORTED;
	switch (c->v[0]) {
	case 1:
		ret = bpf_xdp_adjust_head(ctx, (int)c->v[1]);
		break;
	case 2:
		ret = bpf_xdp_adjust_tail(ctx, (int)c->v[1]);
		break;
	case 3:
		ret = bpf_xdp_adjust_meta(ctx, (int)c->v[1]);
		break;
	case 4:
		ret = bpf_xdp_adjust_meta(ctx, (int)c->v[1]);
		if (!ret)
			ret = bpf_xdp_adjust_head(ctx, (int)c->v[2]);
		break;
	case 5:
		ret = bpf_xdp_adjust_head(ctx, (int)c->v[1]);
		if (!ret)
			ret = bpf_xdp_adjust_tail(ctx, (int)c->v[2]);
		break;
	}
	r->v[0] = ret;
	r->v[1] = (long)ctx->data_end - (long)ctx->data;
	r->v[2] = (long)ctx->data - (long)ctx->data_meta;
	r->v[3] = bpf_xdp_get_buff_len(ctx);

	void *meta = (void *)(long)ctx->data_meta;
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	if (meta + 4 <= data)
		*(__u32 *)meta = 0xdeadbeef;
	if (data + 1 <= end)
		*(__u8 *)data = 0xee;
	return XDP_PASS;
}
