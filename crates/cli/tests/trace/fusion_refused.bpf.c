/* Pairs on fusion_target.c's work() whose map must stay a map (built once
 * per CASE with -DCASE=...): a third program reads it (CASE_THIRD), the
 * key is the process, not the thread (CASE_TGID), the exit does not
 * delete (CASE_KEEP), the map is pinned for other loaders (CASE_PINNED).
 * Fused or not, the tool reports the same. */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define CASE_THIRD 1
#define CASE_TGID 2
#define CASE_KEEP 3
#define CASE_PINNED 4

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u64);
#if CASE == CASE_PINNED
	__uint(pinning, LIBBPF_PIN_BY_NAME);
#endif
} work_args SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __always_inline void add(__u32 slot, __u64 by)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &slot);

	if (v)
		__sync_fetch_and_add(v, by);
}

static __always_inline __u64 key(void)
{
#if CASE == CASE_TGID
	return bpf_get_current_pid_tgid() >> 32;
#else
	return bpf_get_current_pid_tgid();
#endif
}

SEC("uprobe/" TARGET_EXE ":work")
int BPF_KPROBE(work_entry, long x)
{
	__u64 id = key(), v = x;

	bpf_map_update_elem(&work_args, &id, &v, BPF_ANY);
	return 0;
}

SEC("uretprobe/" TARGET_EXE ":work")
int BPF_KRETPROBE(work_exit, long ret)
{
	__u64 id = key();
	__u64 *arg = bpf_map_lookup_elem(&work_args, &id);

	if (!arg) {
		add(0, 1);
		return 0;
	}
	add(1, 1);
	add(2, *arg * 7 + ret);
#if CASE != CASE_KEEP
	bpf_map_delete_elem(&work_args, &id);
#endif
	return 0;
}

#if CASE == CASE_THIRD
/* Reads the argument work() was last called with on this thread. */
SEC("uprobe/" TARGET_EXE ":peek")
int BPF_KPROBE(peek_entry, long x)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 *arg = bpf_map_lookup_elem(&work_args, &id);

	add(3, arg ? 1 : 0);
	return 0;
}
#endif

char LICENSE[] SEC("license") = "GPL";
