/* Many short-lived threads, one after another (argv[1], default 300), each
 * burning a little CPU: under a low RLIMIT_SIGPENDING every thread must
 * still get its sampling timer (an exited thread's timer is deleted). */
#include <pthread.h>
#include <stdlib.h>

volatile unsigned long sink;

static void *burn(void *arg)
{
	for (unsigned long i = 0; i < 200000; i++)
		sink += i;
	return arg;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 300;
	for (int i = 0; i < n; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, burn, NULL) || pthread_join(t, NULL))
			return 1;
	}
	return 0;
}
