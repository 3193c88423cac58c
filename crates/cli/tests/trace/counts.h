/* The array of u64 counters a trace test program leaves for the test to
 * read (`counts` in the --json report), and the atomic add into a slot. */
#ifndef COUNTS_SLOTS
#define COUNTS_SLOTS 8
#endif

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, COUNTS_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

static __always_inline void bump(__u32 slot, __u64 by)
{
	__u64 *v = bpf_map_lookup_elem(&counts, &slot);
	if (v)
		__sync_fetch_and_add(v, by);
}
