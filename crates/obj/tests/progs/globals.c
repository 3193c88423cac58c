// Global data in .rodata, .data, .bss and a custom .data.* section, read and
// written from a program and a static subprogram.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

const volatile __u32 ro_limit = 1500;
const volatile __u64 ro_table[4] = { 10, 20, 30, 40 };
__u64 data_counter = 7;
__u32 data_second = 9;
__u64 bss_drops;
__u32 bss_pad[3];
__u64 custom_hits SEC(".data.custom") = 0x1122334455667788ULL;
/* static: referenced through the section symbol plus an offset in the insn */
static volatile __u32 hidden_seq = 3;

static __noinline void bump(__u32 idx)
{
	bss_pad[idx & 1] += 1;
	ro_table[3] > 5 ? (void)(data_second += 1) : (void)0;
}

SEC("xdp")
int globals(struct xdp_md *ctx)
{
	__u32 len = ctx->data_end - ctx->data;
	bump(len);
	custom_hits++;
	hidden_seq++;
	if (len > ro_limit) {
		bss_drops++;
		return XDP_DROP;
	}
	data_counter += ro_table[len & 3];
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
