/* An object whose user space does part of the loading, as libbpf tools'
 * do: bare SEC("uprobe")/SEC("uretprobe") programs the loader attaches
 * (one of them at two functions), globals it sets, a map it sizes and a
 * program it leaves out (`bpfjet trace --attach`, `--global`,
 * `--value-size`, `--no-autoload`). Slots of `counts`: 0 entries times
 * `weight`, 1 entries while `tag` starts with 'x', 2 returns of the
 * uretprobe, 3 stack ids taken (a sized stack map), 4 the kprobe-section
 * program's runs (attached as a uprobe), 5 the sum of `bias` over
 * entries. */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <stdbool.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

const volatile __u64 weight = 1;
const volatile char tag[8] = "none";
const volatile bool count_returns = false;
const volatile int bias = 0;

#include "counts.h"

/* Value size left for the loader (`bpf_map__set_value_size`). */
struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(key_size, sizeof(__u32));
	__uint(max_entries, 64);
} stacks SEC(".maps");

SEC("uprobe")
int BPF_KPROBE(on_entry)
{
	bump(0, weight);
	bump(5, (__u64)(__s64)bias);
	if (tag[0] == 'x')
		bump(1, 1);
	if (bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK) >= 0)
		bump(3, 1);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(on_return)
{
	if (count_returns)
		bump(2, 1);
	return 0;
}

SEC("kprobe/dummy")
int BPF_KPROBE(as_uprobe)
{
	bump(4, 1);
	return 0;
}

/* A tracepoint this architecture has no system call for: the loader
 * leaves it out, as syncsnoop's does on x86-64. */
SEC("tracepoint/syscalls/sys_enter_sync_file_range2")
int elsewhere(void *ctx)
{
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
