// An XDP link control plane for tests/preload/xdp_tools.sh: the same binary
// runs against the kernel and under `bpfjet exec`.
//
//   xdp_link OBJ IFNAME   then commands on stdin, one per line:
//     counts        print "dropped passed" from the object's `verdicts` map
//     update PROG   bpf_link__update_program to program PROG (hot replace)
//     detach        bpf_link__detach
//     info          print the link's type, prog name and ifindex (LINK info)
//     quit          exit (the link's fd closes: the kernel detaches)
// It starts by attaching the object's program `udp_verdicts` through
// bpf_program__attach_xdp (BPF_LINK_CREATE) and prints "attached".
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>

static void counts(int map_fd)
{
    unsigned long long v[2] = {0, 0};
    for (unsigned int k = 0; k < 2; k++)
        if (bpf_map_lookup_elem(map_fd, &k, &v[k]))
            perror("lookup");
    printf("%llu %llu\n", v[0], v[1]);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s OBJ IFNAME\n", argv[0]);
        return 2;
    }
    unsigned int ifindex = if_nametoindex(argv[2]);
    struct bpf_object *obj = bpf_object__open_file(argv[1], NULL);
    if (!obj || bpf_object__load(obj)) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    struct bpf_program *prog = bpf_object__find_program_by_name(obj, "udp_verdicts");
    struct bpf_link *link = prog ? bpf_program__attach_xdp(prog, ifindex) : NULL;
    if (!link) {
        fprintf(stderr, "attach failed: %s\n", strerror(errno));
        return 1;
    }
    int map_fd = bpf_object__find_map_fd_by_name(obj, "verdicts");
    printf("attached\n");
    fflush(stdout);
    char line[128];
    while (fgets(line, sizeof(line), stdin)) {
        line[strcspn(line, "\n")] = 0;
        if (!strcmp(line, "counts")) {
            counts(map_fd);
        } else if (!strncmp(line, "update ", 7)) {
            struct bpf_program *p = bpf_object__find_program_by_name(obj, line + 7);
            int err = p ? bpf_link__update_program(link, p) : -ENOENT;
            printf("update %s\n", err ? strerror(-err) : "ok");
        } else if (!strcmp(line, "detach")) {
            int err = bpf_link__detach(link);
            printf("detach %s\n", err ? strerror(-err) : "ok");
        } else if (!strcmp(line, "info")) {
            struct bpf_link_info info;
            struct bpf_prog_info pinfo;
            unsigned int len = sizeof(info), plen = sizeof(pinfo);
            memset(&info, 0, sizeof(info));
            memset(&pinfo, 0, sizeof(pinfo));
            if (bpf_obj_get_info_by_fd(bpf_link__fd(link), &info, &len)) {
                perror("link info");
                continue;
            }
            int pfd = bpf_prog_get_fd_by_id(info.prog_id);
            if (pfd < 0 || bpf_obj_get_info_by_fd(pfd, &pinfo, &plen))
                perror("prog info");
            printf("link type %u prog %s ifindex-matches %d\n", info.type, pinfo.name,
                   info.xdp.ifindex == ifindex);
        } else if (!strcmp(line, "quit")) {
            break;
        }
        fflush(stdout);
    }
    bpf_link__destroy(link);
    bpf_object__close(obj);
    return 0;
}
