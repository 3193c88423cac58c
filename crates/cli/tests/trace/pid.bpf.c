/* Probes on PID_TARGET (tests/trace/pid_target.c), attached to the
 * running process by `bpfjet trace --pid`. Slots of `counts`: 0 pid_work
 * entries, 1 sum of its argument, 2 returns, 3 sum of the return values,
 * 4 libc write calls on the target's pipe (fd 100). Every pid_work entry
 * also sends its argument (a u64) through the ring buffer `events`. */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

static __always_inline void bump(__u32 slot, __u64 by)
{
	__u64 *v = bpf_map_lookup_elem(&counts, &slot);
	if (v)
		__sync_fetch_and_add(v, by);
}

SEC("uprobe/" PID_TARGET ":pid_work")
int BPF_KPROBE(on_work, int x)
{
	bump(0, 1);
	bump(1, x);
	bpf_ringbuf_output(&events, &(__u64){ x }, sizeof(__u64), 0);
	return 0;
}

SEC("uretprobe/" PID_TARGET ":pid_work")
int BPF_KRETPROBE(on_work_return, int ret)
{
	bump(2, 1);
	bump(3, ret);
	return 0;
}

SEC("uprobe/libc.so.6:write")
int BPF_KPROBE(on_write, int fd)
{
	if (fd == 100)
		bump(4, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
