// Driver of tests/preload/freplace.sh (libbpf, unmodified API use).
//
//   freplace_run oracle DIR  loads fr_ext.o's ext_as_xdp as an XDP program
//                            and prints its verdicts on the test packets.
//   freplace_run ext DIR     loads fr_target.o, puts fr_ext.o's ext_slot in
//                            place of its global function `slot` (EXT
//                            program, freplace link), prints the target's
//                            verdicts through test runs; then the refusals
//                            (bad signature, static target, busy slot,
//                            load-time target taken) and the verdicts once
//                            the link is gone.
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[512];

static struct bpf_object *open_obj(const char *name) {
    char path[600];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    struct bpf_object *o = bpf_object__open_file(path, NULL);
    if (!o) { fprintf(stderr, "open %s: %s\n", path, strerror(errno)); exit(1); }
    return o;
}

/* An Ethernet/IPv4/UDP frame to `port` (0: an ARP frame). */
static size_t frame(unsigned char *b, int port) {
    memset(b, 0, 128);
    struct ethhdr *eth = (void *)b;
    memset(eth->h_dest, 0xff, ETH_ALEN);
    if (!port) { eth->h_proto = htons(ETH_P_ARP); return 60; }
    eth->h_proto = htons(ETH_P_IP);
    struct iphdr *ip = (void *)(eth + 1);
    ip->version = 4; ip->ihl = 5; ip->ttl = 64; ip->protocol = IPPROTO_UDP;
    ip->tot_len = htons(sizeof(*ip) + sizeof(struct udphdr) + 16);
    struct udphdr *udp = (void *)(ip + 1);
    udp->source = htons(40000); udp->dest = htons(port); udp->len = htons(sizeof(*udp) + 16);
    return sizeof(*eth) + sizeof(*ip) + sizeof(*udp) + 16;
}

static void verdicts(const char *what, int prog_fd) {
    static const int ports[] = { 9999, 7777, 8888, 0 };
    printf("%s:", what);
    for (unsigned i = 0; i < sizeof(ports) / sizeof(ports[0]); i++) {
        unsigned char pkt[128], out[256];
        size_t n = frame(pkt, ports[i]);
        LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt, .data_size_in = n,
                    .data_out = out, .data_size_out = sizeof(out), .repeat = 1);
        int err = bpf_prog_test_run_opts(prog_fd, &o);
        if (err) printf(" error(%s)", strerror(errno));
        else printf(" %u", o.retval);
    }
    printf("\n");
}

static unsigned long long counter(struct bpf_object *o, const char *map) {
    __u32 k = 0; __u64 v = 0;
    if (bpf_map_lookup_elem(bpf_object__find_map_fd_by_name(o, map), &k, &v))
        return (unsigned long long)-1;
    return v;
}

/* Load fr_ext.o with only `prog` (an EXT program for `func` of target_fd):
 * the object, or NULL with errno and the log's first line printed. */
static struct bpf_object *load_ext(const char *prog, int target_fd, const char *func) {
    static char log[65536];
    struct bpf_object *o = open_obj("fr_ext.o");
    struct bpf_program *p;
    bpf_object__for_each_program(p, o)
        bpf_program__set_autoload(p, !strcmp(bpf_program__name(p), prog));
    p = bpf_object__find_program_by_name(o, prog);
    bpf_program__set_attach_target(p, target_fd, func);
    log[0] = 0;
    bpf_program__set_log_buf(p, log, sizeof(log));
    if (bpf_object__load(o)) {
        int e = errno;
        char *nl = strchr(log, '\n');
        if (nl) *nl = 0;
        printf("load %s for %s: %s (%s)\n", prog, func, strerror(e), log);
        bpf_object__close(o);
        errno = e;
        return NULL;
    }
    return o;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: %s oracle|ext DIR\n", argv[0]); return 2; }
    snprintf(dir, sizeof(dir), "%s", argv[2]);
    libbpf_set_print(NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(argv[1], "oracle")) {
        struct bpf_object *o = open_obj("fr_ext.o");
        struct bpf_program *p;
        bpf_object__for_each_program(p, o)
            bpf_program__set_autoload(p, !strcmp(bpf_program__name(p), "ext_as_xdp"));
        if (bpf_object__load(o)) { perror("load ext_as_xdp"); return 1; }
        verdicts("with ext", bpf_program__fd(bpf_object__find_program_by_name(o, "ext_as_xdp")));
        printf("ext calls %llu\n", counter(o, "calls"));
        return 0;
    }
    struct bpf_object *t = open_obj("fr_target.o");
    if (bpf_object__load(t)) { perror("load fr_target"); return 1; }
    int tfd = bpf_program__fd(bpf_object__find_program_by_name(t, "fr_target"));
    verdicts("original", tfd);

    struct bpf_object *e = load_ext("ext_slot", tfd, "slot");
    if (!e) return 1;
    struct bpf_program *ep = bpf_object__find_program_by_name(e, "ext_slot");
    struct bpf_link *link = bpf_program__attach_freplace(ep, tfd, "slot");
    if (!link) { printf("attach_freplace: %s\n", strerror(errno)); return 1; }
    verdicts("with ext", tfd);
    printf("ext calls %llu\n", counter(e, "calls"));
    printf("target drops %llu\n", counter(t, "drops"));
    struct bpf_link_info li = {}; __u32 len = sizeof(li);
    if (!bpf_obj_get_info_by_fd(bpf_link__fd(link), &li, &len)) {
        struct bpf_prog_info pi = {}; __u32 plen = sizeof(pi);
        bpf_obj_get_info_by_fd(tfd, &pi, &plen);
        printf("link: type %u, target is the target program: %s, prog type of ext: ",
               li.type, li.tracing.target_obj_id == pi.id ? "yes" : "no");
        struct bpf_prog_info ei = {}; __u32 elen = sizeof(ei);
        bpf_obj_get_info_by_fd(bpf_program__fd(ep), &ei, &elen);
        printf("%u\n", ei.type);
    }

    /* Refusals, as the kernel words them. */
    load_ext("bad_args", tfd, "slot");
    load_ext("ext_slot", tfd, "helper");
    struct bpf_object *e2 = load_ext("ext_slot", tfd, "slot");
    if (e2) {
        int fd2 = bpf_program__fd(bpf_object__find_program_by_name(e2, "ext_slot"));
        int l2 = bpf_link_create(fd2, tfd, 0, &(struct bpf_link_create_opts){
            .sz = sizeof(struct bpf_link_create_opts),
            .target_btf_id = btf__find_by_name_kind(bpf_object__btf(t), "slot", BTF_KIND_FUNC) });
        printf("second link into slot: %s\n", l2 < 0 ? strerror(errno) : "made");
        bpf_object__close(e2);
    }
    int again = bpf_raw_tracepoint_open(NULL, bpf_program__fd(ep));
    printf("raw_tracepoint_open after the load-time target was taken: %s\n",
           again < 0 ? strerror(errno) : "made");

    printf("detach: %s\n", bpf_link__detach(link) ? strerror(errno) : "ok");
    verdicts("link detached", tfd);
    printf("detach again: %s\n", bpf_link__detach(link) ? strerror(errno) : "ok");
    bpf_link__destroy(link);
    verdicts("link gone", tfd);
    bpf_object__close(e);
    bpf_object__close(t);
    return 0;
}
