// SPDX-License-Identifier: GPL-2.0
/* Tracing programs of every type bpfjet runs, using the tracing helpers;
 * the differential tests verify them (and mutants of their context loads
 * and helper calls) with the kernel and with bpfjet. */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(max_entries, 4);
	__uint(key_size, 4);
	__uint(value_size, 4);
} perf SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 16);
	__uint(key_size, 4);
	__uint(value_size, 8 * 8);
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

struct event {
	__u64 pid_tgid;
	__u64 uid_gid;
	__u64 arg;
	__u64 ip;
	__u64 cookie;
	long read_ret;
	long str_ret;
	char comm[16];
	char buf[16];
};

struct sys_enter_rec {
	__u64 common;
	long id;
	unsigned long args[6];
};

struct sys_exit_rec {
	__u64 common;
	long id;
	long ret;
};

static __always_inline void bump(__u32 key, __u64 by)
{
	__u64 *v = bpf_map_lookup_elem(&counts, &key);
	if (v)
		__sync_fetch_and_add(v, by);
	else
		bpf_map_update_elem(&counts, &key, &by, BPF_ANY);
}

/* Entry probe: arguments from pt_regs, identity, fault-safe reads
 * (BPF_KPROBE: the Debian libbpf headers predate its BPF_UPROBE alias). */
SEC("uprobe/bin:probe_target")
int BPF_KPROBE(on_entry, long a, long b, const char *s)
{
	struct event *e;
	__u32 zero = 0;
	__u64 *hit;

	bump(0, a + b);
	hit = bpf_map_lookup_elem(&hits, &zero);
	if (hit)
		*hit += 1;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e)
		return 0;
	e->pid_tgid = bpf_get_current_pid_tgid();
	e->uid_gid = bpf_get_current_uid_gid();
	e->arg = a;
	e->ip = bpf_get_func_ip(ctx);
	e->cookie = bpf_get_attach_cookie(ctx);
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	e->read_ret = bpf_probe_read_user(e->buf, 8, (void *)b);
	e->str_ret = bpf_probe_read_user_str(e->buf + 8, 8, s);
	bpf_ringbuf_submit(e, 0);
	return (int)(a * 3 + b);
}

/* Return probe: the return value and a user stack. */
SEC("uretprobe/bin:probe_target")
int BPF_KRETPROBE(on_return, long ret)
{
	__u64 frames[4] = {};
	long n = bpf_get_stack(ctx, frames, sizeof(frames), BPF_F_USER_STACK);
	long id = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);

	bump(1, ret);
	bump(2, n > 0 ? n : 0);
	bump(3, id >= 0 ? 1 : 0);
	bpf_perf_event_output(ctx, &perf, BPF_F_CURRENT_CPU, &ret, sizeof(ret));
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_write")
int tp_enter(struct sys_enter_rec *ctx)
{
	__u64 fd = ctx->args[0];
	__u32 nr = (__u32)ctx->id;

	bump(10, nr);
	bump(11, fd);
	bump(12, ctx->args[2]);
	bpf_printk("write fd=%llu", fd);
	return 0;
}

SEC("tp/syscalls/sys_exit_write")
int tp_exit(struct sys_exit_rec *ctx)
{
	long ret = ctx->ret;

	bump(13, ret);
	bpf_perf_event_output(ctx, &perf, BPF_F_CURRENT_CPU, &ret, sizeof(ret));
	return 0;
}

SEC("raw_tracepoint/sys_enter")
int raw_enter(struct bpf_raw_tracepoint_args *ctx)
{
	long id = ctx->args[1];

	bump(20, id);
	bump(21, ctx->args[0] != 0);
	return 0;
}

SEC("raw_tp/sys_exit")
int raw_exit(struct bpf_raw_tracepoint_args *ctx)
{
	bump(22, ctx->args[1]);
	return 0;
}

/* BTF-typed XDP tracepoints: the kernel's structs, relocated by CO-RE. */
struct net_device {
	int ifindex;
	char name[16];
} __attribute__((preserve_access_index));

struct bpf_prog {
	__u32 len;
	__u8 tag[8];
} __attribute__((preserve_access_index));

SEC("tp_btf/xdp_exception")
int BPF_PROG(on_exception, const struct net_device *dev, const struct bpf_prog *xdp, __u32 act)
{
	bump(23, dev->ifindex);
	bump(24, act + dev->name[0] + xdp->len + xdp->tag[7]);
	return 0;
}

SEC("tp_btf/xdp_redirect_err")
int BPF_PROG(on_redirect_err, const struct net_device *dev, const struct bpf_prog *xdp,
	     const void *tgt, int err, int map_type, __u32 map_id, __u32 index)
{
	bump(25, dev->ifindex + err);
	bump(26, (long)tgt + map_type + map_id + index);
	bump(27, bpf_ktime_get_ns() + bpf_get_smp_processor_id());
	return 0;
}
