/* Loads DL_LIB (given with -D) with dlopen twice: calls dl_work FIRST
 * times, dlclose (the library is unloaded), loads it again, calls dl_work
 * SECOND times, dlclose. Exits 9. */
#include <dlfcn.h>
#include <stdio.h>

#define FIRST 50
#define SECOND 70

static int run(int from, int count)
{
	void *h = dlopen(DL_LIB, RTLD_NOW);
	if (!h) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return -1;
	}
	int (*work)(int) = (int (*)(int))dlsym(h, "dl_work");
	if (!work)
		return -1;
	for (int i = from; i < from + count; i++)
		work(i);
	return dlclose(h);
}

int main(void)
{
	if (run(0, FIRST) || run(FIRST, SECOND))
		return 1;
	return 9;
}
