/* Four threads each make ROUNDS getppid calls with a little CPU work
 * between them (the sampling test's mix of system calls and samples). */
#include <pthread.h>
#include <unistd.h>

#define ROUNDS 50000
volatile unsigned long sink;

static void *work(void *arg)
{
	for (int r = 0; r < ROUNDS; r++) {
		getppid();
		for (int i = 0; i < 2000; i++)
			sink += i;
	}
	return arg;
}

int main(void)
{
	pthread_t t[3];
	for (int i = 0; i < 3; i++)
		if (pthread_create(&t[i], NULL, work, NULL))
			return 1;
	work(NULL);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	return 0;
}
