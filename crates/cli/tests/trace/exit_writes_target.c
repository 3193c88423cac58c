/* Writes that happen after `exit()` has destroyed the main thread's
 * thread-locals: stdio's buffer flushed at exit (stdout on /dev/null, so
 * fully buffered) and an atexit handler's write. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void late(void)
{
	(void)!write(2, "late\n", 5);
}

int main(void)
{
	/* A traced call first: the thread's run state exists before exit. */
	(void)!write(2, "early\n", 6);
	atexit(late);
	/* Not a terminal: fully buffered (and out of the loaders' output). */
	if (!freopen("/dev/null", "w", stdout))
		return 1;
	printf("buffered until exit\n");
	return 0;
}
