/* A pair on one system call made of kernel probes, as a libbpf tool
 * written for kprobes has it: ksyscall/write records the requested size
 * in a hash map keyed by the thread, kretsyscall/write looks it up,
 * counts the calls that wrote all of it and deletes it. A fusion
 * candidate as a sys_enter_write/sys_exit_write pair is (`sizes` is the
 * hand-off map). Slots: 0 entries to fd 77, 1 exits that found their
 * entry, 2 of those that wrote every byte, 3 the bytes written. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "counts.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} sizes SEC(".maps");

SEC("ksyscall/write")
int BPF_KSYSCALL(size_in, int fd, const void *buf, size_t count)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 n = count;

	if (fd != 77)
		return 0;
	bpf_map_update_elem(&sizes, &tid, &n, BPF_ANY);
	bump(0, 1);
	return 0;
}

SEC("kretsyscall/write")
int BPF_KRETPROBE(size_out, long ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 *n = bpf_map_lookup_elem(&sizes, &tid);

	if (!n)
		return 0;
	bump(1, 1);
	if (ret == (long)*n)
		bump(2, 1);
	if (ret > 0)
		bump(3, ret);
	bpf_map_delete_elem(&sizes, &tid);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
