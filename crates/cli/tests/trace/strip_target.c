/* A target tests/preload/uprobe_multi.sh strips, its symbols kept in a
 * detached debug file (objcopy --only-keep-debug, --add-gnu-debuglink):
 * hidden_step is a static function only the debug file names;
 * tail_call is a whole function of one `jmp rel32` (a tail call to a
 * function in another section), which bpfjet must tell from an earlier
 * patch by the file's own bytes. 50 calls of each; exit code 7. */
#include <stdio.h>

__attribute__((noinline, section(".text.far"))) int far_double(int x)
{
	volatile int y = x;
	return y * 2;
}

__attribute__((noinline)) static int hidden_step(int x)
{
	volatile int y = x;
	return y + 1;
}

__attribute__((noinline)) int tail_call(int x)
{
	return far_double(x);
}

int (*volatile p_hidden)(int) = hidden_step;
int (*volatile p_tail)(int) = tail_call;

int main(void)
{
	long sum = 0;
	for (int i = 0; i < 50; i++)
		sum += p_hidden(i) + p_tail(i);
	printf("%ld\n", sum);
	return 7;
}
