/* Forks three children with glibc's fork(); each prints its own pid and
 * exits at once, the parent prints its pid (the ids the trace_fork test
 * expects the child's first events to carry). */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
	for (int i = 0; i < 3; i++) {
		fflush(stdout);
		pid_t kid = fork();
		if (kid < 0)
			return 2;
		if (kid == 0) {
			printf("child %d\n", (int)getpid());
			fflush(stdout);
			_exit(0);
		}
		int status;
		if (waitpid(kid, &status, 0) != kid || !WIFEXITED(status))
			return 3;
	}
	printf("parent %d\n", (int)getpid());
	return 0;
}
