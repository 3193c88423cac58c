// Removes bpffs pins with unlink(), as libbpf's bpf_object__unpin_*() do.
//   unpin PATH...
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int failed = 0;

	for (int i = 1; i < argc; i++) {
		if (unlink(argv[i])) {
			fprintf(stderr, "unpin %s: %s\n", argv[i], strerror(errno));
			failed = 1;
		}
	}
	return failed;
}
