// libxdp's own C API for tests/preload/xdp_multiprog.sh, unmodified use:
// opens the objects given, prints how libxdp reads them ("object: prio
// name actions"), attaches them together (xdp_program__attach_multi, skb
// mode), reads the interface back (xdp_multiprog__get_from_ifindex) and
// prints the dispatcher and its programs ("running: ..."); then waits for a
// line on stdin (traffic runs meanwhile), prints the programs' counters
// ("seen: ...", "dropped: ...") and detaches (xdp_multiprog__detach).
#include <xdp/libxdp.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <linux/bpf.h>

static void describe(const char *what, struct xdp_program *p) {
    static const char *names[] = { "XDP_ABORTED", "XDP_DROP", "XDP_PASS", "XDP_TX", "XDP_REDIRECT" };
    printf("%s: %u %s", what, xdp_program__run_prio(p), xdp_program__name(p));
    const char *sep = " ";
    for (int a = 0; a < 5; a++)
        if (xdp_program__chain_call_enabled(p, a)) { printf("%s%s", sep, names[a]); sep = ","; }
    printf("\n");
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: %s IFACE OBJ...\n", argv[0]); return 2; }
    setvbuf(stdout, NULL, _IOLBF, 0);
    int ifindex = if_nametoindex(argv[1]);
    struct xdp_program *progs[8];
    int n = 0;
    for (int i = 2; i < argc && n < 8; i++) {
        progs[n] = xdp_program__open_file(argv[i], NULL, NULL);
        if (libxdp_get_error(progs[n])) { printf("open %s failed\n", argv[i]); return 1; }
        describe("object", progs[n]);
        n++;
    }
    int err = xdp_program__attach_multi(progs, n, ifindex, XDP_MODE_SKB, 0);
    if (err) { printf("attach_multi: %s\n", strerror(-err)); return 1; }
    struct xdp_multiprog *mp = xdp_multiprog__get_from_ifindex(ifindex);
    if (libxdp_get_error(mp)) { printf("get_from_ifindex failed\n"); return 1; }
    printf("dispatcher: %s, legacy %d, mode %s\n",
           xdp_program__name(xdp_multiprog__main_prog(mp)), xdp_multiprog__is_legacy(mp),
           xdp_multiprog__attach_mode(mp) == XDP_MODE_SKB ? "skb" : "other");
    for (struct xdp_program *p = xdp_multiprog__next_prog(NULL, mp); p;
         p = xdp_multiprog__next_prog(p, mp))
        describe("running", p);
    char line[64];
    if (!fgets(line, sizeof(line), stdin)) return 1;
    /* The programs' array maps, through libxdp's bpf_objects. */
    for (int i = 0; i < n; i++) {
        struct bpf_object *o = xdp_program__bpf_obj(progs[i]);
        struct bpf_map *m;
        bpf_object__for_each_map(m, o) {
            if (bpf_map__type(m) != BPF_MAP_TYPE_ARRAY || bpf_map__value_size(m) != 8)
                continue;
            printf("%s:", bpf_map__name(m));
            for (__u32 k = 0; k < bpf_map__max_entries(m); k++) {
                __u64 v = 0;
                bpf_map_lookup_elem(bpf_map__fd(m), &k, &v);
                printf(" %llu", (unsigned long long)v);
            }
            printf("\n");
        }
    }
    err = xdp_multiprog__detach(mp);
    printf("detach: %s\n", err ? strerror(-err) : "ok");
    xdp_multiprog__close(mp);
    return 0;
}
