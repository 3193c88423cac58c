/* uprobe.multi target: functions mf_alpha (also named mf_alias), mf_beta,
 * mf_gamma and other, each called a known number of times (see
 * trace_multi.rs). Built without PIE so that function addresses
 * (bpf_get_func_ip) are the same in every run. */
volatile long sink;

__attribute__((noinline)) int mf_alpha(int x)
{
	sink += x;
	return x + 1;
}

int mf_alias(int x) __attribute__((alias("mf_alpha")));

__attribute__((noinline)) int mf_beta(int x)
{
	sink += 2 * x;
	return x * 2;
}

__attribute__((noinline)) int mf_gamma(int x)
{
	sink -= x;
	return x - 3;
}

__attribute__((noinline)) int other(int x)
{
	sink ^= x;
	return x ^ 5;
}

int main(void)
{
	for (int i = 0; i < 100; i++)
		mf_alpha(i);
	for (int i = 0; i < 200; i++)
		mf_beta(i);
	for (int i = 0; i < 300; i++)
		mf_gamma(i);
	for (int i = 0; i < 400; i++)
		other(i);
	return 7;
}
