/* A system call made by a `syscall` instruction here, not through libc
 * (not even its syscall() function, which bpfjet's fast path covers): the
 * signal path under bpfjet. Returns the raw result (-errno on failure).
 * Shared by the test targets that mean the signal path. */
#ifndef RAW_SYSCALL_H
#define RAW_SYSCALL_H
static inline long raw_syscall(long nr, long a, long b, long c)
{
	long r;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "a"(nr), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return r;
}
#endif
