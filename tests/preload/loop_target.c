// A long-running traced program for `bpfjet trace --pid` tests: calls
// loop_step(i % 5) and getpid() once per round, 20 rounds a second, for
// the number of seconds in argv[1] (default 10), then exits 0.
#include <stdlib.h>
#include <unistd.h>

// Longer than the 5-byte jump bpfjet patches a function's entry with.
static volatile int steps;

__attribute__((noinline, used)) int loop_step(int x)
{
	steps = steps + 1;
	__asm__ volatile("" ::: "memory");
	return x * 2;
}

int main(int argc, char **argv)
{
	int rounds = 20 * (argc > 1 ? atoi(argv[1]) : 10);

	for (int i = 0; i < rounds; i++) {
		loop_step(i % 5);
		getpid();
		usleep(50000);
	}
	return 0;
}
