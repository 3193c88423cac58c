// An XDP program that drains a USER_RINGBUF (bpf_user_ringbuf_drain) and
// records what its callback saw in an ARRAY, for tests/preload/user_ringbuf.sh
// (the same control plane against the kernel and under `bpfjet exec`).
//
// A sample is { u32 len; u32 tag; u8 payload[len - 8] } (at most 256
// payload bytes). For each sample the callback checks the dynptr: its size
// (a 1-byte read at len - 1 succeeds, at len fails with -E2BIG), that it is
// writable as the kernel's (bpf_dynptr_write succeeds, bpf_dynptr_data gives
// the sample's first byte, and nothing for more bytes than the largest
// sample has), and sums the payload's 8-byte words
// weighted by position. Built with -DCOUNT_ONLY the callback leaves the
// dynptr alone (it counts and records the call number as the tag).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_USER_RINGBUF);
	__uint(max_entries, 4096);
} urb SEC(".maps");

/* ctl[0]: the callback returns 1 on this sample of the drain (1-based, 0:
 * never); ctl[1]: the drain's flags. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} ctl SEC(".maps");

/* rec[0]: the drain's return value; rec[1]: callback calls; rec[2]: sum of
 * word[i] * (i + 1) over the samples' payloads (zero-padded to 8 bytes); rec[3]: samples that failed a
 * check; rec[4]: samples seen in all runs; rec[8 + seen % 56]: tag | len
 * << 16 | failed checks << 32. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} rec SEC(".maps");

#define MAX_PAYLOAD 256

struct cb_ctx {
	__u64 calls;
	__u64 stop_at;
	__u64 sum;
	__u64 bad;
	__u64 checks;
	struct {
		__u32 len;
		__u32 tag;
	} hdr;
};

static __always_inline __u64 *slot(__u32 k)
{
	return bpf_map_lookup_elem(&rec, &k);
}

/* Few values live across the helper calls: the kernel refuses a dynptr
 * pointer spilled to the stack and filled again (a scalar then), so `d`
 * must stay in a callee-saved register; the rest lives in `c`. */
static long on_sample(struct bpf_dynptr *d, void *data)
{
	struct cb_ctx *c = data;
	__u64 *seen, *entry, sum = 0;
#ifndef COUNT_ONLY
	__u64 buf[MAX_PAYLOAD / 8] = {};
	__u32 n;
	__u8 b = 0;
#endif

	c->calls++;
#ifdef COUNT_ONLY
	/* The drain's plumbing alone: the dynptr is not touched. */
	c->checks = 0;
	c->hdr.len = 0;
	c->hdr.tag = c->calls;
#else
	c->checks = 0;
	c->hdr.len = 0;
	c->hdr.tag = 0;
	if (bpf_dynptr_read(&c->hdr, sizeof(c->hdr), d, 0, 0))
		c->checks |= 1;
	if (c->hdr.len < 8 || c->hdr.len > 8 + MAX_PAYLOAD) {
		c->checks |= 1;
		c->hdr.len = 8;
	}
	/* The dynptr covers exactly the sample. */
	if (bpf_dynptr_read(&b, 1, d, c->hdr.len - 1, 0) != 0)
		c->checks |= 2;
	if (bpf_dynptr_read(&b, 1, d, c->hdr.len, 0) != -7 /* -E2BIG */)
		c->checks |= 4;
	/* Not read-only (the kernel's drain makes a plain LOCAL dynptr): a
	 * write of the first byte back in place succeeds, bpf_dynptr_data
	 * gives the sample. */
	b = c->hdr.len & 0xff;
	if (bpf_dynptr_write(d, 0, &b, 1, 0) != 0)
		c->checks |= 8;
	if (bpf_dynptr_data(d, 0, 1) == NULL)
		c->checks |= 16;
	if (bpf_dynptr_data(d, 0, 8 + MAX_PAYLOAD + 1) != NULL)
		c->checks |= 64;
	n = c->hdr.len - 8;
	if (n > MAX_PAYLOAD)
		n = MAX_PAYLOAD;
	if (bpf_dynptr_read(buf, n, d, 8, 0))
		c->checks |= 32;
	/* Bytes past n stay 0. */
	for (__u32 i = 0; i < MAX_PAYLOAD / 8; i++)
		sum += buf[i] * (i + 1);
#endif
	c->sum += sum;
	if (c->checks)
		c->bad++;
	seen = slot(4);
	if (seen) {
		entry = slot(8 + *seen % 56);
		if (entry)
			*entry = (__u64)(c->hdr.tag & 0xffff) | (__u64)c->hdr.len << 16 |
				 c->checks << 32;
		*seen += 1;
	}
	return c->calls == c->stop_at ? 1 : 0;
}

SEC("xdp")
int drain(struct xdp_md *ctx)
{
	struct cb_ctx c = {};
	__u32 k0 = 0, k1 = 1;
	__u64 *stop_at = bpf_map_lookup_elem(&ctl, &k0);
	__u64 *flags = bpf_map_lookup_elem(&ctl, &k1);
	__u64 *out;
	long r;

	if (!stop_at || !flags)
		return XDP_ABORTED;
	c.stop_at = *stop_at;
	r = bpf_user_ringbuf_drain(&urb, on_sample, &c, *flags);
	if ((out = slot(0)))
		*out = r;
	if ((out = slot(1)))
		*out = c.calls;
	if ((out = slot(2)))
		*out = c.sum;
	if ((out = slot(3)))
		*out = c.bad;
	return XDP_PASS;
}
