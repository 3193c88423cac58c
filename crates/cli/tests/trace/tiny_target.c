/* Functions too short for a 5-byte jump, for tests/trace_int3_entry.rs:
 * each is a single return or two instructions (checked there with the
 * symbol sizes), so bpfjet probes them with an int3 over the first byte.
 * tiny_zero returns 0 (xor eax,eax; ret), tiny_inc x + 1 (lea; ret),
 * tiny_void nothing (ret). Each is called through a volatile pointer so
 * that no call is folded away; the exit code is 7.
 *
 * loop_sum(n) (n > 0) returns n + (n-1) + ... + 1 in a loop whose head
 * is 2 bytes past the instruction at loop_sum+2: a jump at +2 would
 * overwrite that branch target, so a uprobe at loop_sum+2 (an `add`, not
 * a `nop`) is an int3 executing the `add` out of line, hit once per call. */
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

/* xor eax,eax (2) | +2: add eax,edi (2) | +4: loop: dec edi (2) |
 * +6: jz out (2) | +8: add eax,edi (2) | +10: jmp loop (2) | +12: ret */
__attribute__((naked, noinline, used)) int loop_sum(int n)
{
	__asm__("xor %eax, %eax\n"
		"add %edi, %eax\n"
		"1: dec %edi\n"
		"jz 2f\n"
		"add %edi, %eax\n"
		"jmp 1b\n"
		"2: ret\n");
}

int (*volatile p_zero)(void) = tiny_zero;
int (*volatile p_loop)(int) = loop_sum;
int (*volatile p_inc)(int) = tiny_inc;
void (*volatile p_void)(void) = tiny_void;

int main(void)
{
	long sum = 0, loops = 0;
	for (int i = 0; i < 100; i++) {
		sum += p_zero();
		sum += p_inc(i);
		p_void();
		loops += p_loop(i + 1);
	}
	printf("%ld %ld\n", sum, loops);
	/* sum of i(i+1)/2 for i = 1..100 */
	return sum == 5050 && loops == 171700 ? 7 : 1;
}
