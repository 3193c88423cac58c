// CO-RE against a custom target BTF (--btf / libbpf's btf_custom_path):
// compiled once with -DTARGET -g to make the "kernel" whose layouts differ
// from the program's, and once as the program itself.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

// Not in every libbpf's bpf_core_read.h.
#define field_signed(type, field) \
	__builtin_preserve_field_info(((type *)0)->field, BPF_FIELD_SIGNED)

#ifdef TARGET

struct flags {
	unsigned long long pad;
	unsigned char tag;
	unsigned int a : 3;
	int b : 7;
	unsigned int c : 20;
	unsigned short d : 9;
	unsigned short after;
};

enum mode {
	MODE_OFF = 0,
	MODE_SLOW = 5,
	MODE_FAST = 7,
};

struct header {
	unsigned int magic;
	unsigned short len;
	unsigned char kind;
};

// Referenced so that clang emits their BTF.
struct flags target_flags;
enum mode target_mode;
struct header target_header;

#else

struct flags___local {
	int b : 7;
	unsigned int a : 3;
	unsigned int c : 20;
	unsigned short d : 9;
	unsigned short after;
} __attribute__((preserve_access_index));

enum mode___local {
	MODE_FAST___local = 1,
	MODE_TURBO___local = 2,
};

struct header___local {
	unsigned int magic;
	unsigned short len;
	unsigned int checksum;
} __attribute__((preserve_access_index));

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} results SEC(".maps");

static __always_inline void put(__u32 slot, __u64 value)
{
	bpf_map_update_elem(&results, &slot, &value, 0);
}

SEC("xdp")
int bits(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	// The packet's first 64 bytes are read as the target's struct flags.
	struct flags___local *f = data;

	if (data + 64 > data_end)
		return XDP_ABORTED;
	put(0, BPF_CORE_READ_BITFIELD(f, a));
	put(1, BPF_CORE_READ_BITFIELD(f, b));
	put(2, BPF_CORE_READ_BITFIELD(f, c));
	put(3, BPF_CORE_READ_BITFIELD(f, d));
	put(4, f->after);
	put(5, bpf_core_field_offset(struct flags___local, after));
	put(6, bpf_core_enum_value(enum mode___local, MODE_FAST___local));
	put(7, bpf_core_enum_value_exists(enum mode___local, MODE_TURBO___local));
	put(8, bpf_core_type_size(struct header___local));
	put(9, bpf_core_type_matches(struct header___local));
	put(10, bpf_core_field_exists(struct header___local, checksum));
	put(11, field_signed(struct flags___local, b));
	return (__s64)BPF_CORE_READ_BITFIELD(f, b) < 0 ? XDP_DROP : XDP_PASS;
}

// A field the target lacks, read only where its existence is checked: the
// poisoned load is dead code and the program is accepted.
SEC("xdp")
int guarded(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct header___local *h = data;

	if (data + 16 > data_end)
		return XDP_ABORTED;
	if (bpf_core_field_exists(h->checksum))
		return h->checksum & 3;
	return h->len == 0 ? XDP_DROP : XDP_PASS;
}

#ifdef UNGUARDED
// The same read without the check: the poisoned load is reachable, so the
// program is rejected, naming the relocation.
SEC("xdp")
int unguarded(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct header___local *h = data;

	if (data + 16 > data_end)
		return XDP_ABORTED;
	return h->checksum & 3;
}
#endif

char _license[] SEC("license") = "GPL";

#endif
