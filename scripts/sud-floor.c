/* The floor of system-call tracing under Syscall User Dispatch (SUD), for
 * the fusion benchmarks (scripts/bench-fusion.py, bench-fusion-percall.sh):
 * an LD_PRELOAD library that switches SUD on in every thread of the process
 * (the main thread at load, threads made by pthread_create, the child of a
 * fork, which the kernel does not let inherit it) with the thread's selector
 * byte always ALLOW. No system call is ever blocked and no signal is taken,
 * so what the workload loses is what SUD alone costs per system call: the
 * kernel's dispatch check and selector read on every entry. bpfjet's
 * non-wrapper system calls run under SUD, so no change to bpfjet removes
 * this part.
 *
 *   cc -O2 -shared -fPIC -o sud-floor.so scripts/sud-floor.c -ldl -lpthread
 *   LD_PRELOAD=./sud-floor.so CMD...
 *
 * It prints "sud-floor: on in N threads" at exit on stderr so a run proves
 * it was active (0: prctl failed, reported with the errno once).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#ifndef PR_SET_SYSCALL_USER_DISPATCH
#define PR_SET_SYSCALL_USER_DISPATCH 59
#endif
#ifndef PR_SYS_DISPATCH_ON
#define PR_SYS_DISPATCH_ON 1
#endif
#define SELECTOR_ALLOW 0

static __thread volatile char selector = SELECTOR_ALLOW;
static int threads_on;
static int reported_failure;

static void sud_on(void)
{
	/* No region is exempt (offset 0, length 0): every system call is
	 * checked against the selector, which stays ALLOW. */
	if (prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_ON, 0, 0,
		  &selector) == 0) {
		__atomic_add_fetch(&threads_on, 1, __ATOMIC_RELAXED);
	} else if (!__atomic_exchange_n(&reported_failure, 1, __ATOMIC_RELAXED)) {
		fprintf(stderr, "sud-floor: prctl(PR_SET_SYSCALL_USER_DISPATCH): %s\n",
			strerror(errno));
	}
}

struct start {
	void *(*fn)(void *);
	void *arg;
};

static void *start_with_sud(void *p)
{
	struct start s = *(struct start *)p;
	free(p);
	sud_on();
	return s.fn(s.arg);
}

int pthread_create(pthread_t *t, const pthread_attr_t *attr,
		   void *(*fn)(void *), void *arg)
{
	static int (*real)(pthread_t *, const pthread_attr_t *,
			   void *(*)(void *), void *);
	if (!real)
		real = dlsym(RTLD_NEXT, "pthread_create");
	struct start *s = malloc(sizeof *s);
	if (!s)
		return EAGAIN;
	s->fn = fn;
	s->arg = arg;
	int r = real(t, attr, start_with_sud, s);
	if (r)
		free(s);
	return r;
}

static void report(void)
{
	fprintf(stderr, "sud-floor: on in %d threads\n",
		__atomic_load_n(&threads_on, __ATOMIC_RELAXED));
}

__attribute__((constructor)) static void init(void)
{
	pthread_atfork(NULL, NULL, sud_on);
	atexit(report);
	sud_on();
}
