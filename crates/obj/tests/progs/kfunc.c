// kfunc externs (`__ksym`) called from a program and from a subprogram.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

extern int bpf_foo(struct xdp_md *ctx, __u32 x) __ksym;
extern __u64 bpf_bar(void) __ksym __weak;

static __noinline int helper_user(struct xdp_md *ctx)
{
	return bpf_foo(ctx, 2) + (int)bpf_bar();
}

SEC("xdp")
int kfuncs(struct xdp_md *ctx)
{
	return bpf_foo(ctx, 1) + helper_user(ctx) > 0 ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
