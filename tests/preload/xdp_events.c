// The control plane of tests/preload/xdp_events.sh: the same binary runs
// against the kernel and under `bpfjet exec`.
//
//   xdp_events OBJ IFNAME MODE [REDIRECT_IFINDEX]
//
// Opens OBJ (tests/preload/xdp_events.bpf.c), writes MODE,
// REDIRECT_IFINDEX and IFNAME into its .rodata (`cfg`: offsets 0, 4 and
// 8; the tracepoint programs count IFNAME's events only), loads it,
// attaches the tp_btf programs (bpf_program__attach) and the XDP program
// `verdict` to IFNAME in generic (skb) mode (bpf_xdp_attach, netlink), and
// prints "ready". At the first line on stdin (or EOF) it prints what the
// tracepoint programs counted, sorted, one line per entry:
//
//   exception ifindex=N act=A prog_type=T count=C
//   redirect tp=xdp_redirect|xdp_redirect_err ifindex=N err=E index=I
//            map_type=T map_id=M tgt=null|set prog_type=P count=C
//   seen mode=M count=C    (frames the XDP program ran on)
//
// then detaches the XDP program and exits 0. Any failure: a message on
// stderr and exit 1.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cfg {
    __u32 mode;
    __u32 redirect_ifindex;
    char ifname[16];
};
struct exception_key {
    __u32 ifindex, act, prog_type;
};
struct redirect_key {
    __u32 ifindex;
    __s32 err;
    __u32 index, err_tp, map_type, map_id, tgt_set, prog_type;
};

static int fail(const char *what, int err)
{
    fprintf(stderr, "xdp_events: %s: %s\n", what, strerror(err < 0 ? -err : err));
    return 1;
}

static int cmp_line(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

// Every entry of a hash map as one formatted line, appended to lines[].
static int dump(int fd, size_t key_size, int (*fmt)(char *, size_t, const void *, __u64),
                char **lines, int *n, int max)
{
    char key[64], next[64];
    void *prev = NULL;
    while (*n < max) {
        int err = bpf_map_get_next_key(fd, prev, next);
        if (err == -ENOENT)
            return 0;
        if (err)
            return fail("map get_next_key", err);
        __u64 count = 0;
        if ((err = bpf_map_lookup_elem(fd, next, &count)))
            return fail("map lookup", err);
        lines[*n] = malloc(256);
        fmt(lines[*n], 256, next, count);
        (*n)++;
        memcpy(key, next, key_size);
        prev = key;
    }
    fprintf(stderr, "xdp_events: more than %d entries\n", max);
    return 1;
}

static int fmt_exception(char *buf, size_t len, const void *key, __u64 count)
{
    const struct exception_key *k = key;
    return snprintf(buf, len, "exception ifindex=%u act=%u prog_type=%u count=%llu",
                    k->ifindex, k->act, k->prog_type, (unsigned long long)count);
}

// The id of the object's DEVMAP: map ids differ between the kernel and
// bpfjet, so a redirect through it prints map_id=tx_ports.
static __u32 tx_ports_id;

static int fmt_redirect(char *buf, size_t len, const void *key, __u64 count)
{
    const struct redirect_key *k = key;
    char map_id[16];
    if (k->map_id == tx_ports_id)
        snprintf(map_id, sizeof(map_id), "tx_ports");
    else
        snprintf(map_id, sizeof(map_id), "%u", k->map_id);
    return snprintf(buf, len,
                    "redirect tp=%s ifindex=%u err=%d index=%u map_type=%u map_id=%s tgt=%s "
                    "prog_type=%u count=%llu",
                    k->err_tp ? "xdp_redirect_err" : "xdp_redirect", k->ifindex, k->err,
                    k->index, k->map_type, map_id, k->tgt_set ? "set" : "null",
                    k->prog_type, (unsigned long long)count);
}

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: %s OBJ IFNAME MODE [REDIRECT_IFINDEX]\n", argv[0]);
        return 2;
    }
    struct cfg cfg = {
        .mode = strtoul(argv[3], NULL, 0),
        .redirect_ifindex = argc == 5 ? strtoul(argv[4], NULL, 0) : 0,
    };
    if (strlen(argv[2]) >= sizeof(cfg.ifname)) {
        fprintf(stderr, "xdp_events: %s: name too long\n", argv[2]);
        return 1;
    }
    strcpy(cfg.ifname, argv[2]);
    unsigned int ifindex = if_nametoindex(argv[2]);
    if (!ifindex)
        return fail(argv[2], errno);

    struct bpf_object *obj = bpf_object__open_file(argv[1], NULL);
    if (!obj)
        return fail(argv[1], errno);
    struct bpf_map *rodata = NULL, *m;
    bpf_object__for_each_map(m, obj) {
        const char *name = bpf_map__name(m);
        size_t l = strlen(name);
        if (l >= 7 && !strcmp(name + l - 7, ".rodata"))
            rodata = m;
    }
    if (!rodata)
        return fail("no .rodata map in the object", ENOENT);
    size_t size = 0;
    bpf_map__initial_value(rodata, &size);
    if (size != sizeof(cfg)) {
        fprintf(stderr, "xdp_events: .rodata is %zu bytes, expected %zu\n", size, sizeof(cfg));
        return 1;
    }
    int err = bpf_map__set_initial_value(rodata, &cfg, sizeof(cfg));
    if (err)
        return fail("set .rodata", err);
    if ((err = bpf_object__load(obj)))
        return fail("load", err);

    const char *tps[] = {"on_exception", "on_redirect", "on_redirect_err"};
    for (int i = 0; i < 3; i++) {
        struct bpf_program *p = bpf_object__find_program_by_name(obj, tps[i]);
        if (!p)
            return fail(tps[i], ENOENT);
        if (!bpf_program__attach(p))
            return fail(tps[i], errno);
    }
    // Mode 4's DEVMAP: element 0 is the redirect target.
    int tx_fd = bpf_object__find_map_fd_by_name(obj, "tx_ports");
    if (tx_fd < 0)
        return fail("find tx_ports", tx_fd);
    struct bpf_map_info tx_info = {};
    __u32 tx_len = sizeof(tx_info);
    if ((err = bpf_obj_get_info_by_fd(tx_fd, &tx_info, &tx_len)))
        return fail("tx_ports info", err);
    tx_ports_id = tx_info.id;
    if (cfg.mode == 4) {
        __u32 zero = 0;
        if ((err = bpf_map_update_elem(tx_fd, &zero, &cfg.redirect_ifindex, BPF_ANY)))
            return fail("tx_ports update", err);
    }
    struct bpf_program *xdp = bpf_object__find_program_by_name(obj, "verdict");
    if (!xdp)
        return fail("verdict", ENOENT);
    if ((err = bpf_xdp_attach(ifindex, bpf_program__fd(xdp), XDP_FLAGS_SKB_MODE, NULL)))
        return fail("bpf_xdp_attach", err);
    printf("ready\n");
    fflush(stdout);

    char line[128];
    if (!fgets(line, sizeof(line), stdin))
        line[0] = 0; // EOF: the same as a line

    enum { MAX = 256 };
    char *lines[MAX];
    int n = 0;
    int exc_fd = bpf_object__find_map_fd_by_name(obj, "exceptions");
    int red_fd = bpf_object__find_map_fd_by_name(obj, "redirects");
    int seen_fd = bpf_object__find_map_fd_by_name(obj, "seen");
    if (exc_fd < 0 || red_fd < 0 || seen_fd < 0)
        return fail("find maps", exc_fd < 0 ? exc_fd : red_fd < 0 ? red_fd : seen_fd);
    if (dump(exc_fd, sizeof(struct exception_key), fmt_exception, lines, &n, MAX) ||
        dump(red_fd, sizeof(struct redirect_key), fmt_redirect, lines, &n, MAX))
        return 1;
    qsort(lines, n, sizeof(lines[0]), cmp_line);
    for (int i = 0; i < n; i++)
        printf("%s\n", lines[i]);
    for (__u32 k = 0; k < 5; k++) {
        __u64 v = 0;
        if ((err = bpf_map_lookup_elem(seen_fd, &k, &v)))
            return fail("seen lookup", err);
        if (v)
            printf("seen mode=%u count=%llu\n", k, (unsigned long long)v);
    }
    fflush(stdout);

    if ((err = bpf_xdp_detach(ifindex, XDP_FLAGS_SKB_MODE, NULL)))
        return fail("bpf_xdp_detach", err);
    bpf_object__close(obj);
    return 0;
}
