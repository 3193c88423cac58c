// A libbpf user ring buffer producer for tests/preload/user_ringbuf.sh: the
// same binary runs against the kernel and under `bpfjet exec` and must print
// the same lines. It pushes samples with user_ring_buffer__reserve/submit/
// discard, has user_ringbuf.bpf.c's XDP program drain them
// (BPF_PROG_TEST_RUN), and prints what the program recorded; then a
// blocking producer on a full ring is freed by a drain from another
// thread, and the kernel's rules for creating, mapping and polling a
// USER_RINGBUF are checked.
//
//   user_ringbuf OBJ        OBJ: user_ringbuf.bpf.o
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#define RING 4096

static int prog_fd, ctl_fd, rec_fd, urb_fd;
static struct user_ring_buffer *rb;
static unsigned int next_tag = 1;

static const char *err_name(int e)
{
	switch (e) {
	case 0: return "0";
	case EINVAL: return "EINVAL";
	case EPERM: return "EPERM";
	case E2BIG: return "E2BIG";
	case ENOSPC: return "ENOSPC";
	case ENODATA: return "ENODATA";
	case EBUSY: return "EBUSY";
	case 524: return "ENOTSUPP";
	default: return strerror(e);
	}
}

static void set_ctl(__u64 stop_at, __u64 flags)
{
	__u32 k0 = 0, k1 = 1;

	bpf_map_update_elem(ctl_fd, &k0, &stop_at, BPF_ANY);
	bpf_map_update_elem(ctl_fd, &k1, &flags, BPF_ANY);
}

static __u64 rec(__u32 k)
{
	__u64 v = ~0ULL;

	bpf_map_lookup_elem(rec_fd, &k, &v);
	return v;
}

/* One drain through BPF_PROG_TEST_RUN; prints the drain's result and what
 * the callback saw to `out`. */
static long drain_to(FILE *out, const char *what, __u64 stop_at, __u64 flags)
{
	unsigned char pkt[64] = { 0 };
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt, .data_size_in = sizeof(pkt));
	__u64 seen_before = rec(4), seen, i;
	long r;

	set_ctl(stop_at, flags);
	if (bpf_prog_test_run_opts(prog_fd, &o)) {
		fprintf(out, "%s: test run failed: %s\n", what, err_name(errno));
		return -1;
	}
	r = (long)rec(0);
	seen = rec(4);
	fprintf(out, "%s: retval=%u drain=%ld calls=%llu sum=%llu bad=%llu samples:", what,
	       o.retval, r, (unsigned long long)rec(1), (unsigned long long)rec(2),
	       (unsigned long long)rec(3));
	for (i = seen - seen_before > 56 ? seen - 56 : seen_before; i < seen; i++) {
		__u64 e = rec(8 + i % 56);

		fprintf(out, " %llu/%llu", (unsigned long long)(e & 0xffff),
			(unsigned long long)((e >> 16) & 0xffff));
		if (e >> 32)
			fprintf(out, "!%llx", (unsigned long long)(e >> 32));
	}
	fprintf(out, "\n");
	return r;
}

static long drain(const char *what, __u64 stop_at, __u64 flags)
{
	return drain_to(stdout, what, stop_at, flags);
}

/* A sample of `payload` bytes: { len, tag, bytes }; discarded or
 * submitted. Returns 0, or the errno of the reservation. */
static int push(unsigned int payload, int discard)
{
	unsigned int len = 8 + payload, i;
	unsigned char *s = user_ring_buffer__reserve(rb, len);

	if (!s)
		return errno;
	memcpy(s, &len, 4);
	memcpy(s + 4, &next_tag, 4);
	for (i = 0; i < payload; i++)
		s[8 + i] = (unsigned char)(next_tag * 7 + i);
	next_tag++;
	if (discard)
		user_ring_buffer__discard(rb, s);
	else
		user_ring_buffer__submit(rb, s);
	return 0;
}

static int fill(unsigned int payload)
{
	int n = 0;

	while (push(payload, 0) == 0)
		n++;
	return n;
}

/* The drain of the other thread, printed by the main thread once joined
 * (the woken producer may print first). */
static char *later_out;
static size_t later_len;

static void *drain_later(void *arg)
{
	FILE *out = open_memstream(&later_out, &later_len);

	(void)arg;
	usleep(200 * 1000);
	drain_to(out, "drain from another thread", 2, 0);
	fclose(out);
	return NULL;
}

static double ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1e3 + (t.tv_nsec - t0->tv_nsec) / 1e6;
}

static int epoll_out(int ep)
{
	struct epoll_event ev;
	int n = epoll_wait(ep, &ev, 1, 0);

	return n > 0 ? (int)(ev.events & EPOLLOUT) : n;
}

static void create_rules(void)
{
	struct { const char *what; __u32 key, value, max, flags; __u64 extra; } c[] = {
		{ "ok", 0, 0, RING, 0, 0 },
		{ "key_size 4", 4, 0, RING, 0, 0 },
		{ "value_size 8", 0, 8, RING, 0, 0 },
		{ "max_entries 3 pages", 0, 0, 3 * RING, 0, 0 },
		{ "max_entries 2048", 0, 0, 2048, 0, 0 },
		{ "max_entries 0", 0, 0, 0, 0, 0 },
		{ "BPF_F_NO_PREALLOC", 0, 0, RING, BPF_F_NO_PREALLOC, 0 },
		{ "BPF_F_RDONLY_PROG", 0, 0, RING, BPF_F_RDONLY_PROG, 0 },
		{ "map_extra 1", 0, 0, RING, 0, 1 },
	};
	unsigned int i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = c[i].flags,
			    .map_extra = c[i].extra);
		int fd = bpf_map_create(BPF_MAP_TYPE_USER_RINGBUF, "urb_t", c[i].key,
					c[i].value, c[i].max, &o);

		printf("create %s: %s\n", c[i].what, fd >= 0 ? "ok" : err_name(errno));
		if (fd >= 0)
			close(fd);
	}
}

static void mmap_rules(void)
{
	long page = sysconf(_SC_PAGESIZE);
	struct { const char *what; long off; size_t len; int prot; } m[] = {
		{ "consumer page r", 0, page, PROT_READ },
		{ "consumer page rw", 0, page, PROT_READ | PROT_WRITE },
		{ "consumer+producer rw", 0, 2 * page, PROT_READ | PROT_WRITE },
		{ "all r", 0, 2 * page + 2 * RING, PROT_READ },
		{ "producer+data twice rw", page, page + 2 * RING, PROT_READ | PROT_WRITE },
		{ "data rw", 2 * page, RING, PROT_READ | PROT_WRITE },
		{ "past the end rw", page, page + 3 * RING, PROT_READ | PROT_WRITE },
	};
	unsigned int i;

	for (i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
		void *p = mmap(NULL, m[i].len, m[i].prot, MAP_SHARED, urb_fd, m[i].off);

		printf("mmap %s: %s\n", m[i].what, p == MAP_FAILED ? err_name(errno) : "ok");
		if (p != MAP_FAILED)
			munmap(p, m[i].len);
	}
}

int main(int argc, char **argv)
{
	struct bpf_object *obj;
	struct timespec t0;
	pthread_t t;
	__u32 k = 0;
	__u64 v = 0;
	int i, n, ep;
	void *s;

	if (argc != 2) {
		fprintf(stderr, "usage: %s OBJ\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj || bpf_object__load(obj)) {
		fprintf(stderr, "load failed: %s\n", strerror(errno));
		return 1;
	}
	prog_fd = bpf_program__fd(bpf_object__find_program_by_name(obj, "drain"));
	ctl_fd = bpf_object__find_map_fd_by_name(obj, "ctl");
	rec_fd = bpf_object__find_map_fd_by_name(obj, "rec");
	urb_fd = bpf_object__find_map_fd_by_name(obj, "urb");
	rb = user_ring_buffer__new(urb_fd, NULL);
	if (!rb) {
		fprintf(stderr, "user_ring_buffer__new: %s\n", strerror(errno));
		return 1;
	}

	drain("empty ring", 0, 0);
	for (i = 0; i < 9; i++)
		push((unsigned int[]){ 0, 1, 7, 8, 9, 100, 255, 256, 13 }[i], i == 3 || i == 6);
	drain("9 samples, 2 discarded", 0, 0);
	drain("empty again", 0, BPF_RB_FORCE_WAKEUP);

	/* Wrapping: rounds of odd sizes fill the ring; drains stop early. */
	for (i = 0; i < 6; i++) {
		char what[64];

		n = fill(40 + i * 37);
		snprintf(what, sizeof(what), "round %d (%d pushed) stop at 3", i, n);
		drain(what, 3, 0);
		snprintf(what, sizeof(what), "round %d rest", i);
		drain(what, 0, i % 2 ? BPF_RB_NO_WAKEUP : 0);
	}

	/* A reservation not submitted yet ends the drain in front of it. */
	push(20, 0);
	s = user_ring_buffer__reserve(rb, 30);
	push(21, 0);
	drain("busy second", 0, 0);
	drain("still busy", 0, 0);
	memset(s, 0, 30);
	memcpy(s, &(unsigned int){ 30 }, 4);
	user_ring_buffer__submit(rb, s);
	drain("submitted", 0, 0);

	/* Only discarded records: released, none counted. */
	push(5, 1);
	push(6, 1);
	drain("two discarded", 0, 0);

	push(1, 0);
	drain("flags 4", 0, 4);
	drain("both wake-up flags", 0, BPF_RB_NO_WAKEUP | BPF_RB_FORCE_WAKEUP);

	/* The producer's own errors. */
	printf("reserve %d: %s\n", RING - 7,
	       user_ring_buffer__reserve(rb, RING - 7) ? "ok" : err_name(errno));
	printf("reserve 1<<30: %s\n",
	       user_ring_buffer__reserve(rb, 1u << 30) ? "ok" : err_name(errno));
	s = user_ring_buffer__reserve(rb, RING - 8);
	printf("reserve %d (the whole ring): %s\n", RING - 8, s ? "ok" : err_name(errno));
	if (s) {
		memcpy(s, &(unsigned int){ 8 }, 4);
		memcpy((char *)s + 4, &(unsigned int){ 999 }, 4);
		user_ring_buffer__submit(rb, s);
		printf("reserve 0 then: %s\n",
		       user_ring_buffer__reserve(rb, 0) ? "ok" : err_name(errno));
		drain("the whole ring", 0, 0);
	}

	/* epoll on the map fd: writable while there is room. */
	ep = epoll_create1(EPOLL_CLOEXEC);
	{
		struct epoll_event ev = { .events = EPOLLOUT, .data.u32 = 7 };

		printf("epoll_ctl: %d\n", epoll_ctl(ep, EPOLL_CTL_ADD, urb_fd, &ev));
	}
	printf("epoll empty ring: %d\n", epoll_out(ep));
	n = fill(8);
	n += fill(0);
	printf("filled with %d\n", n);
	printf("epoll full ring: %d\n", epoll_out(ep));

	/* A blocking producer on the full ring: times out, then a drain from
	 * another thread frees it. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	s = user_ring_buffer__reserve_blocking(rb, 8, 100);
	printf("reserve_blocking 100 ms on a full ring: %s after >= 100 ms: %s\n",
	       s ? "ok" : err_name(errno), ms_since(&t0) >= 99 ? "yes" : "no");
	pthread_create(&t, NULL, drain_later, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	s = user_ring_buffer__reserve_blocking(rb, 8, 10000);
	printf("reserve_blocking on a full ring: %s, woken by the drain: %s\n",
	       s ? "ok" : err_name(errno),
	       ms_since(&t0) >= 150 && ms_since(&t0) < 5000 ? "yes" : "no");
	pthread_join(t, NULL);
	fputs(later_out, stdout);
	free(later_out);
	if (s) {
		memcpy(s, &(unsigned int){ 8 }, 4);
		memcpy((char *)s + 4, &(unsigned int){ 1000 }, 4);
		user_ring_buffer__submit(rb, s);
	}
	printf("epoll after the drain: %d\n", epoll_out(ep));
	drain("the rest", 0, 0);
	close(ep);

	/* Element commands: a key pointer for a 0-byte key is EINVAL, else the
	 * ring's ENOTSUPP. */
	printf("lookup: %s\n",
	       bpf_map_lookup_elem(urb_fd, &k, &v) ? err_name(errno) : "ok");
	printf("lookup NULL key: %s\n",
	       bpf_map_lookup_elem(urb_fd, NULL, &v) ? err_name(errno) : "ok");
	printf("update: %s\n",
	       bpf_map_update_elem(urb_fd, &k, &v, 0) ? err_name(errno) : "ok");
	printf("update NULL key: %s\n",
	       bpf_map_update_elem(urb_fd, NULL, &v, 0) ? err_name(errno) : "ok");
	printf("delete NULL key: %s\n",
	       bpf_map_delete_elem(urb_fd, NULL) ? err_name(errno) : "ok");
	printf("get_next_key NULL key: %s\n",
	       bpf_map_get_next_key(urb_fd, NULL, &v) ? err_name(errno) : "ok");
	mmap_rules();
	create_rules();
	user_ring_buffer__free(rb);
	bpf_object__close(obj);
	return 0;
}
