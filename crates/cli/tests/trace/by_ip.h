/* Hits per bpf_get_func_ip (`by_ip` in the --json report, a hash map of
 * u64 address -> u64 count) of a trace test program. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u64);
	__type(value, __u64);
} by_ip SEC(".maps");

static __always_inline void count_ip(struct pt_regs *ctx)
{
	__u64 ip = bpf_get_func_ip(ctx), one = 1;
	__u64 *v = bpf_map_lookup_elem(&by_ip, &ip);
	if (v)
		__sync_fetch_and_add(v, 1);
	else
		bpf_map_update_elem(&by_ip, &ip, &one, BPF_NOEXIST);
}
