/* Probes on DL_LIB, a library the target loads later with dlopen. Slots
 * of `counts`: 0 dl_work entries, 1 sum of its argument, 2 returns, 3 sum
 * of the return values, 4 USDT bpfjet_dl:work hits, 5 sum of its
 * argument. */
#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>

/* Set by the kernel loader (first variable of .rodata). */
const volatile __u32 target_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

static __always_inline void bump(__u32 slot, __u64 by)
{
	if (target_tgid && (bpf_get_current_pid_tgid() >> 32) != target_tgid)
		return;
	__u64 *v = bpf_map_lookup_elem(&counts, &slot);
	if (v)
		__sync_fetch_and_add(v, by);
}

SEC("uprobe/" DL_LIB ":dl_work")
int BPF_KPROBE(on_work, int x)
{
	bump(0, 1);
	bump(1, x);
	return 0;
}

SEC("uretprobe/" DL_LIB ":dl_work")
int BPF_KRETPROBE(on_work_return, int ret)
{
	bump(2, 1);
	bump(3, ret);
	return 0;
}

SEC("usdt/" DL_LIB ":bpfjet_dl:work")
int BPF_USDT(on_usdt_work, int x)
{
	bump(4, 1);
	bump(5, x);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
