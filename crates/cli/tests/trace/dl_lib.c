/* A library the dlopen test target loads at run time: an entry/return
 * probe on dl_work and a USDT probe in it. */
#include <sys/sdt.h>

volatile long dl_sink;

__attribute__((noinline)) int dl_work(int x)
{
	dl_sink += x;
	if (x % 3 == 0)
		dl_sink ^= 0x55;
	DTRACE_PROBE1(bpfjet_dl, work, x);
	return x * 3 + 1;
}
