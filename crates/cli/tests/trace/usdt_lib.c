/* A shared library with a USDT probe (the probe's PATH is this library). */
#include <sys/sdt.h>

int lib_step(int x)
{
	DTRACE_PROBE2(bpfjet_lib, step, x, x * 7);
	return x + 1;
}
