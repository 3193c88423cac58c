// Control plane of tests/preload/timer.bpf.c (tests/preload/timer.sh):
// drives flows through BPF_PROG_TEST_RUN, deletes and updates flows from
// user space while their timers are armed, and prints what the maps hold
// after the idle timeout. The same binary runs against the kernel and
// under `bpfjet exec`; timing-dependent figures are printed as ranges.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct flow {
	unsigned long long packets, bytes, idle[2];
};

struct tick {
	unsigned long long ticks, running, t[2];
};

static int prog_fd;

static int send(unsigned char a, unsigned char b, int len)
{
	unsigned char pkt[128] = {0};
	pkt[0] = a;
	pkt[1] = b;
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt, .data_size_in = len, .repeat = 1);
	if (bpf_prog_test_run_opts(prog_fd, &o)) {
		printf("test run: %s\n", strerror(errno));
		exit(1);
	}
	return o.retval;
}

static void ms(int n)
{
	usleep(n * 1000);
}

/* The flows in key order (hash iteration orders differ). */
static void show_flows(int fd, const char *when)
{
	unsigned int key, next, *prev = NULL, keys[64];
	int n = 0;
	while (n < 64 && !bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		keys[n++] = key;
	}
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && keys[j - 1] > keys[j]; j--) {
			unsigned int t = keys[j];
			keys[j] = keys[j - 1];
			keys[j - 1] = t;
		}
	printf("%s:", when);
	for (int i = 0; i < n; i++) {
		struct flow f;
		if (bpf_map_lookup_elem(fd, &keys[i], &f))
			continue;
		printf(" [%u: %llu pkts %llu bytes timer %llx%llx]", keys[i], f.packets, f.bytes,
		       f.idle[0], f.idle[1]);
	}
	printf(" (%d flows)\n", n);
}

static unsigned long long counter(int fd, unsigned int i)
{
	unsigned long long v = 0;
	bpf_map_lookup_elem(fd, &i, &v);
	return v;
}

int main(int argc, char **argv)
{
	struct bpf_object *obj = bpf_object__open_file(argv[1], NULL);
	if (!obj || bpf_object__load(obj)) {
		printf("load failed\n");
		return 1;
	}
	prog_fd = bpf_program__fd(bpf_object__find_program_by_name(obj, "flow_timers"));
	int flows = bpf_object__find_map_fd_by_name(obj, "flows");
	int counters = bpf_object__find_map_fd_by_name(obj, "counters");
	int ticker = bpf_object__find_map_fd_by_name(obj, "ticker");

	/* Flows 1..4, a few packets each, all within the idle timeout. */
	for (int round = 0; round < 3; round++)
		for (unsigned char k = 1; k <= 4; k++)
			send(k, 0, 60 + k);
	show_flows(flows, "after 12 packets");

	/* User space deletes flow 2 (its timer dies with it) and rewrites
	 * flow 3 (the update frees its timer: the program's next start of it
	 * says -EINVAL, and it never expires). */
	unsigned int k2 = 2, k3 = 3;
	struct flow repl = {.packets = 100, .bytes = 1000, .idle = {0x1234, 0x5678}};
	printf("delete 2: %d\n", bpf_map_delete_elem(flows, &k2));
	printf("update 3: %d\n", bpf_map_update_elem(flows, &k3, &repl, BPF_EXIST));
	printf("packet on flow 3 after the update: %d (XDP_DROP = 1: start says -EINVAL)\n",
	       send(3, 0, 64));
	show_flows(flows, "after the user-space changes");

	/* Flow 4 keeps getting packets for 600 ms; flow 1 goes idle. The
	 * idle timeout (300 ms) leaves room for a loaded machine's stalls. */
	for (int i = 0; i < 6; i++) {
		send(4, 0, 70);
		ms(100);
	}
	ms(700);
	show_flows(flows, "after the idle timeout");
	printf("expired %llu, added %llu, helper errors %llu\n", counter(counters, 0),
	       counter(counters, 1), counter(counters, 2));

	/* A flow added again after its expiry starts a new timer. */
	send(1, 0, 61);
	ms(700);
	show_flows(flows, "flow 1 again, idle again");
	printf("expired %llu, added %llu\n", counter(counters, 0), counter(counters, 1));

	/* The ticker: 20 ms period for ~200 ms, then stopped. */
	send(0xff, 1, 64);
	ms(200);
	printf("stop the ticker: %s\n", send(0xff, 0, 64) == 1 ? "it was armed" : "it was idle");
	unsigned int z = 0;
	struct tick t;
	bpf_map_lookup_elem(ticker, &z, &t);
	unsigned long long at_stop = t.ticks;
	printf("ticks while running: %s\n", at_stop >= 3 && at_stop <= 11 ? "3..11" : "out of range");
	ms(100);
	bpf_map_lookup_elem(ticker, &z, &t);
	printf("ticks after the stop: %s, timer bytes %llx%llx\n",
	       t.ticks == at_stop ? "none" : "some", t.t[0], t.t[1]);
	printf("second stop: %s\n", send(0xff, 0, 64) == 1 ? "it was armed" : "it was idle");
	bpf_object__close(obj);
	return 0;
}
