/* Shared by bpfjet's runtime test programs: a config array the test sets
 * through STATE.json and a result array both engines' dumps are compared on. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define NVALS 16

struct vals {
	__s64 v[NVALS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct vals);
} cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct vals);
} out SEC(".maps");

static __always_inline struct vals *get(void *map)
{
	__u32 k = 0;
	return bpf_map_lookup_elem(map, &k);
}

char LICENSE[] SEC("license") = "GPL";
