/* Functions too short for a 5-byte jump, for tests/trace_int3_entry.rs:
 * each is a single return or two instructions (checked there with the
 * symbol sizes), so bpfjet probes them with an int3 over the first byte.
 * tiny_zero returns 0 (xor eax,eax; ret), tiny_inc x + 1 (lea; ret),
 * tiny_void nothing (ret). Each is called through a volatile pointer so
 * that no call is folded away; the exit code is 7. */
#include <stdio.h>

__attribute__((noinline, used)) int tiny_zero(void)
{
	return 0;
}

__attribute__((noinline, used)) int tiny_inc(int x)
{
	return x + 1;
}

__attribute__((noinline, used)) void tiny_void(void)
{
}

int (*volatile p_zero)(void) = tiny_zero;
int (*volatile p_inc)(int) = tiny_inc;
void (*volatile p_void)(void) = tiny_void;

int main(void)
{
	long sum = 0;
	for (int i = 0; i < 100; i++) {
		sum += p_zero();
		sum += p_inc(i);
		p_void();
	}
	printf("%ld\n", sum);
	return sum == 5050 ? 7 : 1;
}
