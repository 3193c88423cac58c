// Driver of tests/preload/devmap_egress.sh: libbpf's setup of programs in
// devmap entries, the same binary against the kernel and under `bpfjet
// exec`. Usage: devmap_egress OBJ IN OUT1 OUT2
//   fills tx_ports = {0: OUT1 + xdp_egress, 1: OUT1 without a program}
//   and ports = {1: IN, 2: OUT1, 3: OUT2, all with xdp_egress}, reads the
//   entries back (the kernel returns program ids), tries the kernel's
//   refusals (a program of another attach type, a map fd, a program
//   without an ifindex, cpumap programs), then attaches xdp_fwd to IN and
//   exits (the attachment stays).
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static struct bpf_object *obj;

static int prog_fd(const char *name) {
    return bpf_program__fd(bpf_object__find_program_by_name(obj, name));
}

static int map_fd(const char *name) {
    return bpf_map__fd(bpf_object__find_map_by_name(obj, name));
}

static __u32 prog_id(int fd) {
    struct bpf_prog_info info = {};
    __u32 len = sizeof(info);
    return bpf_obj_get_info_by_fd(fd, &info, &len) ? 0 : info.id;
}

static void put(const char *what, int map, __u32 key, __u32 first, int fd, __u64 flags) {
    struct bpf_devmap_val v = {.ifindex = first, .bpf_prog.fd = fd};
    int r = bpf_map_update_elem(map, &key, &v, flags);
    printf("%s: %s\n", what, r ? strerror(errno) : "ok");
}

// The entry as the kernel reports it: the ifindex's role and whether the
// program slot holds `want`'s id.
static void get(const char *what, int map, __u32 key, __u32 want_prog) {
    struct bpf_devmap_val v = {};
    if (bpf_map_lookup_elem(map, &key, &v)) {
        printf("%s: %s\n", what, strerror(errno));
        return;
    }
    printf("%s: prog %s\n", what,
           v.bpf_prog.id == want_prog ? "as expected" : v.bpf_prog.id ? "other id" : "none");
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s OBJ IN OUT1 OUT2\n", argv[0]);
        return 2;
    }
    unsigned in = if_nametoindex(argv[2]), out1 = if_nametoindex(argv[3]),
             out2 = if_nametoindex(argv[4]);
    if (!in || !out1 || !out2) {
        fprintf(stderr, "unknown interface\n");
        return 2;
    }
    obj = bpf_object__open_file(argv[1], NULL);
    if (!obj || bpf_object__load(obj)) {
        fprintf(stderr, "load failed\n");
        return 1;
    }
    int egress = prog_fd("xdp_egress"), plain = prog_fd("xdp_plain"), cpu = prog_fd("xdp_cpu");
    int frags = prog_fd("xdp_egress_frags");
    int tx = map_fd("tx_ports"), ports = map_fd("ports"), cpus = map_fd("cpus");
    __u32 egress_id = prog_id(egress);

    put("tx_ports[0] = out1 + egress", tx, 0, out1, egress, BPF_ANY);
    put("tx_ports[1] = out1, fd -1", tx, 1, out1, -1, BPF_ANY);
    put("tx_ports[2] = plain xdp program", tx, 2, out1, plain, BPF_ANY);
    put("tx_ports[2] = cpumap program", tx, 2, out1, cpu, BPF_ANY);
    put("tx_ports[2] = a map fd", tx, 2, out1, tx, BPF_ANY);
    put("tx_ports[2] = frags program, the owner is not", tx, 2, out1, frags, BPF_ANY);
    put("tx_ports[2] = program without ifindex", tx, 2, 0, egress, BPF_ANY);
    put("tx_ports[2] = ifindex 0, fd -1 (a delete)", tx, 2, 0, -1, BPF_ANY);
    put("tx_ports[9] = out of range", tx, 9, out1, plain, BPF_ANY);
    put("tx_ports[2] = BPF_NOEXIST", tx, 2, out1, plain, BPF_NOEXIST);
    put("ports{1} = in + egress", ports, 1, in, egress, BPF_ANY);
    put("ports{2} = out1 + egress", ports, 2, out1, egress, BPF_ANY);
    put("ports{3} = out2 + egress", ports, 3, out2, egress, BPF_ANY);
    put("ports{4} = plain program", ports, 4, out2, plain, BPF_ANY);
    put("ports{4} = ifindex 0", ports, 4, 0, -1, BPF_ANY);
    put("cpus[0] = qsize 64 + cpumap program", cpus, 0, 64, cpu, BPF_ANY);
    put("cpus[1] = devmap program", cpus, 1, 64, egress, BPF_ANY);
    put("cpus[1] = qsize 20000", cpus, 1, 20000, cpu, BPF_ANY);
    get("tx_ports[0]", tx, 0, egress_id);
    get("tx_ports[1]", tx, 1, egress_id);
    get("tx_ports[2]", tx, 2, egress_id);
    get("ports{3}", ports, 3, egress_id);
    get("cpus[0]", cpus, 0, prog_id(cpu));

    // Generic mode: the peers need no XDP program of their own for the
    // kernel to transmit redirected frames through a veth.
    int r = bpf_xdp_attach(in, prog_fd("xdp_fwd"), XDP_FLAGS_SKB_MODE, NULL);
    printf("attach: %s\n", r ? strerror(-r) : "ok");
    return r ? 1 : 0;
}
