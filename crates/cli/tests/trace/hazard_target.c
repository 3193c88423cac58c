/* A function a thread is inside of in a way an entry patch must not meet
 * (crates/cli/tests/trace_pid.rs): hazard_fn's second instruction is a
 * 2-byte indirect call, so while the callee runs, the caller's frame
 * returns to hazard_fn + 3, inside the 5 bytes a jump patch replaces.
 * The main thread stays in that callee (pause) for the whole run. */
#include <stdio.h>
#include <unistd.h>

__asm__(".globl hazard_fn\n"
	".type hazard_fn, @function\n"
	"hazard_fn:\n"
	"  push %rbx\n"
	"  call *%rdi\n"
	"  pop %rbx\n"
	"  nop\n"
	"  nop\n"
	"  ret\n"
	".size hazard_fn, .-hazard_fn\n");

void hazard_fn(void (*f)(void));

static void wait_forever(void)
{
	for (;;)
		pause();
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	hazard_fn(wait_forever);
	return 0;
}
