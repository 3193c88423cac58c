// A libbpf skeleton application (issue 12's acceptance): the same binary
// runs against the kernel and under `bpfjet exec` and must print the same
// lines. Built from skel_app.bpf.c with `bpftool gen skeleton`.
//
//   skel_app IFNAME PORT   then commands on stdin, one per line:
//     block IP       add IP to the block list (BPF_NOEXIST), while traffic runs
//     unblock IP     remove it
//     list           the block list, "IP drops" sorted by address
//     wait N         wait (up to 5 s) until the program has watched N datagrams,
//                    reading the skeleton's mmap'd .bss; prints the globals
//     poll N         ring_buffer__poll until N drop events arrived (up to 5 s)
//     quit           destroy the skeleton (the link's fd closes: detach)
// It opens the skeleton, sets `watch_port` in .rodata, loads, attaches the
// XDP program through a bpf_link (bpf_program__attach_xdp) and prints
// "attached port P".
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "skel_app.skel.h"

struct drop_event {
	__u32 saddr;
	__u16 dport;
	__u16 ip_len;
	__u64 nth_drop;
};

static int events_seen;

static int on_drop(void *ctx, void *data, size_t size)
{
	const struct drop_event *e = data;
	char ip[INET_ADDRSTRLEN];

	(void)ctx;
	if (size != sizeof(*e)) {
		printf("event of %zu bytes\n", size);
		return 0;
	}
	inet_ntop(AF_INET, &e->saddr, ip, sizeof(ip));
	printf("drop %s port %u ip_len %u nth %llu\n", ip, e->dport, e->ip_len,
	       (unsigned long long)e->nth_drop);
	events_seen++;
	return 0;
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static int cmp_u32(const void *a, const void *b)
{
	__u32 x = ntohl(*(const __u32 *)a), y = ntohl(*(const __u32 *)b);

	return x < y ? -1 : x > y;
}

static void list(struct skel_app *skel)
{
	__u32 keys[64], key, *prev = NULL;
	int n = 0;

	while (n < 64 && !bpf_map__get_next_key(skel->maps.blocklist, prev, &key,
						sizeof(key))) {
		keys[n] = key;
		prev = &keys[n++];
	}
	qsort(keys, n, sizeof(keys[0]), cmp_u32);
	printf("blocklist %d entries\n", n);
	for (int i = 0; i < n; i++) {
		char ip[INET_ADDRSTRLEN];
		__u64 drops = 0;

		bpf_map__lookup_elem(skel->maps.blocklist, &keys[i], sizeof(keys[i]),
				     &drops, sizeof(drops), 0);
		inet_ntop(AF_INET, &keys[i], ip, sizeof(ip));
		printf("  %s %llu\n", ip, (unsigned long long)drops);
	}
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s IFNAME PORT\n", argv[0]);
		return 2;
	}
	unsigned int ifindex = if_nametoindex(argv[1]);
	struct skel_app *skel = skel_app__open();
	if (!skel) {
		fprintf(stderr, "open: %s\n", strerror(errno));
		return 1;
	}
	skel->rodata->watch_port = atoi(argv[2]);
	if (skel_app__load(skel)) {
		fprintf(stderr, "load: %s\n", strerror(errno));
		return 1;
	}
	skel->links.skel_xdp = bpf_program__attach_xdp(skel->progs.skel_xdp, ifindex);
	if (!skel->links.skel_xdp) {
		fprintf(stderr, "attach: %s\n", strerror(errno));
		return 1;
	}
	struct ring_buffer *rb =
		ring_buffer__new(bpf_map__fd(skel->maps.drops), on_drop, NULL, NULL);
	if (!rb) {
		fprintf(stderr, "ring_buffer__new: %s\n", strerror(errno));
		return 1;
	}
	printf("attached port %u\n", skel->rodata->watch_port);
	fflush(stdout);

	char line[128];
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = 0;
		if (!strncmp(line, "block ", 6) || !strncmp(line, "unblock ", 8)) {
			int block = line[0] == 'b';
			const char *arg = line + (block ? 6 : 8);
			__u32 addr;
			__u64 zero = 0;
			int err;

			if (inet_pton(AF_INET, arg, &addr) != 1) {
				printf("bad address %s\n", arg);
				continue;
			}
			err = block ? bpf_map__update_elem(skel->maps.blocklist, &addr,
							   sizeof(addr), &zero, sizeof(zero),
							   BPF_NOEXIST)
				    : bpf_map__delete_elem(skel->maps.blocklist, &addr,
							   sizeof(addr), 0);
			printf("%s %s %s\n", block ? "block" : "unblock", arg,
			       err ? strerror(-err) : "ok");
		} else if (!strcmp(line, "list")) {
			list(skel);
		} else if (!strncmp(line, "wait ", 5)) {
			unsigned long long want = strtoull(line + 5, NULL, 10);
			double end = now() + 5;

			while (*(volatile __u64 *)&skel->bss->watched < want && now() < end)
				usleep(10000);
			printf("watched %llu blocked_drops %llu\n",
			       (unsigned long long)skel->bss->watched,
			       (unsigned long long)skel->bss->blocked_drops);
		} else if (!strncmp(line, "poll ", 5)) {
			int want = atoi(line + 5);
			double end = now() + 5;

			events_seen = 0;
			while (events_seen < want && now() < end) {
				int err = ring_buffer__poll(rb, 100);

				if (err < 0 && err != -EINTR) {
					printf("poll: %s\n", strerror(-err));
					break;
				}
			}
			printf("polled %d events\n", events_seen);
		} else if (!strcmp(line, "quit")) {
			break;
		} else {
			printf("unknown command %s\n", line);
		}
		fflush(stdout);
	}
	ring_buffer__free(rb);
	skel_app__destroy(skel);
	return 0;
}
