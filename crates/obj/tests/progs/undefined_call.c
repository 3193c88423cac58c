// Calls a function that is neither defined here nor a `__ksym` kfunc.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

extern int not_here(int x);

SEC("xdp")
int caller(struct xdp_md *ctx)
{
	return not_here(ctx->ingress_ifindex);
}

char LICENSE[] SEC("license") = "GPL";
