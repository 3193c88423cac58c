// SPDX-License-Identifier: GPL-2.0
/* A uprobe-style program and a syscalls tracepoint program whose results
 * land in maps, for running on contexts built by the test (interpreter and
 * JIT side by side, many threads at once). */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

struct result {
	__u64 pid_tgid;
	__u64 uid_gid;
	__u64 func_ip;
	__u64 cookie;
	long read_ret;
	long str_ret;
	long kernel_ret;
	long stack_ret;
	__u64 frames[4];
	char comm[16];
	char buf[8];
	char str[8];
	__u64 arg_sum;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct result);
} results SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} syscalls SEC(".maps");

struct sys_enter_rec {
	__u64 common;
	long id;
	unsigned long args[6];
};

SEC("uprobe/bin:target")
int BPF_KPROBE(probe, long a, const char *buf, const char *str, long d, long e)
{
	__u32 zero = 0, tid = (__u32)bpf_get_current_pid_tgid();
	struct result r = {};
	__u64 *hit;

	hit = bpf_map_lookup_elem(&hits, &zero);
	if (hit)
		*hit += 1; /* per-CPU: no atomics, as in the kernel */
	r.pid_tgid = bpf_get_current_pid_tgid();
	r.uid_gid = bpf_get_current_uid_gid();
	r.func_ip = bpf_get_func_ip(ctx);
	r.cookie = bpf_get_attach_cookie(ctx);
	r.read_ret = bpf_probe_read_user(r.buf, sizeof(r.buf), buf);
	r.str_ret = bpf_probe_read_user_str(r.str, sizeof(r.str), str);
	r.kernel_ret = bpf_probe_read_kernel(&r.arg_sum, 8, buf);
	r.stack_ret = bpf_get_stack(ctx, r.frames, sizeof(r.frames), BPF_F_USER_STACK);
	bpf_get_current_comm(r.comm, sizeof(r.comm));
	r.arg_sum = a + d + e + ctx->r9 + PT_REGS_SP(ctx) + PT_REGS_FP(ctx);
	bpf_map_update_elem(&results, &tid, &r, BPF_ANY);
	return (int)(a * 3 + d);
}

SEC("tracepoint/syscalls/sys_enter_write")
int on_write(struct sys_enter_rec *ctx)
{
	__u32 k0 = 0, k1 = 1, k2 = 2;
	__u64 id = ctx->id, fd = ctx->args[0], n = ctx->args[2];

	bpf_map_update_elem(&syscalls, &k0, &id, BPF_ANY);
	bpf_map_update_elem(&syscalls, &k1, &fd, BPF_ANY);
	bpf_map_update_elem(&syscalls, &k2, &n, BPF_ANY);
	return 0;
}
