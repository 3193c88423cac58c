/* bpf_get_current_task read with BPF_CORE_READ, as libbpf tools read it
 * (execsnoop's parent, mountsnoop's mount namespace). Slots of `counts`,
 * taken at the process's exit_group: 0 the task's tgid, 1 its pid,
 * 2 real_parent->tgid, 3 nsproxy->mnt_ns->ns.inum, 4 cred->uid.val,
 * 5 the result of reading task->start_time (not filled: -EFAULT),
 * 6 1 if comm reads as bpf_get_current_comm's, 7 group_leader->tgid. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "counts.h"

static __always_inline void put(__u32 slot, __u64 v)
{
	bpf_map_update_elem(&counts, &slot, &v, BPF_ANY);
}

SEC("tracepoint/syscalls/sys_enter_exit_group")
int on_exit_group(void *ctx)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u64 start = 0;
	char comm[16] = {}, mine[16] = {};

	put(0, BPF_CORE_READ(task, tgid));
	put(1, BPF_CORE_READ(task, pid));
	put(2, BPF_CORE_READ(task, real_parent, tgid));
	put(3, BPF_CORE_READ(task, nsproxy, mnt_ns, ns.inum));
	put(4, BPF_CORE_READ(task, cred, uid.val));
	put(5, (__u64)(__s64)bpf_core_read(&start, sizeof(start), &task->start_time));
	BPF_CORE_READ_STR_INTO(&comm, task, comm);
	bpf_get_current_comm(&mine, sizeof(mine));
	put(6, __builtin_memcmp(comm, mine, 16) == 0);
	put(7, BPF_CORE_READ(task, group_leader, tgid));
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
