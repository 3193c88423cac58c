/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Count-min sketch of flows with NHASH (1..8) hashes: every IPv4 packet
 * increments its flow's NHASH counters; a flow whose estimate exceeds
 * HEAVY packets is dropped (a heavy-hitter filter), the rest pass.
 *
 * Built twice: plain eBPF (runs in the kernel too: NHASH bitwise CRC32C
 * hashes, NHASH counter updates) and with -DUSE_KFUNCS (one fused
 * bpfjet_cm_inc). Both keep the same table layout, so a control plane
 * reads the same counts: row i, column crc32c(key, SEEDS[i]) % WIDTH.
 */
#include "nf.h"
#ifdef USE_KFUNCS
#include "../../include/bpfjet_kfuncs.h"
#endif

#ifndef NHASH
#define NHASH 4
#endif
#define WIDTH 512
#define HEAVY 3

struct sketch {
	__u32 rows[NHASH * WIDTH];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sketch);
} sketch SEC(".maps");

#ifndef USE_KFUNCS
static const __u32 seeds[8] = {0x84222325, 0xcbf29ce4, 0x9e3779b9, 0x7f4a7c15,
			       0x85ebca6b, 0xc2b2ae35, 0x27d4eb2f, 0x165667b1};
#endif

SEC("xdp")
int countmin(struct xdp_md *ctx)
{
	struct flow_key key;
	__u32 zero = 0;
	if (parse_flow(ctx, &key) < 0)
		return XDP_PASS;
	struct sketch *s = bpf_map_lookup_elem(&sketch, &zero);
	if (!s)
		return XDP_ABORTED;
#ifdef USE_KFUNCS
	__u64 est = bpfjet_cm_inc(&key, FLOW_KEY_BYTES, s->rows, sizeof(s->rows), NHASH);
#else
	__u64 est = ~0u;
#pragma unroll
	for (int i = 0; i < NHASH; i++) {
		__u32 col = crc32c_plain((const __u8 *)&key, seeds[i]) % WIDTH;
		__u32 *c = &s->rows[i * WIDTH + col];
		*c += 1;
		if (*c < est)
			est = *c;
	}
#endif
	return est > HEAVY ? XDP_DROP : XDP_PASS;
}

char _license[] SEC("license") = "GPL";
