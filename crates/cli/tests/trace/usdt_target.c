/* USDT probes (<sys/sdt.h>) of the bpfjet trace tests. Every count is a
 * constant of this file (see trace_usdt.rs):
 *  - bpfjet:tick (main, register and constant arguments of several sizes
 *    and signs, at -O2) TICKS times;
 *  - bpfjet:frame (a function built at -O0: arguments are memory operands
 *    relative to %rbp) FRAMES times;
 *  - bpfjet:guarded, behind its semaphore: fired only while a tracer has
 *    raised it; the program counts the times it saw it raised and exits
 *    with 40 + (that count == GUARDS);
 *  - bpfjet:thread from THREADS threads, PER_THREAD times each;
 *  - bpfjet_lib:step in libusdt_lib.so, LIB_STEPS times. */
#define _SDT_HAS_SEMAPHORES 1
#include <pthread.h>
#include <sys/sdt.h>

#define TICKS 500
#define FRAMES 300
#define GUARDS 200
#define THREADS 4
#define PER_THREAD 2500
#define LIB_STEPS 100

/* With _SDT_HAS_SEMAPHORES every probe of the file has one. */
#define SEMAPHORE(name) unsigned short bpfjet_##name##_semaphore __attribute__((unused, section(".probes")))
SEMAPHORE(tick);
SEMAPHORE(frame);
SEMAPHORE(guarded);
SEMAPHORE(thread);

int lib_step(int x);

__attribute__((noinline, optimize("O0"))) long frame(long a, int b, short c, signed char d)
{
	long local = a * 2;
	DTRACE_PROBE5(bpfjet, frame, a, b, c, d, local);
	return local + b;
}

static void *thread_main(void *arg)
{
	long id = (long)arg;
	for (int i = 0; i < PER_THREAD; i++)
		DTRACE_PROBE2(bpfjet, thread, id, i);
	return 0;
}

int main(void)
{
	volatile long sink = 0;
	int seen = 0;
	pthread_t t[THREADS];

	for (int i = 0; i < TICKS; i++) {
		unsigned char small = (unsigned char)(i * 3);
		short neg = (short)-i;
		long big = (long)i << 33;
		DTRACE_PROBE5(bpfjet, tick, i, small, neg, big, 5);
		sink += small;
	}
	for (int i = 0; i < FRAMES; i++)
		sink += frame(i, -i, (short)(i - 150), (signed char)(i - 100));
	for (int i = 0; i < GUARDS; i++) {
		if (bpfjet_guarded_semaphore) {
			seen++;
			STAP_PROBE1(bpfjet, guarded, i);
		}
	}
	for (long i = 0; i < THREADS; i++)
		pthread_create(&t[i], 0, thread_main, (void *)i);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], 0);
	for (int i = 0; i < LIB_STEPS; i++)
		sink += lib_step(i);
	return 40 + (seen == GUARDS);
}
