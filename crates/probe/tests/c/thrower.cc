// A C++ library whose exceptions unwind through a function with a return
// probe (the probe test attaches to `thrower`).
#include <stdexcept>

extern "C" {
volatile long thrower_calls;

__attribute__((noinline)) int thrower(int x)
{
	__atomic_fetch_add(&thrower_calls, 1, __ATOMIC_RELAXED);
	if (x < 0)
		throw std::runtime_error("negative");
	return x * 2;
}

__attribute__((noinline)) int catcher(int x)
{
	try {
		return thrower(x) + 1;
	} catch (const std::exception &) {
		return -1;
	}
}
}
