/* A single-threaded program that is almost always taking a signal: it
 * raises SIGUSR1 at itself in a loop, a handler counting them
 * (crates/cli/tests/trace_pid.rs). Whenever `bpfjet trace --pid` stops it,
 * its one thread is likely in a signal-delivery stop, where no call can
 * be injected; the attach has to wait for a stop that is not one. */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

static volatile sig_atomic_t taken;

static void on_usr1(int sig)
{
	(void)sig;
	taken++;
}

int main(void)
{
	struct sigaction sa = {0};
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL))
		return 1;
	printf("ready\n");
	fflush(stdout);
	for (;;)
		raise(SIGUSR1);
}
