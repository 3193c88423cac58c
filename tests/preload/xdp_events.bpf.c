// The XDP tracepoints as tp_btf programs see them, for
// tests/preload/xdp_events.sh: one XDP program whose verdict the loader
// chooses (cfg.mode, set in .rodata before load) and three BTF-typed
// tracepoint programs counting the events a data plane fires for it:
//
//   mode 0: XDP_ABORTED                      -> xdp_exception(act 0)
//   mode 1: 7, an action past XDP_REDIRECT   -> xdp_exception(act 7), as the kernel
//   mode 2: bpf_redirect(cfg.redirect_ifindex, 0) -> xdp_redirect / _err
//   mode 3: XDP_PASS                         -> nothing
//   mode 4: bpf_redirect_map(&tx_ports, 0, 0), tx_ports[0] = the target
//           (DEVMAP)                         -> xdp_redirect (map type, id, key)
//
// The kernel's structs are declared with the fields read here
// (preserve_access_index): libbpf relocates the offsets against the
// running kernel's BTF, as it would with vmlinux.h.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

struct net_device {
    char name[16];
    int ifindex;
} __attribute__((preserve_access_index));

struct bpf_prog {
    enum bpf_prog_type type;
} __attribute__((preserve_access_index));

// The loader writes the whole struct: mode at offset 0, the redirect
// target at offset 4, the name of the device the XDP program is attached
// to at offset 8.
const volatile struct {
    __u32 mode;
    __u32 redirect_ifindex;
    char ifname[16];
} cfg SEC(".rodata") = {};

// Mode 4's target: element 0 is cfg.redirect_ifindex (the loader sets it).
struct {
    __uint(type, BPF_MAP_TYPE_DEVMAP);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u32);
} tx_ports SEC(".maps");

// Frames the XDP program ran on, by mode.
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 5);
    __type(key, __u32);
    __type(value, __u64);
} seen SEC(".maps");

struct exception_key {
    __u32 ifindex;
    __u32 act;
    __u32 prog_type; // of the XDP program the event names
};

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 64);
    __type(key, struct exception_key);
    __type(value, __u64);
} exceptions SEC(".maps");

struct redirect_key {
    __u32 ifindex;
    __s32 err;
    __u32 index;
    __u32 err_tp; // 0: xdp_redirect, 1: xdp_redirect_err
    __u32 map_type;
    __u32 map_id;
    __u32 tgt_set; // tgt != NULL
    __u32 prog_type;
};

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 64);
    __type(key, struct redirect_key);
    __type(value, __u64);
} redirects SEC(".maps");

static __always_inline void bump(void *map, const void *key)
{
    __u64 one = 1, *c = bpf_map_lookup_elem(map, key);
    if (c)
        __sync_fetch_and_add(c, 1);
    else
        bpf_map_update_elem(map, key, &one, BPF_NOEXIST);
}

// The tracepoints are the whole machine's: events of other devices (other
// namespaces, other tests' programs) are left out by the device's name.
static __always_inline int ours(const struct net_device *dev)
{
    for (int i = 0; i < 16; i++) {
        char c = dev->name[i];
        if (c != cfg.ifname[i])
            return 0;
        if (!c)
            break;
    }
    return 1;
}

SEC("xdp")
int verdict(struct xdp_md *ctx)
{
    __u32 mode = cfg.mode;
    __u64 *c = bpf_map_lookup_elem(&seen, &mode);
    if (c)
        __sync_fetch_and_add(c, 1);
    switch (mode) {
    case 0:
        return XDP_ABORTED;
    case 1:
        return 7;
    case 2:
        return bpf_redirect(cfg.redirect_ifindex, 0);
    case 4:
        return bpf_redirect_map(&tx_ports, 0, 0);
    default:
        return XDP_PASS;
    }
}

SEC("tp_btf/xdp_exception")
int BPF_PROG(on_exception, const struct net_device *dev, const struct bpf_prog *xdp, __u32 act)
{
    if (!ours(dev))
        return 0;
    struct exception_key k = {
        .ifindex = dev->ifindex,
        .act = act,
        .prog_type = xdp->type,
    };
    bump(&exceptions, &k);
    return 0;
}

static __always_inline void redirect_event(const struct net_device *dev, const struct bpf_prog *xdp,
                                          const void *tgt, int err, int map_type, __u32 map_id,
                                          __u32 index, __u32 err_tp)
{
    if (!ours(dev))
        return;
    struct redirect_key k = {
        .ifindex = dev->ifindex,
        .err = err,
        .index = index,
        .err_tp = err_tp,
        .map_type = map_type,
        .map_id = map_id,
        .tgt_set = tgt != 0,
        .prog_type = xdp->type,
    };
    bump(&redirects, &k);
}

SEC("tp_btf/xdp_redirect")
int BPF_PROG(on_redirect, const struct net_device *dev, const struct bpf_prog *xdp,
             const void *tgt, int err, int map_type, __u32 map_id, __u32 index)
{
    redirect_event(dev, xdp, tgt, err, map_type, map_id, index, 0);
    return 0;
}

SEC("tp_btf/xdp_redirect_err")
int BPF_PROG(on_redirect_err, const struct net_device *dev, const struct bpf_prog *xdp,
             const void *tgt, int err, int map_type, __u32 map_id, __u32 index)
{
    redirect_event(dev, xdp, tgt, err, map_type, map_id, index, 1);
    return 0;
}

char _license[] SEC("license") = "GPL";
