// Driver of tests/preload/tail_calls.sh: libbpf's tail-call setup, the
// same binary against the kernel and under `bpfjet exec`. Fills the
// PROG_ARRAY `jumps` with program fds, test-runs the entry on packets to
// each slot, reads the slots back (the kernel returns program ids),
// empties one, replaces one, and tries a program of another class.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

static struct bpf_object *obj;

static int prog_fd(const char *name) {
    return bpf_program__fd(bpf_object__find_program_by_name(obj, name));
}

static __u32 prog_id(int fd) {
    struct bpf_prog_info info = {};
    __u32 len = sizeof(info);
    return bpf_obj_get_info_by_fd(fd, &info, &len) ? 0 : info.id;
}

static size_t frame(unsigned char *b, int port) {
    memset(b, 0, 128);
    struct ethhdr *eth = (void *)b;
    eth->h_proto = htons(ETH_P_IP);
    struct iphdr *ip = (void *)(eth + 1);
    ip->version = 4; ip->ihl = 5; ip->ttl = 64; ip->protocol = IPPROTO_UDP;
    struct udphdr *udp = (void *)(ip + 1);
    udp->dest = htons(port);
    return sizeof(*eth) + sizeof(*ip) + sizeof(*udp) + 16;
}

static void verdicts(const char *what) {
    static const int ports[] = { 9999, 7777, 8888 };
    printf("%s:", what);
    for (int i = 0; i < 3; i++) {
        unsigned char pkt[128];
        LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt, .data_size_in = frame(pkt, ports[i]),
                    .repeat = 1);
        if (bpf_prog_test_run_opts(prog_fd("tc_entry"), &o)) printf(" error(%s)", strerror(errno));
        else printf(" %u", o.retval);
    }
    printf("\n");
}

static void slots(void) {
    int fd = bpf_object__find_map_fd_by_name(obj, "jumps");
    printf("slots:");
    for (__u32 k = 0; k < 4; k++) {
        __u32 id = 0;
        if (bpf_map_lookup_elem(fd, &k, &id)) { printf(" %s", strerror(errno)); continue; }
        const char *names[] = { "tc_drop", "tc_tx", "tc_abort" };
        const char *who = "another";
        for (int i = 0; i < 3; i++)
            if (id == prog_id(prog_fd(names[i]))) who = names[i];
        printf(" %s", who);
    }
    printf("\n");
}

static void put(__u32 k, const char *name) {
    int fd = prog_fd(name);
    int err = bpf_map_update_elem(bpf_object__find_map_fd_by_name(obj, "jumps"), &k, &fd, BPF_ANY);
    printf("put %s at %u: %s\n", name, k, err ? strerror(errno) : "ok");
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s tc_progs.o\n", argv[0]); return 2; }
    libbpf_set_print(NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);
    obj = bpf_object__open_file(argv[1], NULL);
    if (!obj || bpf_object__load(obj)) { perror("load"); return 1; }
    int jumps = bpf_object__find_map_fd_by_name(obj, "jumps");
    verdicts("empty");
    put(0, "tc_drop");
    put(1, "tc_tx");
    verdicts("filled");
    slots();
    put(1, "tc_abort");
    verdicts("slot 1 replaced");
    __u32 k = 0;
    printf("delete 0: %s\n", bpf_map_delete_elem(jumps, &k) ? strerror(errno) : "ok");
    printf("delete 0 again: %s\n", bpf_map_delete_elem(jumps, &k) ? strerror(errno) : "ok");
    verdicts("slot 0 emptied");
    slots();
    put(2, "tc_frags");
    int bad = 12345;
    k = 3;
    printf("put a non-fd at 3: %s\n",
           bpf_map_update_elem(jumps, &k, &bad, BPF_ANY) ? strerror(errno) : "ok");
    int hits = bpf_object__find_map_fd_by_name(obj, "hits");
    printf("hits:");
    for (k = 0; k < 4; k++) {
        __u64 v = 0;
        bpf_map_lookup_elem(hits, &k, &v);
        printf(" %llu", (unsigned long long)v);
    }
    printf("\n");
    return 0;
}
