/* Functions the in-process probe tests attach to. Each counts its own
 * calls, so the tests compare what the probes saw with what happened. */
#include <setjmp.h>

volatile long add_one_calls, fib_calls, dive_calls;

__attribute__((noinline)) int add_one(int x)
{
	__atomic_fetch_add(&add_one_calls, 1, __ATOMIC_RELAXED);
	return x + 1;
}

/* Exported, compiled -fPIC with default semantic interposition: the call
 * to add_one goes through this library's PLT. */
__attribute__((noinline)) int add_one_via_plt(int x)
{
	return add_one(x) * 2;
}

__attribute__((noinline)) long fib(int n)
{
	__atomic_fetch_add(&fib_calls, 1, __ATOMIC_RELAXED);
	if (n < 2)
		return n;
	long a = fib(n - 1);
	long b = fib(n - 2);
	return a + b;
}

__attribute__((noinline)) double scale(double x, int k)
{
	return x * k;
}

static jmp_buf escape;

/* Recurses `depth` times, then longjmps out of every level at once. */
__attribute__((noinline)) int dive(int depth)
{
	__atomic_fetch_add(&dive_calls, 1, __ATOMIC_RELAXED);
	if (depth == 0)
		longjmp(escape, 1);
	return dive(depth - 1) + 1;
}

int dive_and_escape(int depth)
{
	if (setjmp(escape) == 0)
		return dive(depth);
	return -1;
}
