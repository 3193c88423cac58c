/* percpu_target N: three forked children and one program executed by a
 * fourth (this binary again, `leaf N`) make N getppid calls (libc's, a
 * system call each) each, all at once, besides this process's own N. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void calls(long n)
{
	for (long i = 0; i < n; i++)
		getppid();
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "leaf") == 0) {
		calls(atol(argv[2]));
		return 0;
	}
	if (argc != 2)
		return 2;
	long n = atol(argv[1]);
	pid_t kids[4];
	for (int k = 0; k < 4; k++) {
		kids[k] = fork();
		if (kids[k] == 0) {
			if (k == 3) {
				execl("/proc/self/exe", argv[0], "leaf", argv[1], (char *)0);
				_exit(127);
			}
			calls(n);
			_exit(0);
		}
	}
	calls(n);
	int failed = 0;
	for (int k = 0; k < 4; k++) {
		int st;
		waitpid(kids[k], &st, 0);
		failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	}
	return failed;
}
