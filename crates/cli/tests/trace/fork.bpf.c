/* Whose ids a forked child's first system calls carry: glibc's child makes
 * `set_robust_list` before its atfork handlers run, and the child's return
 * from the `clone` is a sys_exit event of the child. `clone_exits`: the
 * clone's result by the pid_tgid that saw it return; `robust`:
 * set_robust_list calls by tgid. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct sys_exit_ctx {
	__u64 common;
	long id;
	long ret;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u64);
	__type(value, __s64);
} clone_exits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} robust SEC(".maps");

SEC("tracepoint/syscalls/sys_exit_clone")
int on_clone_exit(struct sys_exit_ctx *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__s64 ret = ctx->ret;

	bpf_map_update_elem(&clone_exits, &id, &ret, BPF_ANY);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_set_robust_list")
int on_robust(void *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u64 one = 1, *n = bpf_map_lookup_elem(&robust, &tgid);

	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&robust, &tgid, &one, BPF_NOEXIST);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
