/* The workload of tests/preload/bpftrace.sh's libc wildcard: a known set
 * of calls of libc functions a wildcard uprobe matches, one of them
 * (strerrordesc_np) a function whose whole body is a tail-call `jmp`. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
	char buf[64];
	for (int i = 0; i < 3; i++)
		free(strdup("bpfjet"));
	for (int i = 0; i < 2; i++)
		free(strndup("bpfjet", 3));
	for (int i = 0; i < 4; i++)
		snprintf(buf, sizeof(buf), "%d", i);
	for (int i = 0; i < 2; i++)
		if (!strerrordesc_np(2))
			return 1;
	return 0;
}
