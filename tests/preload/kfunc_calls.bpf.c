// SPDX-License-Identifier: Apache-2.0
// Kernel kfuncs as libbpf passes them through bpf(): an open-coded
// iterator (bpf_iter_num_*, vmlinux BTF ids in the calls) summing over the
// packet's length, and bpf_ksym_exists (an ld_imm64 of a BTF id). Built with
// -DMISSING it calls a kernel kfunc bpfjet does not provide
// (bpf_xdp_ct_lookup, netfilter conntrack), which bpfjet must refuse by
// name.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

// Older UAPI headers lack these (the kernel's BTF has them).
struct bpf_iter_num {
	__u64 __opaque[1];
} __attribute__((aligned(8)));

extern int bpf_iter_num_new(struct bpf_iter_num *it, int start, int end) __weak __ksym;
extern int *bpf_iter_num_next(struct bpf_iter_num *it) __weak __ksym;
extern void bpf_iter_num_destroy(struct bpf_iter_num *it) __weak __ksym;
/* Struct kinds are all libbpf compares in a kfunc's prototype. */
struct bpf_ct_opts {
	__s32 netns_id;
};
struct nf_conn {
	__u64 status;
};
extern struct nf_conn *bpf_xdp_ct_lookup(struct xdp_md *ctx, struct bpf_sock_tuple *tuple,
					 __u32 tuple__sz, struct bpf_ct_opts *opts,
					 __u32 opts__sz) __ksym;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} sum SEC(".maps");

SEC("xdp")
int kfunc_calls(struct xdp_md *ctx)
{
	struct bpf_iter_num it;
	__u32 zero = 0;
	__u64 s = 0;
	int *v;
	int n = (ctx->data_end - ctx->data) & 63;

#ifdef MISSING
	if (bpf_xdp_ct_lookup(ctx, 0, 0, 0, 0))
		return XDP_ABORTED;
#endif
	bpf_iter_num_new(&it, 0, n);
	while ((v = bpf_iter_num_next(&it)))
		s += *v * 3 + 1;
	bpf_iter_num_destroy(&it);
	__u64 *p = bpf_map_lookup_elem(&sum, &zero);
	if (p)
		*p += s;
	/* bpf_ksym_exists(), which older libbpf headers lack */
	if (!bpf_iter_num_new)
		return XDP_ABORTED;
	return s & 1 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
