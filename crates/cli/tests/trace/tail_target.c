/* Tail calls between probed functions, as realloc(NULL, n) ends in
 * `jmp malloc`: outer(x) returns inner(x) by a jump (built -O2, so the
 * call is a sibling call), keeping outer's return slot. Exit code 42 when
 * the sums come out right. */
__attribute__((noinline)) long inner(long x)
{
	__asm__ volatile("" ::: "memory");
	return x + 1;
}

__attribute__((noinline)) long outer(long x)
{
	if (x & 1)
		return inner(x);
	return x;
}

int main(void)
{
	long sum = 0;
	for (long i = 1; i <= 1000; i++)
		sum += outer(i);
	/* odd i: i + 1, even i: i. */
	return sum == 500500 + 500 ? 42 : 1;
}
