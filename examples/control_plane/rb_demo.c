// A libbpf ring-buffer consumer for the `bpfjet exec` tests: the same
// binary runs against the kernel and under `bpfjet exec` and must print the
// same lines. It runs rb_demo.bpf.c's XDP program with
// bpf_prog_test_run_opts, consumes with ring_buffer__poll (epoll), fills
// the ring to overflow, and checks the mmap rules of a ring buffer fd.
//
//   rb_demo OBJ        OBJ: rb_demo.bpf.o
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

static int prog_fd, stats_fd;
static unsigned char pkt[128];

static int on_event(void *ctx, void *data, size_t size)
{
	const unsigned char *b = data;
	size_t i;

	(void)ctx;
	printf("record %zu:", size);
	for (i = 0; i < size; i++)
		printf("%s%02x", i % 8 ? "" : " ", b[i]);
	printf("\n");
	return 0;
}

static int run(int len, int repeat)
{
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt, .data_size_in = len,
		    .repeat = repeat);
	int err = bpf_prog_test_run_opts(prog_fd, &o);

	if (err)
		printf("test run: %s\n", strerror(errno));
	return err ? -1 : (int)o.retval;
}

static void print_stats(const char *when)
{
	static const char *names[] = { "runs", "reserve_failed", "output_failed",
				       "avail_data", "prod_pos", "cons_pos", "ring_size" };
	__u32 k;
	__u64 v;

	printf("stats %s:", when);
	for (k = 0; k < 7; k++) {
		if (bpf_map_lookup_elem(stats_fd, &k, &v))
			v = ~0ULL;
		printf(" %s=%llu", names[k], (unsigned long long)v);
	}
	printf("\n");
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void *late_producer(void *arg)
{
	(void)arg;
	usleep(200 * 1000);
	run(64, 1);
	return NULL;
}

int main(int argc, char **argv)
{
	struct bpf_object *obj;
	struct ring_buffer *rb;
	pthread_t t;
	long page = sysconf(_SC_PAGESIZE);
	int events_fd, n, i, woken;
	double t0, waited;
	void *p;

	if (argc != 2) {
		fprintf(stderr, "usage: %s rb_demo.bpf.o\n", argv[0]);
		return 2;
	}
	for (i = 0; i < (int)sizeof(pkt); i++)
		pkt[i] = i * 7 + 3;
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj || bpf_object__load(obj)) {
		printf("load failed: %s\n", strerror(errno));
		return 1;
	}
	prog_fd = bpf_program__fd(bpf_object__find_program_by_name(obj, "rb_emit"));
	events_fd = bpf_object__find_map_fd_by_name(obj, "events");
	stats_fd = bpf_object__find_map_fd_by_name(obj, "stats");
	rb = ring_buffer__new(events_fd, on_event, NULL, NULL);
	if (!rb) {
		printf("ring_buffer__new: %s\n", strerror(errno));
		return 1;
	}

	/* A few runs, then one poll gets every record in order. */
	printf("retval %d\n", run(64, 1));
	printf("retval %d\n", run(14, 1));
	printf("retval %d\n", run(100, 1));
	n = ring_buffer__poll(rb, 1000);
	printf("poll: %d records\n", n);
	print_stats("after 3 runs");
	n = ring_buffer__poll(rb, 0);
	printf("poll of an empty ring: %d\n", n);

	/* Overflow: 100 runs without consuming; the ring (4 KiB) fills, the
	 * program sees NULL / -EAGAIN and counts them. */
	run(60, 100);
	print_stats("after 100 runs unconsumed");
	n = ring_buffer__consume(rb);
	printf("consume: %d records\n", n);
	print_stats("after consuming");

	/* Blocking: ring_buffer__poll sleeps in epoll_wait until the producer
	 * (another thread, 200 ms later) submits. */
	pthread_create(&t, NULL, late_producer, NULL);
	t0 = now();
	n = ring_buffer__poll(rb, 10000);
	waited = now() - t0;
	pthread_join(t, NULL);
	woken = n > 0 && waited > 0.1 && waited < 5;
	/* How many records one wake-up delivers depends on when the consumer
	 * runs (the kernel defers wake-ups to irq_work, after the program);
	 * the records are the same. */
	n += ring_buffer__consume(rb);
	printf("poll woken by a submit: %s\n", woken ? "after the producer ran" : "at the wrong time");
	printf("records after the wake-up: %d\n", n);

	/* mmap rules of a ring buffer fd. */
	p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, events_fd, page);
	printf("writable producer page: %s\n", p == MAP_FAILED ? strerror(errno) : "mapped");
	p = mmap(NULL, page, PROT_READ, MAP_SHARED, events_fd, 0);
	printf("read-only consumer page: %s\n", p == MAP_FAILED ? strerror(errno) : "mapped");
	if (p != MAP_FAILED) {
		printf("consumer_pos via mmap: %lu\n", *(unsigned long *)p);
		munmap(p, page);
	}
	p = mmap(NULL, 2 * page + 3 * 4096, PROT_READ, MAP_SHARED, events_fd, 0);
	printf("mapping past the double data: %s\n", p == MAP_FAILED ? strerror(errno) : "mapped");

	ring_buffer__free(rb);
	bpf_object__close(obj);
	return 0;
}
