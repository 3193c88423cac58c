/* uprobes/uretprobes on the test target (TARGET_EXE, TARGET_LIB are the
 * paths, given with -D at build time). Slots of `counts`:
 * 0 work entries, 1 work returns, 2 sum of work's return values,
 * 3 lib_work entries, 4 lib_work returns, 5 rec entries, 6 rec returns,
 * 7 dive entries, 8 dive returns, 9 take_ptr's probe_read_user result,
 * 10 take_ptr entries. */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

/* Set by the kernel loader: kernel uprobes fire in every process running
 * the file; bpfjet's only in the traced one (0: no filter). */
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

SEC("uprobe/" TARGET_EXE ":work")
int BPF_KPROBE(work_entry, int x)
{
	bump(0, 1);
	return 0;
}

SEC("uretprobe/" TARGET_EXE ":work")
int BPF_KRETPROBE(work_return, int ret)
{
	bump(1, 1);
	bump(2, ret);
	return 0;
}

SEC("uprobe/" TARGET_LIB ":lib_work")
int BPF_KPROBE(lib_entry)
{
	bump(3, 1);
	return 0;
}

SEC("uretprobe/" TARGET_LIB ":lib_work")
int BPF_KRETPROBE(lib_return)
{
	bump(4, 1);
	return 0;
}

SEC("uprobe/" TARGET_EXE ":rec")
int BPF_KPROBE(rec_entry)
{
	bump(5, 1);
	return 0;
}

SEC("uretprobe/" TARGET_EXE ":rec")
int BPF_KRETPROBE(rec_return)
{
	bump(6, 1);
	return 0;
}

SEC("uprobe/" TARGET_EXE ":dive")
int BPF_KPROBE(dive_entry)
{
	bump(7, 1);
	return 0;
}

SEC("uretprobe/" TARGET_EXE ":dive")
int BPF_KRETPROBE(dive_return)
{
	bump(8, 1);
	return 0;
}

SEC("uprobe/" TARGET_EXE ":take_ptr")
int BPF_KPROBE(take_ptr_entry, const long *p)
{
	long v = 0;
	long r = bpf_probe_read_user(&v, sizeof(v), p);
	bump(9, (__u64)r);
	bump(10, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
