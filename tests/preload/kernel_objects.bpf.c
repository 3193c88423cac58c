/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One object, as projects ship them, with programs for two runtimes under
 * `bpfjet exec`: an XDP program bpfjet runs (counting frames in an ARRAY,
 * a bpfjet map), a tc classifier and a cgroup_skb program the kernel runs,
 * the latter keeping per-socket state in an SK_STORAGE map — a map type
 * bpfjet has no implementation of, created by the kernel with the
 * object's BTF. The tc program counts what it sees in a HASH map of its
 * own and in a global (.bss), with its threshold in .rodata, which the XDP
 * program reads too: bpfjet creates those maps with the others, and moves
 * the tc program's own to the kernel when it loads (the .rodata, which
 * nothing can change, is copied there) (libbpf has mapped the global data by then: the mappings
 * must show the kernel's maps after the move). Built with -DPINNED_MAP, the
 * tc program also sums frame bytes in a map libbpf pins by name when it
 * creates it: the pin must follow the map to the kernel. Built with
 * -DSHARE_BPFJET_MAP, the tc program also
 * reads the XDP program's counter: the kernel cannot reach a bpfjet map
 * that a bpfjet program uses, so that load must be refused with the map's
 * name.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} frames SEC(".maps");

/* drop_long's own: frames seen, by verdict (0 pass, 1 drop). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} tc_verdicts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} sk_bytes SEC(".maps");

/* Both the XDP and the tc program read it: frozen and read-only for
 * programs, the tc program (in the kernel) gets a kernel copy of it. */
const volatile __u32 long_frame = 1000;

SEC("xdp")
int count_frames(struct xdp_md *ctx)
{
	__u32 k = 0;
	__u64 *n = bpf_map_lookup_elem(&frames, &k);
	if (n)
		__sync_fetch_and_add(n, 1);
	return ctx->data_end - ctx->data > long_frame ? XDP_DROP : XDP_PASS;
}

#ifdef PINNED_MAP
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} tc_bytes SEC(".maps");
#endif

__u64 tc_runs;

/* Drops frames longer than long_frame bytes, as the XDP program does. */
SEC("tc")
int drop_long(struct __sk_buff *skb)
{
	tc_runs++;
#ifdef PINNED_MAP
	__u32 zero = 0;
	__u64 *bytes = bpf_map_lookup_elem(&tc_bytes, &zero);
	if (bytes)
		__sync_fetch_and_add(bytes, skb->len);
#endif
#ifdef SHARE_BPFJET_MAP
	__u32 k = 0;
	__u64 *n = bpf_map_lookup_elem(&frames, &k);
	if (n && *n > 1000000)
		return TC_ACT_OK;
#endif
	__u32 verdict = skb->len > long_frame;
	__u64 one = 1, *seen = bpf_map_lookup_elem(&tc_verdicts, &verdict);
	if (seen)
		__sync_fetch_and_add(seen, 1);
	else
		bpf_map_update_elem(&tc_verdicts, &verdict, &one, BPF_NOEXIST);
	return verdict ? TC_ACT_SHOT : TC_ACT_OK;
}

SEC("cgroup_skb/egress")
int sock_bytes(struct __sk_buff *skb)
{
	struct bpf_sock *sk = skb->sk;
	if (!sk)
		return 1;
	sk = bpf_sk_fullsock(sk);
	if (!sk)
		return 1;
	__u64 *b = bpf_sk_storage_get(&sk_bytes, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (b)
		*b += skb->len;
	return 1;
}

char _license[] SEC("license") = "GPL";
