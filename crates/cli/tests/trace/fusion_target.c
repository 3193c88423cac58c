/* The traced command of tests/trace_fusion.rs: every pattern pairwise
 * fusion must keep identical to the hand-off map (docs/TRACING.md,
 * "Pairwise fusion"). Deterministic: the same calls, with the same
 * arguments and results, in every run; the only things that differ between
 * runs are thread ids and timestamps, which the tools do not report.
 *
 *   - work(x): N plain calls (the fsdist/bytes-per-call pattern);
 *   - rec / rec_noexist / rec_exist (depth): recursion on one thread, so
 *     entries of one thread-keyed map nest (overwrite, EEXIST, ENOENT);
 *   - hold(x): HOLDERS threads inside at once (a barrier inside), more
 *     than the hand-off map's max_entries: E2BIG for the late entries;
 *   - jump(x): leaves by longjmp, its exit never runs: the entries stay;
 *   - peek(x): a third program's function (the refused cases);
 *   - read/write system calls: two syscall pairs sharing one map. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Aligned: bpfjet patches a function's first 5 bytes atomically. */
#define NOINLINE __attribute__((noinline, noclone, used, aligned(16)))
#define HOLDERS 8
#define JUMPERS 2
#define ZERO_FD 100
#define NULL_FD 101

volatile long sink;

NOINLINE long work(long x)
{
	sink += x;
	return 3 * x + 1;
}

NOINLINE long peek(long x)
{
	sink += x;
	return x;
}

/* Not tail calls: the work after the inner call keeps every frame. */
NOINLINE long rec(long depth)
{
	long r = depth > 0 ? rec(depth - 1) : 0;

	sink += r;
	return r + 1;
}

NOINLINE long rec_noexist(long depth)
{
	long r = depth > 0 ? rec_noexist(depth - 1) : 0;

	sink += r;
	return r + 1;
}

NOINLINE long rec_exist(long depth)
{
	long r = depth > 0 ? rec_exist(depth - 1) : 0;

	sink += r;
	return r + 1;
}

static pthread_barrier_t inside;

NOINLINE long hold(long x)
{
	/* Every holder's entry has run before any holder returns. */
	pthread_barrier_wait(&inside);
	sink += x;
	return x + 100;
}

static __thread jmp_buf *escape;

NOINLINE long jump(long x)
{
	sink += x;
	if (escape)
		longjmp(*escape, 1);
	return x;
}

static void jump_out(long x)
{
	jmp_buf buf;

	escape = &buf;
	if (!setjmp(buf))
		jump(x);
	escape = NULL;
}

static void *holder(void *arg)
{
	hold((long)arg);
	return NULL;
}

static void *jumper(void *arg)
{
	jump_out((long)arg);
	return NULL;
}

int main(void)
{
	static char buf[4096];
	pthread_t t[HOLDERS];
	/* One malloc arena: a thread's first allocation would otherwise
	 * create an arena when it finds the others busy, and glibc then reads
	 * /sys/devices/system/cpu/online (two read(2) calls fsdist counts) —
	 * a number of reads that depends on timing, not on this program. */
	mallopt(M_ARENA_MAX, 1);
	/* At fixed descriptors, so a tool's events on them can be told from
	 * those of a tracer living in the process. */
	int zero = dup2(open("/dev/zero", O_RDONLY), ZERO_FD);
	int null = dup2(open("/dev/null", O_WRONLY), NULL_FD);

	if (zero != ZERO_FD || null != NULL_FD)
		return 1;
	for (long i = 0; i < 500; i++) {
		work(i);
		if (i % 5 == 0)
			peek(i);
		if (read(zero, buf, 1 + i % 4096) != 1 + i % 4096)
			return 1;
		if (write(null, buf, 1 + (i * 7) % 4096) != 1 + (i * 7) % 4096)
			return 1;
	}
	for (long d = 0; d < 6; d++) {
		rec(d);
		rec_noexist(d);
		rec_exist(d);
	}
	pthread_barrier_init(&inside, NULL, HOLDERS);
	for (long i = 0; i < HOLDERS; i++)
		pthread_create(&t[i], NULL, holder, (void *)(i + 1));
	for (long i = 0; i < HOLDERS; i++)
		pthread_join(t[i], NULL);
	/* The main thread's entry is overwritten by its later jumps; each
	 * jumper thread leaves one. */
	for (long i = 0; i < 3; i++)
		jump_out(1000 + i);
	for (long i = 0; i < JUMPERS; i++) {
		pthread_create(&t[i], NULL, jumper, (void *)(2000 + i));
		pthread_join(t[i], NULL);
	}
	work(7); /* after the longjmps: a clean call still pairs */
	return (int)(sink & 0) + 42;
}
