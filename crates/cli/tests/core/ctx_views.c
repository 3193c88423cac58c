// Views of xdp_md that CO-RE cannot make into the context's 4-byte loads:
// pointer-typed fields (8 bytes locally, a 4-byte integer in the target) and
// a signed 8-byte field. libbpf poisons such loads rather than narrowing
// them (the value would change), so the kernel and bpfjet both reject the
// program, bpfjet naming the relocation. Built with -DVIEW=ptr or -DVIEW=signed.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define CAT(a, b) a##b
#define XCAT(a, b) CAT(a, b)

struct xdp_md___ptr {
	void *data;
	void *data_end;
} __attribute__((preserve_access_index));

struct xdp_md___signed {
	long long data;
	long long data_end;
} __attribute__((preserve_access_index));

SEC("xdp")
int view(struct xdp_md *ctx)
{
	struct XCAT(xdp_md___, VIEW) *m = (void *)ctx;
	void *data = (void *)(long)m->data;
	void *data_end = (void *)(long)m->data_end;

	if (data + 14 > data_end)
		return XDP_DROP;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
