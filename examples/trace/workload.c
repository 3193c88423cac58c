// The traced command of the tracing differential test
// (tests/trace/differential.sh): a fixed sequence of system calls and libc
// calls, so a tool's maps and events can be compared between the kernel
// (ktrace) and bpfjet (`bpfjet trace`). Its files sit at fixed descriptor
// numbers (100-103) so events can be told from those of the dynamic loader
// or of a tracer living in the process.
//
//   workload [ROUNDS [PACE_US]]   (default 200 rounds, no pause)
//
// PACE_US pauses between rounds, so a ring-buffer consumer polling on
// another CPU keeps up and the kernel side of a comparison loses nothing.
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { FD_ZERO = 100, FD_NULL = 101, FD_FULL = 102, FD_CLOSED = 103 };

static void at(const char *path, int flags, int fd)
{
	int f = open(path, flags);

	if (f < 0 || dup2(f, fd) != fd) {
		perror(path);
		exit(1);
	}
	close(f);
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 200;
	int pace_us = argc > 2 ? atoi(argv[2]) : 0;
	static char buf[8192];

	at("/dev/zero", O_RDONLY, FD_ZERO);
	at("/dev/null", O_WRONLY, FD_NULL);
	at("/dev/full", O_WRONLY, FD_FULL);
	for (int i = 0; i < rounds; i++) {
		/* Sizes 1..8192 in a fixed pattern: several log2 buckets. */
		size_t n = 1 + (size_t)(i * 37) % sizeof(buf);

		memset(buf, 'a' + i % 26, n);
		if (read(FD_ZERO, buf, n) != (ssize_t)n)
			return 1;
		buf[0] = (char)i; /* data the -all tool copies */
		if (write(FD_NULL, buf, n) != (ssize_t)n)
			return 1;
		getppid();
		if (i % 10 == 0) {
			/* Failing calls: ENOSPC and EBADF. */
			if (write(FD_FULL, buf, 16) != -1 || write(FD_CLOSED, buf, 8) != -1)
				return 1;
			sched_yield();
		}
		if (pace_us)
			usleep(pace_us);
	}
	return 0;
}
