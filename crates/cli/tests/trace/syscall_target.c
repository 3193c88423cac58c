/* Per-system-call tracing cost: makes N (argv[1]) cheap system calls in a
 * tight loop through libc's wrappers and prints the loop's nanoseconds per
 * call, as CPU time of the calling thread (user + kernel: whatever a tracer
 * does on the thread's behalf, in the kernel or in the process, is charged
 * to it) and as wall-clock time. argv[2] picks the call:
 *   read     read(/dev/zero, buf, 1)       (libc wrapper with a fast path)
 *   write    write(/dev/null, buf, 1)
 *   pread    pread64(/dev/zero, buf, 1, 0)
 *   getppid  getppid()                     (fast path since branch morewrap)
 *   fstat    fstat(/dev/zero)              (newfstatat, through fstatat)
 *   poll     poll(/dev/zero readable, 0 ms)
 *   rawppid  a raw getppid `syscall`       (no wrapper: Syscall User
 *                                           Dispatch's signal when traced)
 *   sysfn    syscall(SYS_getppid)          (glibc's syscall(): fast path
 *                                           since session 10)
 * Run untraced, under the kernel's tracepoints and under bpfjet trace, the
 * difference is what tracing one system call costs. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "raw_syscall.h"

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	const char *call = argc > 2 ? argv[2] : "read";
	int zero = open("/dev/zero", O_RDONLY);
	int null = open("/dev/null", O_WRONLY);
	char buf[64] = {0};
	struct timespec a, b, wa, wb;
	long errors = 0;

	if (zero < 0 || null < 0) {
		perror("open");
		return 2;
	}
	int which = !strcmp(call, "read") ? 0 : !strcmp(call, "write") ? 1 :
		    !strcmp(call, "pread") ? 2 : !strcmp(call, "getppid") ? 3 :
		    !strcmp(call, "fstat") ? 4 : !strcmp(call, "poll") ? 5 :
		    !strcmp(call, "rawppid") ? 6 : !strcmp(call, "sysfn") ? 7 : -1;
	struct stat st;
	struct pollfd pfd = { zero, POLLIN, 0 };
	if (which < 0) {
		fprintf(stderr, "unknown call %s\n", call);
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &wa);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
	for (long i = 0; i < n; i++) {
		long r;
		switch (which) {
		case 0: r = read(zero, buf, 1); break;
		case 1: r = write(null, buf, 1); break;
		case 2: r = pread(zero, buf, 1, 0); break;
		case 3: r = getppid(); break;
		case 4: r = fstat(zero, &st); break;
		case 5: r = poll(&pfd, 1, 0); break;
		case 6: r = raw_syscall(SYS_getppid, 0, 0, 0); break;
		default: r = syscall(SYS_getppid); break;
		}
		errors += r < 0;
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
	clock_gettime(CLOCK_MONOTONIC, &wb);
	double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
	double wall = (wb.tv_sec - wa.tv_sec) * 1e9 + (wb.tv_nsec - wa.tv_nsec);
	printf("ns_per_call %.2f\n", ns / n);
	printf("wall_ns_per_call %.2f\n", wall / n);
	printf("errors %ld\n", errors);
	return errors != 0;
}
