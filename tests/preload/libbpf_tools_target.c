/* The workload tests/preload/libbpf_tools.sh traces with Debian's
 * libbpf-tools: a known, countable set of calls per mode.
 *
 *   libbpf_tools_target resolve          3 gethostbyname + 3 getaddrinfo of localhost
 *   libbpf_tools_target open DIR         opens DIR/marker.0..2, DIR/marker.missing
 *   libbpf_tools_target kill             kill(self, 0), kill(self, SIGCHLD),
 *                                        kill(no such pid, SIGTERM)
 *   libbpf_tools_target calls N          N getppid system calls, N calls of work()
 *   libbpf_tools_target wait FILE N      waits for FILE to exist, then N calls of
 *                                        work(), then sleeps until killed
 */
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* What funclatency times: a function of this binary, kept as a symbol. */
__attribute__((noinline)) int work(int i)
{
	volatile int x = i;
	return x * 3;
}

static int calls(long n)
{
	int sum = 0;
	for (long i = 0; i < n; i++) {
		syscall(SYS_getppid);
		sum += work((int)i);
	}
	return sum & 1;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "resolve")) {
		for (int i = 0; i < 3; i++) {
			struct addrinfo *ai = NULL;
			if (!gethostbyname("localhost"))
				return 1;
			if (getaddrinfo("localhost", NULL, NULL, &ai))
				return 1;
			freeaddrinfo(ai);
		}
		return 0;
	}
	if (argc >= 3 && !strcmp(argv[1], "open")) {
		static const char *names[] = { "marker.0", "marker.1", "marker.2", "marker.missing" };
		char path[4096];
		for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
			snprintf(path, sizeof(path), "%s/%s", argv[2], names[i]);
			int fd = open(path, O_RDONLY);
			if (fd >= 0)
				close(fd);
		}
		return 0;
	}
	if (argc >= 2 && !strcmp(argv[1], "kill")) {
		/* SIGCHLD: ignored by default, so the process goes on. */
		kill(getpid(), 0);
		kill(getpid(), SIGCHLD);
		kill(0x3ffffff0, SIGTERM);
		return 0;
	}
	if (argc >= 3 && !strcmp(argv[1], "calls"))
		return calls(atol(argv[2]));
	if (argc >= 4 && !strcmp(argv[1], "wait")) {
		while (access(argv[2], F_OK))
			usleep(10000);
		calls(atol(argv[3]));
		for (;;)
			pause();
	}
	fprintf(stderr, "usage: %s resolve | open DIR | kill | calls N | wait FILE N\n",
		argv[0]);
	return 2;
}
