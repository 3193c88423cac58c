/* Perf-buffer samples (bpf_perf_event_output, BPF_F_CURRENT_CPU) per write
 * of the test target to fd 77, as bcc's libbpf-tools output them.
 *
 * Default: one 16-byte sample per write (the write's sequence number and
 * byte count), which always fits (2,000 of them take 48,000 bytes of a
 * 64 KiB CPU ring); every tenth write also outputs a record larger than a
 * CPU ring, which is always lost. counts[0]/[1]: small outputs that
 * succeeded/failed, counts[2]/[3]: large outputs that succeeded/failed.
 *
 * The kernel cannot carry such a record (a sample's u16 size wraps and the
 * perf ring's stream is corrupted): -DNO_BIG leaves it out, for the kernel
 * comparison.
 *
 * -DFILL: one 30,000-byte sample per write (sequence number first): two
 * fit a 64 KiB ring, so the ring fills whenever the consumer is not
 * reading and samples are lost. counts[0]/[1]: outputs that
 * succeeded/failed. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct sys_enter_ctx {
	__u64 common;
	long id;
	unsigned long args[6];
};

struct event {
	__u64 seq;
	__u64 count;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

#ifdef FILL
#define BIG 30000
#else
#define BIG (70 * 1024)
#endif
__u8 big[BIG];
__u64 seq;

static void count(__u32 key)
{
	__u64 *n = bpf_map_lookup_elem(&counts, &key);

	if (n)
		__sync_fetch_and_add(n, 1);
}

SEC("tracepoint/syscalls/sys_enter_write")
int on_write(struct sys_enter_ctx *ctx)
{
	if (ctx->args[0] != 77)
		return 0;
	__u64 s = __sync_fetch_and_add(&seq, 1);
#ifdef FILL
	*(__u64 *)big = s;
	count(bpf_perf_event_output(ctx, &events, BPF_F_CURRENT_CPU, big,
				    sizeof(big)) ? 1 : 0);
#else
	struct event e = { .seq = s, .count = ctx->args[2] };

	count(bpf_perf_event_output(ctx, &events, BPF_F_CURRENT_CPU, &e,
				    sizeof(e)) ? 1 : 0);
#ifndef NO_BIG
	if (s % 10 == 9)
		count(bpf_perf_event_output(ctx, &events, BPF_F_CURRENT_CPU,
					    big, sizeof(big)) ? 3 : 2);
#endif
#endif
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
