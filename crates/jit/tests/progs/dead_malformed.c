// A program whose constant branch makes a block dead; the test corrupts a
// slot of that block (marked by its immediate) into a malformed
// instruction, which the kernel accepts and removes as dead code.
#include <linux/bpf.h>

#define SEC(name) __attribute__((section(name), used))
#define DEAD_MARK 0x5eadbee

SEC("xdp")
__attribute__((naked)) int dead_block(void)
{
	asm volatile("r0 = 2;"
		     "if r0 == 2 goto 1f;"
		     "r0 = 0x5eadbee;"
		     "r0 += 1;"
		     "1:"
		     "exit;" ::: "memory");
}

SEC("xdp")
__attribute__((naked)) int live_block(void)
{
	asm volatile("r0 = 2;"
		     "if r0 == 3 goto 1f;"
		     "r0 = 0x5eadbee;"
		     "r0 += 1;"
		     "1:"
		     "exit;" ::: "memory");
}

char _license[] SEC("license") = "GPL";
